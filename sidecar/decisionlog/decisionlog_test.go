package decisionlog_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/test/testnet"
)

func entry(id, rev string) *decisionlog.Entry {
	return &decisionlog.Entry{
		DecisionID: id, Component: "gateway", Binding: "jsonrpc", Version: "1.0", Operation: "SendMessage",
		Principal: "partner-1", Tenant: "acme", Capability: "reconcile-invoice", Layer: "classifier", Confidence: 0.93,
		Result: decisionlog.Allow, Reasons: []string{"OK"}, Revision: rev, Latency: 1500 * time.Microsecond,
		Rules: []engine.Reason{{Rule: "scope.held", Effect: "grant", Detail: "recon.run"}, {Rule: "state.ga", Effect: "grant"}},
	}
}

// TestConsoleEventIsOPAFormat: the default sink writes one entry per
// decision with the fields of OPA's console decision log.
func TestConsoleEventIsOPAFormat(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l := decisionlog.New(zap.New(core))
	defer l.Stop(t.Context())
	l.Log(entry("d-1", "rev-1"))
	require.NoError(t, l.Sync(t.Context()))

	require.Equal(t, 1, logs.Len())
	e := logs.All()[0]
	require.Equal(t, "decision", e.LoggerName)
	f := jsonRound(t, e.ContextMap()).(map[string]any)
	require.Equal(t, "openpolicyagent.org/decision_logs", f["type"])
	require.Equal(t, "d-1", f["decision_id"])
	require.Equal(t, decisionlog.PathDecision, f["path"])
	_, err := time.Parse(time.RFC3339Nano, f["timestamp"].(string))
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"component": "gateway", "binding": "jsonrpc", "a2a_version": "1.0", "operation": "SendMessage",
		"principal": "partner-1", "tenant": "acme", "capability": "reconcile-invoice", "layer": "classifier", "confidence": 0.93,
	}, f["input"])
	require.Equal(t, map[string]any{
		"allow": true, "result": "allow", "reasons": []any{"OK"},
		"rules": []any{
			map[string]any{"reason": "scope.held", "effect": "grant", "rule": "data.capgate.authz._scope_reasons"},
			map[string]any{"reason": "state.ga", "effect": "grant", "rule": "data.capgate.authz._state_reasons"},
		},
	}, f["result"], "the rules that decided, without the credential's details")
	require.Equal(t, map[string]any{"capgate": map[string]any{"revision": "rev-1"}}, f["bundles"])
	require.Equal(t, map[string]any{decisionlog.MetricLatency: float64(1500000)}, f["metrics"])
	labels := f["labels"].(map[string]any)
	require.NotEmpty(t, labels["id"])
	require.NotEmpty(t, labels["version"])
}

func TestDenialAndViewDecision(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l := decisionlog.New(zap.New(core))
	defer l.Stop(t.Context())
	l.Log(&decisionlog.Entry{DecisionID: "d-2", Component: "extauthz", Layer: "task", Confidence: 1, Result: decisionlog.Deny, Code: "TASK_NOT_FOUND", Reasons: []string{"TASK_NOT_FOUND"}})
	require.NoError(t, l.Sync(t.Context()))
	f := jsonRound(t, logs.All()[0].ContextMap()).(map[string]any)
	require.Equal(t, decisionlog.PathView, f["path"])
	require.Equal(t, map[string]any{"component": "extauthz", "layer": "task"}, f["input"], "no confidence unless a classifier decided; no empty fields")
	require.Equal(t, map[string]any{"allow": false, "result": "deny", "code": "TASK_NOT_FOUND", "reasons": []any{"TASK_NOT_FOUND"}}, f["result"])
	require.NotContains(t, f, "bundles")
}

func TestNilLoggerDiscards(t *testing.T) {
	require.NotPanics(t, func() { decisionlog.New(nil).Log(&decisionlog.Entry{DecisionID: "x"}) })
}

func TestRegoRule(t *testing.T) {
	require.Equal(t, "data.capgate.authz._tenant_reasons", decisionlog.RegoRule("tenant.not_listed"))
	require.Equal(t, "data.capgate.authz._deny_reasons", decisionlog.RegoRule("deny.freeze"))
	require.Equal(t, "data.capgate.authz", decisionlog.RegoRule("something"))
}

func TestCheck(t *testing.T) {
	require.NoError(t, decisionlog.Check(nil, nil))
	require.NoError(t, decisionlog.Check(map[string]any{"dl": map[string]any{"url": "http://127.0.0.1:1"}}, map[string]any{"service": "dl"}))
	require.ErrorContains(t, decisionlog.Check(nil, map[string]any{"service": "nope"}), "nope")
	require.Error(t, decisionlog.Check(nil, map[string]any{"reporting": map[string]any{"min_delay_seconds": "soon"}}))
}

// TestNoSinkIsRefused: a decision_logs block that names no sink (empty, reporting only, console
// off, no services) is refused by Check and Open alike; OPA reads it as "off" and its plugin
// panicked on it at start (issue 21).
func TestNoSinkIsRefused(t *testing.T) {
	for _, dl := range []map[string]any{{}, {"reporting": map[string]any{"min_delay_seconds": 1}}, {"console": false}, {"service": ""}} {
		require.ErrorContains(t, decisionlog.Check(nil, dl), "names no sink", "%v", dl)
		l, err := decisionlog.Open(t.Context(), decisionlog.Options{DecisionLogs: dl})
		require.ErrorContains(t, err, "names no sink", "%v", dl)
		require.Nil(t, l)
	}
	// With one service, OPA's default sink is that service.
	require.NoError(t, decisionlog.Check(map[string]any{"dl": map[string]any{"url": "http://127.0.0.1:1"}}, map[string]any{}))
}

func jsonRound(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// collector is a decision-log service speaking OPA's upload protocol: POST
// <resource> with a gzip'd JSON array of events.
type collector struct {
	mu     sync.Mutex
	events []map[string]any
	down   bool
	srv    *http.Server
	url    string
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &collector{url: "http://" + ln.Addr().String()}
	c.srv = &http.Server{Handler: http.HandlerFunc(c.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	t.Cleanup(func() { _ = c.srv.Close() })
	return c
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	down := c.down
	c.mu.Unlock()
	if down {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/logs" || r.Header.Get("Content-Encoding") != "gzip" {
		http.Error(w, "want a gzip POST to /logs", http.StatusBadRequest)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var batch []map[string]any
	if err := json.Unmarshal(b, &batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.events = append(c.events, batch...)
	c.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (c *collector) setDown(down bool) {
	c.mu.Lock()
	c.down = down
	c.mu.Unlock()
}

func (c *collector) ids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, e := range c.events {
		out = append(out, e["decision_id"].(string))
	}
	return out
}

func (c *collector) options(bufferEvents int) decisionlog.Options {
	return decisionlog.Options{
		Services: map[string]any{"collector": map[string]any{"url": c.url}},
		DecisionLogs: map[string]any{
			"service": "collector",
			"reporting": map[string]any{
				"trigger":                  "manual", // uploads when the test flushes: no timing
				"buffer_type":              "event",
				"buffer_size_limit_events": bufferEvents,
			},
		},
	}
}

func TestUploadToAService(t *testing.T) {
	c := newCollector(t)
	core, console := observer.New(zap.InfoLevel)
	o := c.options(100)
	o.Console = zap.New(core)
	o.Labels = map[string]string{"region": "eu-1"}
	l, err := decisionlog.Open(t.Context(), o)
	require.NoError(t, err)
	defer l.Stop(t.Context())

	l.Log(entry("u-1", "rev-1"))
	l.Log(entry("u-2", "rev-2"))
	require.NoError(t, l.Flush(t.Context()))
	require.Equal(t, []string{"u-1", "u-2"}, c.ids())
	require.Zero(t, console.Len(), "console is off when decision_logs does not ask for it")

	c.mu.Lock()
	ev := c.events[1]
	c.mu.Unlock()
	require.Equal(t, map[string]any{"capgate": map[string]any{"revision": "rev-2"}}, ev["bundles"])
	require.Equal(t, "eu-1", ev["labels"].(map[string]any)["region"])
	require.Equal(t, "reconcile-invoice", ev["input"].(map[string]any)["capability"])
	require.Equal(t, true, ev["result"].(map[string]any)["allow"])
}

// TestServiceOutage: while the service is down decisions are logged without
// blocking, the oldest events beyond the buffer are dropped, and what is
// buffered is uploaded once the service is back.
func TestServiceOutage(t *testing.T) {
	c := newCollector(t)
	c.setDown(true)
	l, err := decisionlog.Open(t.Context(), c.options(3))
	require.NoError(t, err)
	defer l.Stop(t.Context())

	for _, id := range []string{"o-1", "o-2", "o-3", "o-4", "o-5"} {
		l.Log(entry(id, "rev"))
	}
	require.Error(t, l.Flush(t.Context()), "the upload fails while the service is down")
	require.Empty(t, c.ids())

	c.setDown(false)
	require.NoError(t, l.Flush(t.Context()))
	ids := c.ids()
	require.Len(t, ids, 3, "the buffer holds three events: the oldest were dropped")
	require.Equal(t, []string{"o-3", "o-4", "o-5"}, ids)
	require.Zero(t, l.Failed())
}

// TestServiceUnreachableNeverBlocks: a service nobody listens on.
func TestServiceUnreachableNeverBlocks(t *testing.T) {
	addr := testnet.RefusedAddr(t)
	l, err := decisionlog.Open(t.Context(), decisionlog.Options{
		Services:     map[string]any{"gone": map[string]any{"url": "http://" + addr}},
		DecisionLogs: map[string]any{"service": "gone", "reporting": map[string]any{"min_delay_seconds": 1, "max_delay_seconds": 2}},
	})
	require.NoError(t, err)
	defer l.Stop(t.Context())
	done := make(chan struct{})
	go func() {
		for i := range 1000 {
			l.Log(entry("n-"+strings.Repeat("x", i%3), "rev"))
		}
		close(done)
	}()
	<-done // returns: Log does not wait for the service
	require.NoError(t, l.Sync(t.Context()))
}

// TestFullQueueDrops: when the plugin cannot keep up, decisions are dropped
// and counted, never waited for.
func TestFullQueueDrops(t *testing.T) {
	l, err := decisionlog.Open(t.Context(), decisionlog.Options{Queue: 1, Plugin: true})
	require.NoError(t, err)
	defer l.Stop(t.Context())
	for range 10000 {
		l.Log(entry("q", "rev"))
	}
	require.NoError(t, l.Sync(t.Context()))
	require.Positive(t, l.Dropped())
}

// TestNothingLeftRunning: Check and a stopped logger leave no goroutine of
// the plugin manager behind.
func TestNothingLeftRunning(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	require.NoError(t, decisionlog.Check(map[string]any{"s": map[string]any{"url": "http://127.0.0.1:1"}}, map[string]any{"service": "s"}))
	require.Error(t, decisionlog.Check(nil, map[string]any{"service": "nope"}))
	l, err := decisionlog.Open(t.Context(), decisionlog.Options{Plugin: true})
	require.NoError(t, err)
	l.Log(entry("g-1", "rev"))
	l.Stop(t.Context())
	_, err = decisionlog.Open(t.Context(), decisionlog.Options{DecisionLogs: map[string]any{"service": "nope"}})
	require.Error(t, err)
}
