package routing_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// TestExtensionTaskStatesPassThrough: task states a state-machine extension adds (here
// TASK_STATE_X_AWAITING_APPROVAL) reach the caller exactly as the handler sent them, in a unary
// answer, a stream and GetTask: capgate relays task JSON, it does not re-encode it.
func TestExtensionTaskStatesPassThrough(t *testing.T) {
	const state = "TASK_STATE_X_AWAITING_APPROVAL"
	task := `{"id":"t-x","contextId":"c-x","status":{"state":"` + state + `","message":{"messageId":"s","role":"ROLE_AGENT","parts":[{"text":"waiting for approval"}]}}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		switch req.Method {
		case "SendStreamingMessage":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"task\":%s}}\n\n", req.ID, task)
		case "GetTask":
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, task)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"task":%s}}`, req.ID, task)
		}
	}))
	t.Cleanup(up.Close)
	d := testutil.LoadDeployment(t, "")
	d.Config.Handlers["recon.v3.reconcile"] = up.URL + "/"
	srv := testutil.Start(t, d)
	tok := "Bearer " + testutil.Token(t, partner)
	send := func(method string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"message":{"messageId":"m-1","role":"ROLE_USER",` +
			`"parts":[{"text":"reconcile INV-1"}],"metadata":{"skillId":"reconcile-invoice"}}}}`
	}
	for _, method := range []string{"SendMessage", "SendStreamingMessage"} {
		r := srv.JSONRPC(t, send(method), "A2A-Version", "1.0", "Authorization", tok)
		require.Equal(t, http.StatusOK, r.Status)
		require.Contains(t, string(r.Body), `"state":"`+state+`"`, "%s: %s", method, r.Body)
		require.NotContains(t, string(r.Body), `"error"`)
	}
	r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"t-x"}}`, "A2A-Version", "1.0", "Authorization", tok)
	require.Contains(t, string(r.Body), `"state":"`+state+`"`, "%s", r.Body)
	require.True(t, strings.Contains(string(r.Body), `"result"`))
}
