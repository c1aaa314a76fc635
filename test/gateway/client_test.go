// Package gateway_test runs capgate's A2A gateway in-process (server.Run on
// 127.0.0.1:0) and drives it with the official a2a-go v2 client and with raw
// HTTP requests.
package gateway_test

import (
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

var bindings = []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON}

func skillIDs(c *a2a.AgentCard) []string {
	ids := make([]string, 0, len(c.Skills))
	for _, s := range c.Skills {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestClientCards drives discovery and the extended card with the a2a-go
// client over both bindings against the embedded finance example.
func TestClientCards(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))

	t.Run("public card lists only public skills", func(t *testing.T) {
		c := srv.PublicCard(t)
		require.Equal(t, testutil.PublicSkills, skillIDs(c))
		for _, hidden := range testutil.HiddenSkills {
			require.NotContains(t, skillIDs(c), hidden)
		}
		require.True(t, c.Capabilities.ExtendedAgentCard)
		var got []a2a.TransportProtocol
		for _, iface := range c.SupportedInterfaces {
			got = append(got, iface.ProtocolBinding)
			require.Equal(t, a2a.ProtocolVersion("1.0"), iface.ProtocolVersion)
		}
		require.ElementsMatch(t, append(slices.Clone(bindings), a2a.TransportProtocolGRPC), got)
	})

	unknown := testutil.UnknownKey(t)
	public := testutil.PublicSkills
	with := func(extra ...string) []string {
		out := append([]string{}, public...)
		out = append(out, extra...)
		// card order is by id
		for i := 1; i < len(out); i++ {
			for j := i; j > 0 && out[j] < out[j-1]; j-- {
				out[j], out[j-1] = out[j-1], out[j]
			}
		}
		return out
	}
	ok := []struct {
		name   string
		tok    testutil.TokenOptions
		skills []string
	}{
		{"recon.run adds reconcile-invoice", testutil.TokenOptions{Scopes: []string{"recon.run"}}, with("reconcile-invoice")},
		{"recon.run with ES256", testutil.TokenOptions{Scopes: []string{"recon.run"}, ES256: true}, with("reconcile-invoice")},
		{"no recon.run: public skills only", testutil.TokenOptions{Scopes: []string{"invoices.read"}}, public},
		{"no scopes at all", testutil.TokenOptions{}, public},
		{"preview opt-in by scope shows forecast-cashflow", testutil.TokenOptions{Scopes: []string{"a2a.preview", "forecast.read"}}, with("forecast-cashflow")},
		{"forecast.read without preview opt-in", testutil.TokenOptions{Scopes: []string{"forecast.read"}}, public},
		{"preview opt-in without forecast.read", testutil.TokenOptions{Scopes: []string{"a2a.preview"}}, public},
		{"every scope: still no internal or removed", testutil.TokenOptions{Scopes: []string{"recon.run", "a2a.preview", "forecast.read", "ops.admin"}}, with("forecast-cashflow", "reconcile-invoice")},
	}
	refused := []struct {
		name string
		tok  string // "" sends no Authorization header
	}{
		{"no token", ""},
		{"wrong audience", testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}, Audience: "other-agent"})},
		{"wrong issuer", testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}, Issuer: "https://evil.example.com"})},
		{"expired", testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}, TTL: -10 * time.Minute})},
		{"unknown key under a known kid", testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}, Key: unknown, KeyID: testutil.KeyRS256})},
		{"unknown kid", testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}, Key: unknown, KeyID: "rotated-away"})},
		{"not a JWT", "not.a.jwt"},
	}

	for _, binding := range bindings {
		t.Run(string(binding), func(t *testing.T) {
			for _, tc := range ok {
				t.Run(tc.name, func(t *testing.T) {
					c := srv.Client(t, binding, testutil.Bearer(testutil.Token(t, tc.tok)))
					card, err := c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
					require.NoError(t, err)
					require.Equal(t, tc.skills, skillIDs(card))
					require.NotContains(t, skillIDs(card), "purge-invoice-cache")
					require.NotContains(t, skillIDs(card), "reconcile-invoice-v0")
				})
			}
			for _, tc := range refused {
				t.Run(tc.name, func(t *testing.T) {
					var opts []testutil.ClientOption
					if tc.tok != "" {
						opts = append(opts, testutil.Bearer(tc.tok))
					}
					c := srv.Client(t, binding, opts...)
					card, err := c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
					require.ErrorIs(t, err, a2a.ErrUnauthenticated, "card: %v", card)
					require.Nil(t, card)
				})
			}
		})
	}

	t.Run("no token over JSON-RPC is HTTP 200 with -31401", func(t *testing.T) {
		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":7,"method":"GetExtendedAgentCard","params":{}}`, "A2A-Version", "1.0")
		require.Equal(t, 200, r.Status)
		require.JSONEq(t, `{"jsonrpc":"2.0","id":7,"error":{"code":-31401,"message":"authentication required",
			"data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"UNAUTHENTICATED","domain":"a2a-protocol.org"}]}}`, string(r.Body))
	})
}

// TestClientTenants restricts reconcile-invoice to one tenant in a copy of
// the finance example (the shipped manifests all use tenants: "*").
func TestClientTenants(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capabilities/reconcile-invoice.yaml", func(s string) string {
		return replaceOnce(t, s, `tenants: "*"`, `tenants: [acme]`)
	})
	srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))

	cases := []struct {
		name   string
		tenant string
		want   bool
	}{
		{"listed tenant", "acme", true},
		{"other tenant", "globex", false},
		{"no tenant claim", "", false},
		{"tenant differing in case", "ACME", false},
	}
	for _, binding := range bindings {
		for _, tc := range cases {
			t.Run(string(binding)+"/"+tc.name, func(t *testing.T) {
				tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}, Tenant: tc.tenant})
				c := srv.Client(t, binding, testutil.Bearer(tok))
				card, err := c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
				require.NoError(t, err)
				if tc.want {
					require.Contains(t, skillIDs(card), "reconcile-invoice")
				} else {
					require.NotContains(t, skillIDs(card), "reconcile-invoice")
				}
				require.Subset(t, skillIDs(card), testutil.PublicSkills)
			})
		}
	}
}
