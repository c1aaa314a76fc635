package decisionlog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestMaskErasesSecrets: should an input ever carry a token, headers or
// message text, the mask policy erases them before any sink.
func TestMaskErasesSecrets(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l, err := Open(t.Context(), Options{Console: zap.New(core), Plugin: true})
	require.NoError(t, err)
	defer l.Stop(t.Context())
	info := (&Entry{DecisionID: "m-1", Component: "gateway", Result: Allow}).info(l.now)
	var in any = map[string]any{
		"component":     "gateway",
		"authorization": "Bearer eyJhbGciOi.secret.token",
		"headers":       map[string]any{"authorization": "Bearer x"},
		"message":       "reconcile this against the PO",
		"text":          "client free text",
		"parts":         []any{"raw"},
	}
	info.Input = &in
	require.NoError(t, l.plugin.Log(t.Context(), info))
	require.NoError(t, l.Sync(t.Context()))
	b, err := json.Marshal(logs.All()[0].ContextMap())
	require.NoError(t, err)
	var f map[string]any
	require.NoError(t, json.Unmarshal(b, &f))
	require.Equal(t, map[string]any{"component": "gateway"}, f["input"])
	require.ElementsMatch(t, []any{"/input/authorization", "/input/headers", "/input/message", "/input/parts", "/input/text"}, f["erased"])
}
