package decisionlog_test

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/sidecar/decisionlog"
)

// jsonLogger writes JSON lines to buf as the console sink does.
func jsonLogger(buf *bytes.Buffer) *zap.Logger {
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(buf), zapcore.InfoLevel))
}

func lastLine(t *testing.T, buf *bytes.Buffer) map[string]any {
	t.Helper()
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	var m map[string]any
	require.NoError(t, json.Unmarshal(lines[len(lines)-1], &m))
	for _, k := range []string{"ts", "timestamp"} {
		require.Contains(t, m, k)
		delete(m, k)
	}
	labels := m["labels"].(map[string]any)
	require.NotEmpty(t, labels["id"])
	delete(labels, "id")
	return m
}

// TestConsoleMatchesPlugin is the differential test of the default console
// sink against OPA's plugin writing the console itself: the same entries
// give the same events.
func TestConsoleMatchesPlugin(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.SpanFromContext(trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})))
	entries := []*decisionlog.Entry{
		entry("c-1", "rev-1"),
		{DecisionID: "c-2", Component: "extauthz", Binding: "jsonrpc", Version: "1.0", Operation: "SendMessage", Result: decisionlog.Deny,
			Code: "UNAUTHENTICATED", Reasons: []string{"UNAUTHENTICATED"}, Revision: "rev-2", Latency: 42 * time.Microsecond},
		{DecisionID: "c-3", Component: "gateway", Binding: "http+json", Operation: "GetAgentCard", Result: decisionlog.Allow, Reasons: []string{"skills:3"}},
		{DecisionID: "c-4", Component: "gateway", Layer: "clarify", Confidence: 0.31, Result: decisionlog.Allow, Span: traced, Revision: "r",
			Rules: []engine.Reason{{Rule: "deny.freeze", Effect: "refuse", Detail: "a tenant"}, {Rule: "tenant.listed", Effect: "grant"}}},
		{DecisionID: "c-5"},
		{DecisionID: "c-6", Component: "gateway", Operation: "SendMessage", Principal: "alice", Tenant: "acme", Capability: "reconcile-invoice",
			Authenticated: true, Issuer: "https://idp.example.com", Scopes: []string{"a2a.preview", "recon.run"}, ScopesTruncated: true,
			Decided: true, Entitled: true, Rules: []engine.Reason{{Rule: "scope.held", Effect: "grant"}},
			Requested: "apply-remittance", RequestedRules: []engine.Reason{{Rule: "scope.missing", Effect: "refuse", Detail: "payments.apply"}},
			Result: decisionlog.Allow},
		{DecisionID: "c-7", Capability: "x", Decided: true, Entitled: false, Result: decisionlog.Deny, Requested: "y", RequestedEntitled: true},
	}
	var fast, slow bytes.Buffer
	lf := decisionlog.New(jsonLogger(&fast))
	ls, err := decisionlog.Open(t.Context(), decisionlog.Options{Console: jsonLogger(&slow), Plugin: true})
	require.NoError(t, err)
	defer ls.Stop(t.Context())
	for _, e := range entries {
		a, b := *e, *e
		lf.Log(&a)
		ls.Log(&b)
		require.NoError(t, ls.Sync(t.Context()))
		require.Equal(t, lastLine(t, &slow), lastLine(t, &fast), e.DecisionID)
	}
}

// BenchmarkConsole is the default console sink on the decision path: one
// event encoded as JSON to a discarding writer.
func BenchmarkConsole(b *testing.B) {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	l := decisionlog.New(zap.New(core))
	e := entry("b-1", "rev")
	b.ReportAllocs()
	for b.Loop() {
		l.Log(e)
	}
}
