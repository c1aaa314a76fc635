package audit_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/audit"
)

func entry(id string) audit.Entry {
	return audit.Entry{
		DecisionID: id,
		Principal:  "partner-7",
		Tenant:     "acme",
		Actor:      []string{"https://agent.example", "orchestrator"},
		Capability: "reconcile-invoice",
		Handler:    "reconcile",
		Scopes:     []string{"recon.run"},
		Outcome:    audit.Failed("deadline_exceeded"),
		Duration:   1500 * time.Microsecond,
		Operation:  "SendMessage",
	}
}

// lines decodes JSON lines, checking and removing the timestamp.
func lines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line %q", sc.Text())
		ts, ok := m["ts"].(string)
		require.True(t, ok)
		_, err := time.Parse(time.RFC3339Nano, ts)
		require.NoError(t, err)
		delete(m, "ts")
		out = append(out, m)
	}
	require.NoError(t, sc.Err())
	return out
}

func TestLogLines(t *testing.T) {
	tests := []struct {
		name  string
		entry audit.Entry
		want  map[string]any
	}{
		{name: "every field", entry: entry("d-1"), want: map[string]any{
			"stream": "audit", "msg": "handler call", "decision_id": "d-1", "operation": "SendMessage",
			"principal": "partner-7", "tenant": "acme", "actor": []any{"https://agent.example", "orchestrator"},
			"capability": "reconcile-invoice", "handler": "reconcile", "scopes": []any{"recon.run"},
			"outcome": "error:deadline_exceeded", "duration_us": float64(1500),
		}},
		{name: "anonymous, no scopes: fields still present", entry: audit.Entry{DecisionID: "d-2", Capability: "lookup-invoice", Handler: "lookup", Outcome: audit.OutcomeOK, Operation: "SendMessage"},
			want: map[string]any{
				"stream": "audit", "msg": "handler call", "decision_id": "d-2", "operation": "SendMessage",
				"principal": "", "tenant": "", "actor": []any{}, "capability": "lookup-invoice", "handler": "lookup",
				"scopes": []any{}, "outcome": "ok", "duration_us": float64(0),
			}},
		{name: "an answer refused for its output modes", entry: audit.Entry{DecisionID: "d-3", Capability: "lookup-invoice", Handler: "lookup",
			Outcome: audit.Failed("CONTENT_TYPE_NOT_SUPPORTED"), Operation: "SendMessage", Accepted: []string{"text/plain"}, Produced: []string{"application/json"}},
			want: map[string]any{
				"stream": "audit", "msg": "handler call", "decision_id": "d-3", "operation": "SendMessage",
				"principal": "", "tenant": "", "actor": []any{}, "capability": "lookup-invoice", "handler": "lookup",
				"scopes": []any{}, "outcome": audit.Failed("CONTENT_TYPE_NOT_SUPPORTED"), "duration_us": float64(0),
				"accepted_output_modes": []any{"text/plain"}, "produced_output_modes": []any{"application/json"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l, c, err := audit.New(config.Audit{}, &buf)
			require.NoError(t, err)
			l.Log(tt.entry)
			require.NoError(t, c.Close())
			got := lines(t, buf.Bytes())
			require.Len(t, got, 1)
			require.Equal(t, tt.want, got[0])
		})
	}
}

func TestLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	for i, id := range []string{"d-1", "d-2"} { // the second run appends
		l, c, err := audit.New(config.Audit{File: path}, nil)
		require.NoError(t, err)
		l.Log(entry(id))
		require.NoError(t, c.Close())
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		got := lines(t, b)
		require.Len(t, got, i+1)
		require.Equal(t, id, got[i]["decision_id"])
		require.Equal(t, "audit", got[i]["stream"])
	}
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, audit.FileMode, fi.Mode().Perm())

	_, _, err = audit.New(config.Audit{File: filepath.Join(t.TempDir(), "missing", "audit.jsonl")}, nil)
	require.ErrorContains(t, err, "audit.file: open ")
	_, _, err = audit.New(config.Audit{}, nil)
	require.EqualError(t, err, "audit: no output")
}

func TestConcurrentLinesStayWhole(t *testing.T) {
	var buf bytes.Buffer
	l, c, err := audit.New(config.Audit{}, &buf)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { l.Log(entry("d")) })
	}
	wg.Wait()
	require.NoError(t, c.Close())
	require.Len(t, lines(t, buf.Bytes()), 50)
}

func TestNilLoggerIsNoOp(t *testing.T) {
	var l *audit.Logger
	require.NotPanics(t, func() { l.Log(entry("d")) })
	require.NotPanics(t, func() { (&audit.Logger{}).Log(entry("d")) })
}

// TestEntryHasNoRoomForSecrets pins Entry's fields: a new field (say, for a
// token or message text) has to be added here on purpose.
func TestEntryHasNoRoomForSecrets(t *testing.T) {
	var names []string
	rt := reflect.TypeFor[audit.Entry]()
	for i := range rt.NumField() {
		names = append(names, rt.Field(i).Name)
	}
	require.Equal(t, []string{"DecisionID", "Principal", "Tenant", "Actor", "Capability", "Handler", "Scopes", "Outcome", "Duration", "Operation", "Accepted", "Produced", "Span"}, names)
}

// TestTraceIDWhenTraced: an entry whose request is traced carries the trace
// id, so the audit line and the trace find each other.
func TestTraceIDWhenTraced(t *testing.T) {
	var buf bytes.Buffer
	l, c, err := audit.New(config.Audit{}, &buf)
	require.NoError(t, err)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	e := entry("d-t")
	e.Span = trace.SpanFromContext(trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})))
	l.Log(e)
	l.Log(entry("d-u"))
	require.NoError(t, c.Close())
	ls := lines(t, buf.Bytes())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", ls[0]["trace_id"])
	require.NotContains(t, ls[1], "trace_id", "untraced: no trace id")
}
