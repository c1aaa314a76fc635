package decisionlog_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/sidecar/decisionlog"
)

func TestLogWritesOneStructuredLine(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l := decisionlog.New(zap.New(core))
	l.Log(&decisionlog.Entry{
		DecisionID: "d-1", Component: "gateway", Binding: "jsonrpc", Version: "1.0", Operation: "SendMessage",
		Principal: "partner-1", Tenant: "acme", Capability: "reconcile-invoice", Layer: "classifier", Confidence: 0.93,
		Result: decisionlog.Allow, Reasons: []string{"scope.held"}, Revision: "rev", Latency: 1500 * time.Microsecond,
	})
	require.Equal(t, 1, logs.Len())
	e := logs.All()[0]
	require.Equal(t, "decision", e.Message)
	require.Equal(t, "decision", e.LoggerName)
	fields := e.ContextMap()["decision"].(map[string]any)
	require.Equal(t, "d-1", fields["decision_id"])
	require.Equal(t, "partner-1", fields["principal"])
	require.Equal(t, "reconcile-invoice", fields["capability"])
	require.Equal(t, "classifier", fields["layer"])
	require.Equal(t, 0.93, fields["confidence"])
	require.Equal(t, "allow", fields["result"])
	require.Equal(t, []any{"scope.held"}, fields["reasons"])
	require.Equal(t, int64(1500), fields["latency_us"])
	require.NotContains(t, fields, "code", "no code on an allow")
}

func TestConfidenceOnlyWhenAClassifierDecided(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	decisionlog.New(zap.New(core)).Log(&decisionlog.Entry{DecisionID: "d-2", Layer: "task", Confidence: 1, Result: decisionlog.Deny, Code: "TASK_NOT_FOUND"})
	fields := logs.All()[0].ContextMap()["decision"].(map[string]any)
	require.NotContains(t, fields, "confidence")
	require.Equal(t, "TASK_NOT_FOUND", fields["code"])
}

func TestNilLoggerDiscards(t *testing.T) {
	require.NotPanics(t, func() { decisionlog.New(nil).Log(&decisionlog.Entry{DecisionID: "x"}) })
}

func TestIDsAreUnique(t *testing.T) {
	a, b := decisionlog.NewIDs(), decisionlog.NewIDs()
	seen := map[string]bool{}
	for range 1000 {
		for _, g := range []*decisionlog.IDs{a, b} {
			id := g.Next()
			require.False(t, seen[id], "duplicate id %s", id)
			seen[id] = true
		}
	}
}
