package gateway_test

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// TestStreamErrorFrames: a handler that fails after its stream began ends the caller's stream
// with an error in the binding's own shape — over JSON-RPC a JSON-RPC error response as the last
// event; over HTTP+JSON an SSE event of type "error" whose data is the google.rpc.Status body
// (what the A2A JavaScript SDK reads; a2a-go reads the data line) — never a stream that ends as if
// nothing happened.
func TestStreamErrorFrames(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := requestID(r)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"task\":{\"id\":\"t-s\",\"contextId\":\"c-s\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n", id)
		_, _ = fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32603,\"message\":\"the ledger is down\"}}\n\n", id)
	}))
	t.Cleanup(up.Close)
	d := testutil.LoadDeployment(t, "")
	d.Config.Handlers["recon.v3.reconcile"] = up.URL + "/"
	srv := testutil.Start(t, d)
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	// Each call is a new message (capgate runs a messageId once per owner).
	msg := func() string {
		return `{"message":{"messageId":"m-` + rand.Text() + `","role":"ROLE_USER","parts":[{"text":"reconcile INV-1"}],"metadata":{"skillId":"reconcile-invoice"}}}`
	}

	r := srv.Do(t, http.MethodPost, "/message:stream", msg(), "A2A-Version", "1.0", "Content-Type", "application/json", "Authorization", "Bearer "+tok)
	require.Equal(t, http.StatusOK, r.Status)
	body := string(r.Body)
	require.Contains(t, body, `"TASK_STATE_WORKING"`, "the events before the failure are relayed")
	require.True(t, strings.HasSuffix(body, "\n\n"))
	last := body[strings.LastIndex(strings.TrimSuffix(body, "\n\n"), "\n\n")+2:]
	require.True(t, strings.HasPrefix(last, "event: error\ndata: {\"error\":{\"code\":500,\"status\":\"INTERNAL\""), "%q", last)

	r = srv.JSONRPC(t, `{"jsonrpc":"2.0","id":5,"method":"SendStreamingMessage","params":`+msg()+`}`, "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
	body = string(r.Body)
	last = body[strings.LastIndex(strings.TrimSuffix(body, "\n\n"), "\n\n")+2:]
	require.True(t, strings.HasPrefix(last, `data: {"jsonrpc":"2.0","id":5,"error":{"code":-32603`), "%q", last)

	// The official a2a-go client sees the failure as an error, on both bindings.
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolJSONRPC} {
		c := srv.Client(t, binding, testutil.Bearer(tok))
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("reconcile INV-1"))
		m.Metadata = map[string]any{"skillId": "reconcile-invoice"}
		var sawErr error
		for _, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: m}) {
			if err != nil {
				sawErr = err
			}
		}
		require.Error(t, sawErr, "%s: the stream's failure reaches the client", binding)
	}
}
