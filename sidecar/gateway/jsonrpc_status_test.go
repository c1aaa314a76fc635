package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/gateway"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/test/testutil"
)

// refuse answers every operation with one error.
type refuse struct{ e *protocol.Error }

func (r refuse) Serve(context.Context, *exchange.Call) (exchange.Result, *protocol.Error) {
	return exchange.Result{}, r.e
}

func gatewayWith(t *testing.T, status int, ops exchange.Server) *gateway.Gateway {
	t.Helper()
	d, err := deployment.Load("")
	require.NoError(t, err)
	d.Config.Auth.JSONRPCHTTPStatus = status
	rev, err := revision.Build(t.Context(), d, revision.Options{})
	require.NoError(t, err)
	return gateway.New(revision.NewHolder(rev), gateway.WithOperations(ops))
}

// TestJSONRPCAuthStatus: auth.jsonrpc_http_status decides the HTTP status of
// a JSON-RPC authentication or authorization refusal; the body is the same
// JSON-RPC error either way, and nothing else changes.
func TestJSONRPCAuthStatus(t *testing.T) {
	auth := "Bearer " + testutil.Token(t, testutil.TokenOptions{Scopes: []string{"invoices.read"}})
	forbidden := refuse{protocol.Errorf(protocol.Unauthorized, "the caller is not entitled to capability reconcile-invoice")}
	notFound := refuse{protocol.Errorf(protocol.TaskNotFound, "task t1 not found")}
	// The example allows anonymous callers to public skills, so "no
	// credential" for a task operation is the operation's refusal; the
	// extended card the gateway refuses itself.
	missing := refuse{protocol.MissingCredentials()}
	const (
		getTask = `{"jsonrpc":"2.0","id":3,"method":"GetTask","params":{"id":"t1"}}`
		getCard = `{"jsonrpc":"2.0","id":3,"method":"GetExtendedAgentCard"}`
		send    = `{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`
		stream  = `{"jsonrpc":"2.0","id":4,"method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`
	)
	unauthBody := `{"jsonrpc":"2.0","id":3,"error":{"code":-31401,"message":"authentication required","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"UNAUTHENTICATED","domain":"a2a-protocol.org"}]}}`
	cases := []struct {
		name        string
		status      int
		ops         exchange.Server
		body        string
		auth        string
		code        int
		contentType string
		challenge   string
		rpcCode     string
	}{
		{"200: no credential", config.JSONRPCStatusOK, notFound, getCard, "", 200, "application/json", "", "-31401"},
		{"200: forbidden", config.JSONRPCStatusOK, forbidden, send, auth, 200, "application/json", "", "-31403"},
		{"200: streaming, no credential", config.JSONRPCStatusOK, missing, stream, "", 200, "text/event-stream", "", "-31401"},
		{"401: no credential", config.JSONRPCStatusAuth, notFound, getCard, "", 401, "application/json", "Bearer", "-31401"},
		{"401: bad credential", config.JSONRPCStatusAuth, notFound, getCard, "Bearer nope", 401, "application/json", `Bearer error="invalid_token"`, "-31401"},
		{"401: forbidden is 403", config.JSONRPCStatusAuth, forbidden, send, auth, 403, "application/json", `Bearer error="insufficient_scope"`, "-31403"},
		{"401: task operation without a credential", config.JSONRPCStatusAuth, missing, getTask, "", 401, "application/json", "Bearer", "-31401"},
		{"401: streaming refusal is a plain 401", config.JSONRPCStatusAuth, missing, stream, "", 401, "application/json", "Bearer", "-31401"},
		{"401: other errors stay 200", config.JSONRPCStatusAuth, notFound, send, auth, 200, "application/json", "", "-32001"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := gatewayWith(t, tc.status, tc.ops)
			h := []string{"A2A-Version", "1.0", "Content-Type", "application/json"}
			if tc.auth != "" {
				h = append(h, "Authorization", tc.auth)
			}
			rec := serve(g, http.MethodPost, "/", tc.body, h...)
			require.Equal(t, tc.code, rec.Code, rec.Body.String())
			require.Equal(t, tc.contentType, rec.Header().Get("Content-Type"))
			if tc.challenge == "" {
				require.Empty(t, rec.Header().Get("WWW-Authenticate"))
			} else {
				require.Contains(t, rec.Header().Get("WWW-Authenticate"), tc.challenge)
			}
			require.Contains(t, rec.Body.String(), `"code":`+tc.rpcCode)
			if tc.name == "401: no credential" {
				require.JSONEq(t, unauthBody, rec.Body.String(), "the body is the 200 mode's")
			}
		})
	}

	t.Run("HTTP+JSON is unaffected", func(t *testing.T) {
		for _, status := range []int{config.JSONRPCStatusOK, config.JSONRPCStatusAuth} {
			rec := serve(gatewayWith(t, status, notFound), http.MethodGet, "/extendedAgentCard", "", "A2A-Version", "1.0")
			require.Equal(t, http.StatusUnauthorized, rec.Code)
		}
	})
}
