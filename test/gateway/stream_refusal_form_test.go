package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// TestStreamingRefusalsHaveOneForm: every refusal of a streaming call before its first event has
// one form per binding, whatever refused it — the parser (params), admission (credentials,
// entitlement) or the handler (an error answer instead of a stream):
//   - JSON-RPC (A2A 1.0): a plain JSON-RPC error response (application/json, never
//     text/event-stream) with the error's HTTP status, once the method is read as streaming
//     (0.3 JSON-RPC: one event, TestPreStreamRefusalsAreNotStreams); before the method is read
//     (a body that is not JSON-RPC), a plain JSON-RPC error with HTTP 200, as for any method;
//   - HTTP+JSON: the error's HTTP status and a google.rpc.Status JSON body.
func TestStreamingRefusalsHaveOneForm(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json") // an error answer, not a stream
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+requestID(r)+`,"error":{"code":-32001,"message":"task not found"}}`)
	}))
	t.Cleanup(up.Close)
	d := testutil.LoadDeployment(t, "")
	d.Config.Handlers["recon.v3.reconcile"] = up.URL + "/"
	srv := testutil.Start(t, d)
	tok := "Bearer " + testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	msg := `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"reconcile INV-1"}],"metadata":{"skillId":"reconcile-invoice"}}}`
	badParams := `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":"not a list"}}`
	cases := []struct {
		name, auth, params, reason string
	}{
		{"params refused by the parser", tok, badParams, "INVALID_PARAMS"},
		{"no credential", "", msg, "UNAUTHENTICATED"},
		{"handler error before the first event", tok, msg, "TASK_NOT_FOUND"},
	}
	for _, tc := range cases {
		t.Run("JSON-RPC/"+tc.name, func(t *testing.T) {
			h := []string{"A2A-Version", "1.0"}
			if tc.auth != "" {
				h = append(h, "Authorization", tc.auth)
			}
			r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":7,"method":"SendStreamingMessage","params":`+tc.params+`}`, h...)
			require.GreaterOrEqual(t, r.Status, 400, "%s", r.Body)
			require.Equal(t, "application/json", r.Header.Get("Content-Type"), "%s", r.Body)
			body := string(r.Body)
			require.True(t, strings.HasPrefix(body, `{"jsonrpc":"2.0","id":7,"error":`), "%q", body)
			require.Contains(t, body, `"reason":"`+tc.reason+`"`)
		})
		t.Run("HTTP+JSON/"+tc.name, func(t *testing.T) {
			h := []string{"A2A-Version", "1.0", "Content-Type", "application/json"}
			if tc.auth != "" {
				h = append(h, "Authorization", tc.auth)
			}
			r := srv.Do(t, http.MethodPost, "/message:stream", tc.params, h...)
			require.GreaterOrEqual(t, r.Status, 400, "%s", r.Body)
			require.Equal(t, "application/json", r.Header.Get("Content-Type"), "%s", r.Body)
			require.Contains(t, string(r.Body), `"reason":"`+tc.reason+`"`)
		})
	}
	t.Run("JSON-RPC/not a JSON-RPC request", func(t *testing.T) {
		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":7}`, "A2A-Version", "1.0", "Authorization", tok)
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	})
}

// TestStreamEventsCheckedLikeUnaryAnswers: a handler stream event that is not a task, message or
// task update in the request's version is InvalidAgentResponse, as a unary answer is — for a 0.3
// JSON-RPC message/stream behind a handler whose events lack kind, and for a 1.0 stream whose
// event has no event member — never relayed as a task the caller then cannot read.
func TestStreamEventsCheckedLikeUnaryAnswers(t *testing.T) {
	event := map[string]string{
		"0.3": `{"id":"t-x","contextId":"c-x","status":{"state":"working"}}`, // a task without kind
		"1.0": `{"id":"t-x","contextId":"c-x","status":{"state":"TASK_STATE_WORKING"}}`,
	}
	for _, v := range []string{"0.3", "1.0"} {
		t.Run(v, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+requestID(r)+`,"result":`+event[v]+"}\n\n")
			}))
			t.Cleanup(up.Close)
			d := testutil.LoadDeployment(t, "")
			d.Config.Handlers["recon.v3.reconcile"] = up.URL + "/"
			srv := testutil.Start(t, d)
			tok := "Bearer " + testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
			body := `{"jsonrpc":"2.0","id":3,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"reconcile INV-1"}],"metadata":{"skillId":"reconcile-invoice"}}}}`
			h := []string{"A2A-Version", "1.0", "Authorization", tok}
			if v == "0.3" {
				body = `{"jsonrpc":"2.0","id":3,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"reconcile INV-1"}],"metadata":{"skillId":"reconcile-invoice"}}}}`
				h = []string{"A2A-Version", "0.3", "Authorization", tok}
			}
			r := srv.JSONRPC(t, body, h...)
			if v == "0.3" { // 0.3: one event holding the error
				require.Equal(t, "text/event-stream", r.Header.Get("Content-Type"))
				require.Equal(t, 1, strings.Count(string(r.Body), "data: "), "%s", r.Body)
			} else { // 1.0: a plain JSON-RPC error with the error's status (502)
				require.Equal(t, "application/json", r.Header.Get("Content-Type"))
				require.Equal(t, http.StatusBadGateway, r.Status, "%s", r.Body)
			}
			require.Contains(t, string(r.Body), `"reason":"INVALID_AGENT_RESPONSE"`, "%s", r.Body)
			require.NotContains(t, string(r.Body), "t-x", "the invalid event is not relayed")
		})
	}
}
