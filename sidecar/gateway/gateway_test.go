package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/gateway"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/test/testutil"
)

// newGateway serves the embedded finance example without listeners.
func newGateway(t *testing.T) *gateway.Gateway {
	t.Helper()
	d, err := deployment.Load("")
	require.NoError(t, err)
	rev, err := revision.Build(t.Context(), d, revision.Options{})
	require.NoError(t, err)
	return gateway.New(revision.NewHolder(rev))
}

func serve(g http.Handler, method, target, body string, headers ...string) *httptest.ResponseRecorder {
	var req *http.Request
	if body != "" {
		req = httptest.NewRequest(method, target, strings.NewReader(body))
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	return rec
}

// TestQueryIsChecked: the HTTP+JSON query reaches the parser's checks.
func TestQueryIsChecked(t *testing.T) {
	g := newGateway(t)
	cases := []struct{ target, msg string }{
		{"/tasks?pageSize=1&pageSize=2", `query parameter \"pageSize\" is repeated`},
		{"/tasks?tenant=other", `query parameter \"tenant\" is not allowed; the path names it`},
		{"/acme/tasks?id=x", `query parameter \"id\" is not allowed; the path names it`},
		{"/tasks?a=%zz", "query string is malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.target, func(t *testing.T) {
			rec := serve(g, http.MethodGet, tc.target, "", "A2A-Version", "1.0")
			require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
			require.Contains(t, rec.Body.String(), tc.msg)
		})
	}
}

// TestMethodNotAllowedNamesAllow: every 405 carries Allow.
func TestMethodNotAllowedNamesAllow(t *testing.T) {
	g := newGateway(t)
	cases := []struct{ method, target, allow string }{
		{http.MethodPost, "/extendedAgentCard", "GET"},
		{http.MethodDelete, "/tasks/t1", "GET"},
		{http.MethodPut, "/tasks/t1/pushNotificationConfigs", "POST, GET"},
		{http.MethodGet, "/", "POST"},
		{http.MethodPost, "/.well-known/agent-card.json", "GET, HEAD"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			rec := serve(g, tc.method, tc.target, "", "A2A-Version", "1.0")
			require.Equal(t, http.StatusMethodNotAllowed, rec.Code, rec.Body.String())
			require.Equal(t, tc.allow, rec.Header().Get("Allow"))
		})
	}
}

// TestExtendedCardV03: a 0.3 caller gets the extended card in the 0.3 union
// shape (it used to fail with an internal error: the card lists no 0.3
// interface, which a2av0's card producer requires).
func TestExtendedCardV03(t *testing.T) {
	g := newGateway(t)
	auth := "Bearer " + testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	for _, tc := range []struct{ name, method, target, body string }{
		{"JSON-RPC", http.MethodPost, "/", `{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"}`},
		{"HTTP+JSON /v1/card", http.MethodGet, "/v1/card", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(g, tc.method, tc.target, tc.body, "Authorization", auth, "Content-Type", "application/json")
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			body := rec.Body.Bytes()
			if tc.target == "/" {
				require.NotContains(t, rec.Body.String(), `"error"`)
				i := strings.Index(rec.Body.String(), `"result":`)
				body = body[i+len(`"result":`) : len(body)-1]
			}
			c, err := a2av0.NewAgentCardParser()(body)
			require.NoError(t, err)
			var ids []string
			for _, s := range c.Skills {
				ids = append(ids, s.ID)
			}
			require.Contains(t, ids, "reconcile-invoice")
			require.Contains(t, string(body), `"preferredTransport"`)
		})
	}
}
