package decisionlog_test

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/open-policy-agent/opa/v1/version"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/quota"
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
		{DecisionID: "c-7q", Capability: "reconcile-invoice", Result: decisionlog.Allow,
			Quotas: []quota.State{{ID: "plan.free", Limit: 40, Window: 86400, Remaining: 32, Reset: 17280}}},
		{DecisionID: "c-8", Capability: "reconcile-invoice", Decided: true, Entitled: true, Result: decisionlog.Allow, CardVersion: "1.4.0+skills.3f2a",
			Limits:    map[string]any{"max_pdf_pages": 200, "cost_class": "medium", "ratio": 0.5, "html": "<a&b>"},
			Rules:     []engine.Reason{{Rule: "scope.held", Effect: "grant", Detail: "recon.run"}},
			Requested: "apply-remittance", RequestedRules: []engine.Reason{{Rule: "scope.missing", Effect: "refuse", Detail: "payments.apply"},
				{Rule: "tenant.not_listed", Effect: "refuse", Detail: "acme"}}},
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
	// The last event records the limits, and the missing scopes of a
	// scope.missing reason (no other reason's detail).
	result := lastLine(t, &fast)["result"].(map[string]any)
	require.Equal(t, "1.4.0+skills.3f2a", result["card_version"])
	require.Equal(t, map[string]any{"max_pdf_pages": 200.0, "cost_class": "medium", "ratio": 0.5, "html": "<a&b>"}, result["limits"])
	require.Equal(t, []any{
		map[string]any{"detail": "payments.apply", "effect": "refuse", "reason": "scope.missing", "rule": "data.capgate.authz._scope_reasons"},
		map[string]any{"effect": "refuse", "reason": "tenant.not_listed", "rule": "data.capgate.authz._tenant_reasons"},
	}, result["requested_rules"])
	require.Equal(t, []any{map[string]any{"effect": "grant", "reason": "scope.held", "rule": "data.capgate.authz._scope_reasons"}}, result["rules"])
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

// decision_logs.labels reach every event beside OPA's id and version, and
// the peer address is the event's requested_by, on the default console
// sink as through OPA's plugin (with the labels beside other decision_logs
// keys).
func TestConsoleLabelsAndRequestedByMatchPlugin(t *testing.T) {
	labels := map[string]any{"env": "prod", "region": "eu-west-1"}
	var fast, slow bytes.Buffer
	lf, err := decisionlog.Open(t.Context(), decisionlog.Options{Console: jsonLogger(&fast), DecisionLogs: map[string]any{"labels": labels}})
	require.NoError(t, err)
	defer lf.Stop(t.Context())
	ls, err := decisionlog.Open(t.Context(), decisionlog.Options{Console: jsonLogger(&slow), DecisionLogs: map[string]any{"console": true, "labels": labels}})
	require.NoError(t, err)
	defer ls.Stop(t.Context())
	e := decisionlog.Entry{DecisionID: "l-1", Component: "gateway", Result: decisionlog.Deny, Code: "UNAUTHENTICATED", Reasons: []string{"UNAUTHENTICATED"}, RequestedBy: "127.0.0.1:50123"}
	a, b := e, e
	lf.Log(&a)
	ls.Log(&b)
	require.NoError(t, ls.Sync(t.Context()))
	got := lastLine(t, &fast)
	require.Equal(t, lastLine(t, &slow), got)
	require.Equal(t, "127.0.0.1:50123", got["requested_by"])
	require.Equal(t, map[string]any{"env": "prod", "region": "eu-west-1", "version": version.Version}, got["labels"])
}

func TestSplitLabels(t *testing.T) {
	rest, labels, err := decisionlog.SplitLabels(map[string]any{"console": true, "labels": map[string]any{"env": "prod"}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"console": true}, rest)
	require.Equal(t, map[string]string{"env": "prod"}, labels)

	rest, labels, err = decisionlog.SplitLabels(map[string]any{"labels": map[string]any{"env": "prod"}})
	require.NoError(t, err)
	require.Nil(t, rest, "labels alone: the default console sink")
	require.Equal(t, map[string]string{"env": "prod"}, labels)

	for in, want := range map[string]map[string]any{
		"decision_logs.labels: want a mapping of label names to strings":            {"labels": []any{"env"}},
		"decision_logs.labels.replicas: want a string (quote numbers and booleans)": {"labels": map[string]any{"replicas": 3}},
		"decision_logs.labels.id: reserved":                                         {"labels": map[string]any{"id": "x"}},
		"decision_logs.labels.capgate_version: reserved":                            {"labels": map[string]any{"capgate_version": "x"}},
	} {
		_, _, err := decisionlog.SplitLabels(want)
		require.ErrorContains(t, err, in)
		require.ErrorContains(t, decisionlog.Check(nil, want), in, "validate refuses what serve would")
	}
	require.NoError(t, decisionlog.Check(nil, map[string]any{"console": true, "labels": map[string]any{"env": "prod"}}))
}

// Decision ids are random UUIDs, as OPA's are.
func TestIDsAreUUIDs(t *testing.T) {
	ids := decisionlog.NewIDs()
	seen := map[string]bool{}
	for range 100 {
		id := ids.Next()
		u, err := uuid.Parse(id)
		require.NoError(t, err, id)
		require.Equal(t, uuid.Version(4), u.Version())
		require.Equal(t, u.String(), id, "the canonical lower-case form")
		require.False(t, seen[id])
		seen[id] = true
	}
}
