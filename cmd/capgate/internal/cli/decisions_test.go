package cli

import (
	"bytes"
	"compress/gzip"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// event is a decision event with id, as capgate's console writes one.
func event(id string) string {
	return `{"level":"info","msg":"decision","decision_id":"` + id + `","path":"capgate/authz/decision","result":{"allow":true,"result":"allow"},` +
		`"timestamp":"2026-12-03T15:00:00Z","type":"openpolicyagent.org/decision_logs"}`
}

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.String()
}

// readIDs reads log with lim and returns the decision ids read, in order.
func readIDs(log string, lim logLimits) ([]string, error) {
	var ids []string
	err := readDecisions(strings.NewReader(log), lim, func(e *loggedDecision) error {
		ids = append(ids, e.DecisionID)
		return nil
	})
	return ids, err
}

// What a decision log holds besides decision events is skipped: other
// lines, JSON that is no decision event (the audit stream's handler call
// and the hint-ignored line carry a decision id), lines cut short; several
// values on a line and arrays (OPA's uploads) are read event by event.
func TestReadDecisionsReadsDecisionEventsOnly(t *testing.T) {
	lim := defaultLogLimits()
	log := strings.Join([]string{
		"starting capgate",
		event("a"),
		`{"level":"info","ts":"2026-12-03T15:00:00Z","msg":"handler call","stream":"audit","decision_id":"a","operation":"SendMessage"}`,
		`{"level":"info","ts":1764770000.1,"msg":"skill hint ignored","decision_id":"a","hint":"x"}`,
		`{"decision_id":"c","path":"p","timestamp":"t","type":"something else"}`,
		`[` + event("b") + `, 3, {"x":1}, ` + event("c") + `]` + event("d"),
		`  ` + event("e") + ` trailing text`,
		`{"decision_id":"cut", "path":"capgate/authz`,
		`[` + event("f") + `, {"cut`,
		"",
		`"a string"`,
		event("g"),
	}, "\n")
	want := []string{"a", "b", "c", "d", "e", "f", "g"}
	for name, l := range map[string]string{"plain": log, "gzip": gzipped(t, log), "no final newline": log, "final newline": log + "\n"} {
		ids, err := readIDs(l, lim)
		require.NoError(t, err, name)
		require.Equal(t, want, ids, name)
	}
}

// Every bound is refused with its line (and the event's place in an
// array); what stays within them reads whole.
func TestReadDecisionsBounds(t *testing.T) {
	small := logLimits{bytes: 4096, eventBytes: 512, events: 10}
	big := `{"decision_id":"big","path":"p","timestamp":"t","input":{"pad":"` + strings.Repeat("x", 600) + `"}}`
	for _, tt := range []struct {
		name, log string
		want      string // the error; "" for none
		ids       []string
	}{
		{name: "a large event on its line", log: event("a") + "\n" + big + "\n" + event("b"),
			want: "2: an event of more than 512 bytes"},
		{name: "a large event in an array", log: event("a") + "\n[" + event("b") + "," + event("c") + "," + big + "]",
			want: "2: event 3 of the line's array: an event of more than 512 bytes"},
		{name: "a large event cut short is still too large", log: big[:550],
			want: "1: an event of more than 512 bytes"},
		{name: "whitespace counts", log: "[" + event("a") + "," + strings.Repeat(" ", 600) + event("b") + "]",
			want: "1: event 2 of the line's array: an event of more than 512 bytes"},
		{name: "too many events", log: "[" + strings.Repeat("{},", 12) + "{}]",
			want: "1: event 11 of the line's array: more than 10 events"},
		{name: "too many events over lines", log: strings.Repeat("{}\n", 8) + "[{},{},{}]",
			want: "9: event 3 of the line's array: more than 10 events"},
		{name: "too many decompressed bytes", log: gzipped(t, strings.Repeat("not a decision\n", 300)),
			want: "274: decompresses to more than 4096 bytes"},
		{name: "a long line that is not JSON", log: strings.Repeat("x", 3000) + "\n" + event("a"), ids: []string{"a"}},
		{name: "a plain file is not bounded by the decompressed bytes", log: strings.Repeat("not a decision\n", 300) + event("a"), ids: []string{"a"}},
		{name: "up to the bounds", log: gzipped(t, strings.Repeat(event("a")+"\n", 10)), ids: strings.Fields(strings.Repeat("a ", 10))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ids, err := readIDs(tt.log, small)
			if tt.want == "" {
				require.NoError(t, err)
				require.Equal(t, tt.ids, ids)
				return
			}
			var le *logError
			require.True(t, errors.As(err, &le), "%v", err)
			require.True(t, strings.HasPrefix(err.Error(), tt.want), "%q does not start with %q", err, tt.want)
		})
	}
}

// A decision found ends the read: the rest of the file is not read.
func TestFindDecisionStopsAtTheEvent(t *testing.T) {
	r := strings.NewReader(event("a") + "\n" + event("b") + "\n" + strings.Repeat("x", 4<<20))
	e, err := findDecision(r, "b")
	require.NoError(t, err)
	require.Equal(t, "b", e.DecisionID)
	require.Greater(t, r.Len(), 3<<20, "the rest of the file was left unread")
}
