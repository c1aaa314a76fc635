package example_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/capgate/capgate/sidecar/handlerauth"
	"github.com/capgate/capgate/sidecar/handlerauth/example"
	"github.com/capgate/capgate/sidecar/identity"
)

// TestToolSeesTheCaller runs capgate's side (a Minter), the handler and a
// downstream tool: the tool verifies the same token the handler got and
// sees the caller and the narrowed scopes, not the agent.
func TestToolSeesTheCaller(t *testing.T) {
	defer goleak.VerifyNone(t)
	capgate, err := identity.GenerateMinter("https://capgate.test")
	require.NoError(t, err)
	verifier := func(aud string) *handlerauth.Verifier {
		v, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{Issuer: capgate.Issuer(), Audience: aud, JWKS: capgate.JWKS()})
		require.NoError(t, err)
		return v
	}

	// The tool trusts capgate's tokens minted for this handler (the token's
	// audience), and checks the scope it needs itself.
	var seen handlerauth.Claims
	tool := httptest.NewServer(verifier("recon.v3.reconcile").Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = handlerauth.FromContext(r.Context())
		if !strings.Contains(" "+strings.Join(seen.Scopes, " ")+" ", " recon.run ") {
			http.Error(w, "insufficient scope", http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(`{"invoices":["INV-20931"]}`))
	})))
	defer tool.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	h := httptest.NewServer(example.New(verifier("recon.v3.reconcile"), tool.URL, client))
	defer h.Close()

	for _, tc := range []struct {
		name   string
		scopes []string
		status int
	}{
		{"narrowed to the capability's scope", []string{"recon.run"}, http.StatusOK},
		{"without the scope the tool refuses", []string{"recon.read"}, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := capgate.Mint(identity.MintClaims{Subject: "partner-1", Tenant: "acme", Audience: "recon.v3.reconcile",
				Scopes: tc.scopes, Capability: "reconcile-invoice", Actor: "finance-agent", DecisionID: "dec-7"})
			require.NoError(t, err)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.URL, strings.NewReader(`{}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			require.Equal(t, tc.status, resp.StatusCode)

			require.Equal(t, "partner-1", seen.Subject, "the tool sees the caller, not the agent")
			require.Equal(t, "acme", seen.Tenant)
			require.Equal(t, tc.scopes, seen.Scopes)
			require.Equal(t, []string{"finance-agent"}, seen.Actor)
			require.Equal(t, "dec-7", seen.DecisionID)
			if tc.status == http.StatusOK {
				var out struct {
					Principal string          `json:"principal"`
					Tool      json.RawMessage `json:"tool"`
				}
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
				require.Equal(t, "partner-1", out.Principal)
				require.JSONEq(t, `{"invoices":["INV-20931"]}`, string(out.Tool))
			}
		})
	}

	t.Run("no token, no call", func(t *testing.T) {
		seen = handlerauth.Claims{}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.URL, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Empty(t, seen.Subject, "the tool was not called")
	})
}
