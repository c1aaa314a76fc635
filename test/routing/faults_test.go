package routing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/test/testnet"
	"github.com/capgate/capgate/test/testutil"
)

// reconAt starts capgate with the finance example's recon.v3.reconcile
// handler pointed at url and limits.handler_timeout set in its config.
func reconAt(t testing.TB, url string) *testutil.Server {
	t.Helper()
	cfg := financeCopy(t,
		"recon.v3.reconcile: builtin:echo", "recon.v3.reconcile: "+url,
		"store: memory", "store: memory\nlimits: {handler_timeout: 300ms}")
	srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
	require.Equal(t, 300*time.Millisecond, srv.Deployment.Config.Limits.HandlerTimeout)
	return srv
}

// TestUpstreamFaults: whatever an upstream handler does wrong, the caller
// gets a prompt A2A error, and no task is bound.
func TestUpstreamFaults(t *testing.T) {
	closed := func(t *testing.T) string {
		return "http://" + testnet.RefusedAddr(t) + "/"
	}
	serve := func(h http.HandlerFunc) func(t *testing.T) string {
		return func(t *testing.T) string {
			s := httptest.NewServer(h)
			t.Cleanup(s.Close)
			return s.URL + "/"
		}
	}
	slow := func(t *testing.T) string {
		release := make(chan struct{})
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select { // answers only when capgate gives up (or the test ends)
			case <-r.Context().Done():
			case <-release:
			}
		}))
		t.Cleanup(s.Close)
		t.Cleanup(func() { close(release) }) // runs first
		return s.URL + "/"
	}
	tests := []struct {
		name     string
		upstream func(t *testing.T) string
		want     error
		message  string
		noStream bool // a silent stream is bounded by the handler stream idle timeout (5m), not handler_timeout
	}{
		{"down", closed, a2a.ErrInternalError, "the skill's handler is unavailable", false},
		{"slow", slow, a2a.ErrInternalError, "the skill's handler did not answer within 300ms", true},
		{"HTML", serve(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><body>502 Bad Gateway</body></html>"))
		}), a2a.ErrInvalidAgentResponse, "the skill's handler returned an invalid A2A response", false},
		{"invalid JSON", serve(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":`))
		}), a2a.ErrInvalidAgentResponse, "the skill's handler returned an invalid A2A response", false},
		{"a result that is not a task or message", serve(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"result":{"hello":"world"}}`))
		}), a2a.ErrInvalidAgentResponse, "invalid A2A response", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := reconAt(t, tt.upstream(t))
			c := jsonrpc(t, srv, partner)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: referenceMessage()})
			require.ErrorIs(t, err, tt.want)
			require.NoError(t, ctx.Err(), "capgate must answer, not hang")
			require.Contains(t, err.Error(), tt.message)
			require.Less(t, time.Since(start), 5*time.Second)

			if !tt.noStream {
				// The same through a stream: an error, promptly.
				serr := rawStreamError(t, srv, "Bearer "+testutil.Token(t, partner), "SendStreamingMessage",
					map[string]any{"message": referenceMessage()})
				require.ErrorIs(t, serr, tt.want)
			}

			res, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{})
			require.NoError(t, err)
			require.Empty(t, res.Tasks, "a failed call binds no task")
		})
	}
}

// TestUpstreamA2AServer: a real a2a-go v2 server as the upstream handler
// gets capgate's own short-lived token — audience the handler name, scopes
// narrowed to the capability, subject the caller — and never the caller's
// token.
func TestUpstreamA2AServer(t *testing.T) {
	up := newUpstream(t, a2a.TaskStateCompleted)
	srv := reconAt(t, up.URL)
	up.trust(t, srv, "recon.v3.reconcile")

	callerTok := testutil.Token(t, testutil.TokenOptions{Subject: "partner-1", Tenant: "acme",
		Scopes: []string{"recon.run", "invoices.read", "ops.admin"}})
	c := srv.Client(t, a2a.TransportProtocolJSONRPC, testutil.Bearer(callerTok))
	task := sendTask(t, c, referenceMessage())
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, task.ID, got.ID)

	headers, claims := up.seen()
	require.Len(t, headers, 2, "SendMessage and GetTask")
	require.Len(t, claims, 2, "every call carried a token the upstream verified")
	for i, h := range headers {
		auth := h.Values("Authorization")
		require.Len(t, auth, 1)
		tok, ok := strings.CutPrefix(auth[0], "Bearer ")
		require.True(t, ok)
		require.NotEqual(t, callerTok, tok)
		for name, vs := range h {
			for _, v := range vs {
				require.NotContains(t, v, callerTok, "header %s carries the caller's token", name)
			}
		}
		require.Empty(t, h.Get(handler.CallerAuthorizationHeader), "forward_caller_token is off")
		require.Equal(t, "1.0", h.Get("A2A-Version"))
		require.NotEmpty(t, h.Get(handler.DecisionIDHeader))

		c := claims[i]
		require.Equal(t, "recon.v3.reconcile", c.Audience)
		require.Equal(t, "partner-1", c.Subject)
		require.Equal(t, "acme", c.Tenant)
		require.Equal(t, "reconcile-invoice", c.Capability)
		require.Equal(t, []string{"recon.run"}, c.Scopes, "narrowed to requires_scopes")
		require.Equal(t, srv.Deployment.Config.Identity.Issuer, c.Issuer)
		require.Equal(t, h.Get(handler.DecisionIDHeader), c.DecisionID)
		require.NotEmpty(t, c.Actor)
		require.Equal(t, srv.Deployment.Config.Identity.AgentID, c.Actor[0])
		require.LessOrEqual(t, time.Until(c.ExpiresAt), time.Minute)
	}
	require.Equal(t, "reconcile-invoice", reportOf(t, task).Capability)
}
