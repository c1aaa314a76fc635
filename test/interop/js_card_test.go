package interop

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// tokenURL gives the finance example's issuer a token endpoint, so its cards declare an oauth2
// scheme (client credentials) and per-skill requirements with scopes.
const tokenURL = "      token_url: https://idp.example.com/oauth2/token\n"

// withTokenURL is frontedServer's config edit for tokenURL.
func withTokenURL(s string) string {
	const at = "      algorithms: [RS256, ES256]\n"
	return strings.Replace(s, at, at+tokenURL, 1)
}

// TestJSClientFromCard: @a2a-js/sdk 1.3.0 discovers capgate from its card as served (capgate
// behind a TCP front at agent.url; nothing rewritten) and calls it over each of its three
// transports; the gRPC interface (dns:///host:port) is dialled by grpc-js as given. The SDK
// parses securityRequirements in both forms without error but does not act on them (callers
// pass credentials through fetch or an interceptor); in a2a-go's form it loses the scopes
// (but for the extended card over gRPC, which is always in the proto's form).
func TestJSClientFromCard(t *testing.T) {
	node := requireNode(t)
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"invoices.read", "recon.run"}})
	type reqs = []map[string][]string
	top := reqs{{"bearer": {}}, {"oauth2": {}}}
	for _, tt := range []struct {
		form      string
		top       reqs
		reconcile reqs // the extended card's reconcile-invoice
	}{
		{"omit", reqs{}, reqs{}},
		{"proto", top, reqs{{"bearer": {}}, {"oauth2": {"recon.run"}}}},
		{"a2a-go", top, reqs{{"bearer": {}}, {"oauth2": {}}}}, // the SDK reads {"list": …} only
	} {
		t.Run(tt.form, func(t *testing.T) {
			base, _ := frontedServerEdit(t, withTokenURL, "cards: {security_requirements: "+tt.form+"}\n")
			got := runScript(t, node, "card.mjs", plan{Base: base, Token: tok, Steps: jsBindings})
			for _, b := range jsBindings {
				t.Run(b, func(t *testing.T) {
					s := got[b+"/card"]
					require.True(t, s.OK, "%+v", s.Error)
					var c struct {
						URL                  string `json:"url"`
						SecurityRequirements reqs   `json:"securityRequirements"`
					}
					require.NoError(t, json.Unmarshal(s.Result, &c))
					wantURL := base
					if b == "GRPC" {
						wantURL = "dns:///" + strings.TrimPrefix(base, "http://")
					}
					require.Equal(t, wantURL, c.URL)
					require.Equal(t, tt.top, c.SecurityRequirements)

					s = got[b+"/send"]
					require.True(t, s.OK, "%+v", s.Error)
					require.JSONEq(t, `{"state":"TASK_STATE_COMPLETED"}`, string(s.Result))

					s = got[b+"/extendedCard"]
					require.True(t, s.OK, "%+v", s.Error)
					var ext struct {
						SkillRequirements map[string]reqs `json:"skillRequirements"`
					}
					require.NoError(t, json.Unmarshal(s.Result, &ext))
					want := tt.reconcile
					if b == "GRPC" && tt.form == "a2a-go" {
						want = reqs{{"bearer": {}}, {"oauth2": {"recon.run"}}} // gRPC answers carry the proto's form
					}
					require.Equal(t, want, ext.SkillRequirements["reconcile-invoice"])
				})
			}
		})
	}
}

// TestV03RESTCardSecurity: the 0.3 HTTP+JSON binding's extended card (GET /v1/card, the 0.3
// proto's AgentCard in ProtoJSON) carries the oauth2 scheme and the requirements as security.
func TestV03RESTCardSecurity(t *testing.T) {
	base, srv := frontedServerEdit(t, withTokenURL, "cards: {security_requirements: proto}\n")
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"invoices.read", "recon.run"}})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/v1/card", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := srv.HTTP.Do(req)
	require.NoError(t, err)
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", body)
	var c struct {
		SecuritySchemes map[string]map[string]json.RawMessage `json:"securitySchemes"`
		Security        []struct {
			Schemes map[string]struct {
				List []string `json:"list"`
			} `json:"schemes"`
		} `json:"security"`
		Skills []struct {
			ID       string            `json:"id"`
			Security []json.RawMessage `json:"security"`
		} `json:"skills"`
	}
	require.NoError(t, json.Unmarshal(body, &c), "%s", body)
	require.Contains(t, c.SecuritySchemes["oauth2"], "oauth2SecurityScheme", "%s", body)
	require.Len(t, c.Security, 2, "%s", body)
	for _, s := range c.Skills {
		if s.ID == "reconcile-invoice" {
			require.Len(t, s.Security, 2, "%s", body)
			return
		}
	}
	t.Fatalf("no reconcile-invoice in %s", body)
}
