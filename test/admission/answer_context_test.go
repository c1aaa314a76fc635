package admission_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/test/testutil"
)

// freshContexts is an upstream A2A 1.0 JSON-RPC handler that answers every message — unary or
// streamed — with a completed task in a fresh context of its own, ctx-<n>, whatever context the
// message named.
type freshContexts struct{ n atomic.Int64 }

func (f *freshContexts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if json.Unmarshal(body, &req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	n := f.n.Add(1)
	answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"task":{"id":"t-fresh-%d","contextId":"ctx-%d","status":{"state":"TASK_STATE_COMPLETED"}}}}`, req.ID, n, n)
	if req.Method == "SendStreamingMessage" {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: "+answer+"\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, answer)
}

// TestHandlerAnswerStaysInTheCallersContext: with an upstream that answers every message in a
// fresh context of its own, a caller naming its context gets the handler's error
// (INVALID_AGENT_RESPONSE), unary and streamed; the handler's context is bound to nobody, so a
// later caller who chooses that id itself is admitted at both doors — not refused as
// TaskNotFound — and holds it from then on.
func TestHandlerAnswerStaysInTheCallersContext(t *testing.T) {
	up := &freshContexts{}
	hs := httptest.NewServer(up)
	t.Cleanup(hs.Close)
	d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
	d.Config.HandlerBindings = map[string]string{}
	for name := range d.Config.Handlers {
		d.Config.Handlers[name] = hs.URL + "/"
		d.Config.HandlerBindings[name] = config.BindingJSONRPC
	}
	e := connect(t, testutil.Start(t, d, testutil.StartOptions{ExtAuthz: true}))
	tok := func(subject string) string {
		return testutil.Token(t, testutil.TokenOptions{Issuer: issuerA, Subject: subject, Tenant: "acme", Scopes: []string{"recon.run"}})
	}
	alice, bob := tok("alice"), tok("bob")
	method := func(streaming bool) string {
		if streaming {
			return "SendStreamingMessage"
		}
		return "SendMessage"
	}
	// both sends the message to ext_authz, then to the gateway (the handler's error is the
	// gateway's answer; ext_authz only admits).
	both := func(t *testing.T, who, body string) (gw, az outcome) {
		t.Helper()
		az = e.extauthz(t, http.MethodPost, "/", bearer10(who), []byte(body))
		gw = e.gateway(t, http.MethodPost, "/", bearer10(who), []byte(body))
		return gw, az
	}
	sent := 0
	send := func(streaming bool, contextID string) string { // each a new message: its own messageId
		sent++
		body := strings.Replace(send10(`"contextId":"`+contextID+`",`), `"method":"SendMessage"`, `"method":"`+method(streaming)+`"`, 1)
		return strings.Replace(body, `"messageId":"m-c"`, fmt.Sprintf(`"messageId":"m-answer-%d"`, sent), 1)
	}
	for _, streaming := range []bool{false, true} {
		t.Run(method(streaming), func(t *testing.T) {
			mine := "ctx-alice-" + method(streaming)
			before := up.n.Load()
			gw, az := both(t, alice, send(streaming, mine))
			require.True(t, az.allowed, "ext_authz admits the message in the caller's own new context")
			require.Equal(t, "INVALID_AGENT_RESPONSE", gw.reason, "%s", gw.body)
			require.Equal(t, before+1, up.n.Load(), "the handler was called once")
			theirs := fmt.Sprintf("ctx-%d", before+1)
			require.NotContains(t, gw.body, theirs, "the handler's answer is not relayed")
			require.NotContains(t, gw.body, fmt.Sprintf("t-fresh-%d", before+1))

			// Nobody holds the handler's context: bob may start it himself, at both doors.
			gw, az = both(t, bob, send(streaming, theirs))
			require.True(t, az.allowed, "a caller choosing the id the handler made up is not refused: %s", az.body)
			require.Equal(t, "INVALID_AGENT_RESPONSE", gw.reason, "the handler answered elsewhere again: %s", gw.body)
			// ... and holds it now; alice's own context stays hers.
			gw, _ = e.door(t, http.MethodPost, "/", bearer10(alice), send(streaming, theirs))
			require.Equal(t, "TASK_NOT_FOUND", gw.reason, "%s", gw.body)
			gw, _ = e.door(t, http.MethodPost, "/", bearer10(bob), send(streaming, mine))
			require.Equal(t, "TASK_NOT_FOUND", gw.reason, "%s", gw.body)
		})
	}
}
