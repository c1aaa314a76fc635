package admission_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/test/testutil"
)

// TestUnauthenticatedRefusalsNameTheirClass: for every reason class of an Unauthenticated
// refusal, a request built to trigger it is refused at both doors, and each door's decision
// event carries the class and the token's issuer (bounded, control characters removed); no
// decision event and no log line holds the token.
func TestUnauthenticatedRefusalsNameTheirClass(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return strings.Replace(s, "  scopes_claim: scope", `    - issuer: `+issuerB+`
      audiences: [finance-agent]
      jwks_file: ./keys/demo.jwks.json
      algorithms: [RS256, ES256]
      tenants: [acme]
  scopes_claim: scope`, 1)
	})
	srv := testutil.Start(t, testutil.LoadDeployment(t, cfg), testutil.StartOptions{ExtAuthz: true})
	e := connect(t, srv)

	now := time.Now()
	tok := func(o testutil.TokenOptions) string { return testutil.Token(t, o) }
	valid := tok(testutil.TokenOptions{})
	longIssuer := "https://" + strings.Repeat("i", 400) + ".example.com"
	cases := []struct {
		name   string
		auth   string // the Authorization header ("" for none)
		token  string // the text that must appear in no event or log line
		reason identity.Reason
		issuer string
	}{
		{name: "no credential", reason: identity.ReasonMissingCredential},
		{name: "not a JWS", auth: "Bearer not-a-jws-token-q7x", token: "not-a-jws-token-q7x", reason: identity.ReasonMalformed},
		{name: "bad signature", auth: "Bearer " + valid[:len(valid)-8] + "AAAAAAAA", token: valid[:len(valid)-8], reason: identity.ReasonSignature, issuer: testutil.Issuer},
		{name: "unknown issuer, with control characters", auth: "Bearer " + tok(testutil.TokenOptions{Issuer: "https://evil.example.com/\x07\n\u2028x"}),
			reason: identity.ReasonUnknownIssuer, issuer: "https://evil.example.com/x"},
		{name: "unknown issuer, long", auth: "Bearer " + tok(testutil.TokenOptions{Issuer: longIssuer}),
			reason: identity.ReasonUnknownIssuer, issuer: longIssuer[:identity.MaxIssuerBytes]},
		{name: "audience", auth: "Bearer " + tok(testutil.TokenOptions{Audience: "other-agent"}), reason: identity.ReasonAudience, issuer: testutil.Issuer},
		{name: "unknown key id", auth: "Bearer " + tok(testutil.TokenOptions{KeyID: "no-such-key"}), reason: identity.ReasonUnknownKeyID, issuer: testutil.Issuer},
		{name: "algorithm not the key's", auth: "Bearer " + tok(testutil.TokenOptions{ES256: true, KeyID: testutil.KeyRS256}), reason: identity.ReasonAlgorithm, issuer: testutil.Issuer},
		{name: "expired", auth: "Bearer " + tok(testutil.TokenOptions{TTL: -time.Hour}), reason: identity.ReasonExpired, issuer: testutil.Issuer},
		{name: "nbf in the future", auth: "Bearer " + tok(testutil.TokenOptions{Claims: map[string]any{"nbf": now.Add(30 * time.Minute).Unix()}}),
			reason: identity.ReasonNotYetValid, issuer: testutil.Issuer},
		{name: "iat in the future", auth: "Bearer " + tok(testutil.TokenOptions{Claims: map[string]any{"iat": now.Add(30 * time.Minute).Unix()}}),
			reason: identity.ReasonNotYetValid, issuer: testutil.Issuer},
		{name: "lifetime too long", auth: "Bearer " + tok(testutil.TokenOptions{TTL: 400 * 24 * time.Hour}), reason: identity.ReasonLifetime, issuer: testutil.Issuer},
		{name: "tenant not allowed for issuer", auth: "Bearer " + tok(testutil.TokenOptions{Issuer: issuerB, Tenant: "globex"}),
			reason: identity.ReasonTenantNotAllowed, issuer: issuerB},
		{name: "no subject", auth: "Bearer " + tok(testutil.TokenOptions{Claims: map[string]any{"sub": ""}}), reason: identity.ReasonInvalidClaims, issuer: testutil.Issuer},
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"}}`
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := header("A2A-Version", "1.0", "Content-Type", "application/json")
			if c.auth != "" {
				h.Set("Authorization", c.auth)
			}
			gw, az := e.door(t, http.MethodPost, "/", h, body)
			require.Equal(t, "UNAUTHENTICATED", gw.reason, "%s", gw.body)
			for _, o := range []outcome{gw, az} {
				require.NotEmpty(t, o.decision)
				events := srv.WaitDecision(t, o.decision)
				require.Len(t, events, 1)
				ev := events[0]
				require.Equal(t, string(c.reason), ev["auth_reason"], "%v", ev)
				if c.issuer == "" {
					require.NotContains(t, ev, "issuer")
				} else {
					require.Equal(t, c.issuer, ev["issuer"], "%v", ev)
				}
			}
			if c.token != "" {
				for _, l := range append(srv.Decisions.All(), srv.Logs.All()...) {
					b, err := json.Marshal(map[string]any{"msg": l.Message, "fields": l.ContextMap()})
					require.NoError(t, err)
					require.NotContains(t, string(b), c.token, "a log line holds the token")
				}
			}
		})
	}
	// Every class but the keys being unavailable (a 500, not a refusal of the caller) and the
	// catch-all is triggered above.
	seen := map[identity.Reason]bool{identity.ReasonKeysUnavailable: true, identity.ReasonUnauthenticated: true}
	for _, c := range cases {
		seen[c.reason] = true
	}
	for _, r := range identity.Reasons {
		require.True(t, seen[r], "no case triggers %s", r)
	}
}

// TestDenialsOutsideRegoNameTheirRule: a denial made by a check other than the policy (task,
// context and tenant ownership, a missing credential, a removed capability, no capability that
// takes the message) names that check in its decision event (result.rule), and the capability
// it concerned when there is one — at both doors where both make it.
func TestDenialsOutsideRegoNameTheirRule(t *testing.T) {
	e := startBoth(t)
	cs := classes(t, e)
	owner, other := cs[0], cs[1]
	bearer := func(c *class) http.Header {
		return header("A2A-Version", "1.0", "Content-Type", "application/json", "Authorization", "Bearer "+c.token)
	}
	event := func(t *testing.T, o outcome) map[string]any {
		t.Helper()
		require.NotEmpty(t, o.decision, "%s", o.body)
		evs := e.srv.WaitDecision(t, o.decision)
		require.Len(t, evs, 1)
		return evs[0]
	}
	rpc := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	}
	both := []struct {
		name, method, target string
		h                    http.Header
		body                 string
		rule                 string
	}{
		{"another owner's task", http.MethodPost, "/", bearer(other), rpc("GetTask", `{"id":"`+owner.task+`"}`), decisionlog.RuleTaskOwner},
		{"another tenant", http.MethodPost, "/", bearer(owner), rpc("GetTask", `{"id":"`+owner.task+`","tenant":"globex"}`), decisionlog.RuleTenant},
		{"another owner's context", http.MethodPost, "/", bearer(other),
			rpc("SendMessage", `{"message":{"messageId":"m-r","role":"ROLE_USER","contextId":"`+owner.context+`","parts":[{"text":"look up invoice INV-1"}]}}`),
			decisionlog.RuleContextOwner},
		{"no credential", http.MethodPost, "/", header("A2A-Version", "1.0", "Content-Type", "application/json"), rpc("GetTask", `{"id":"t-1"}`), decisionlog.RuleCredential},
	}
	for _, c := range both {
		t.Run(c.name, func(t *testing.T) {
			gw, az := e.door(t, c.method, c.target, c.h, c.body)
			require.False(t, gw.allowed)
			for _, o := range []outcome{gw, az} {
				ev := event(t, o)
				require.Equal(t, c.rule, ev["rule"], "%v", ev)
				require.Equal(t, decisionlog.Deny, ev["result"])
			}
		})
	}

	// Routing and lifecycle are the gateway's: ext_authz admits the message (no routing there).
	send := func(parts, hint string) string {
		meta := ""
		if hint != "" {
			meta = `,"metadata":{"skillId":"` + hint + `"}`
		}
		return rpc("SendMessage", `{"message":{"messageId":"m-rule","role":"ROLE_USER","parts":[`+parts+`]`+meta+`}}`)
	}
	gatewayOnly := []struct {
		name, body, rule, capability string
	}{
		{"a removed capability's hint", send(`{"text":"compare the invoice total with the PO total"}`, "reconcile-invoice-v0"),
			decisionlog.RuleRemoved, "reconcile-invoice-v0"},
		{"no capability takes the media type", send(`{"raw":"aGVsbG8=","mediaType":"application/x-capgate-none"}`, ""),
			decisionlog.RuleContentType, ""},
	}
	for _, c := range gatewayOnly {
		t.Run(c.name, func(t *testing.T) {
			gw := e.gateway(t, http.MethodPost, "/", bearer(owner), []byte(c.body))
			require.False(t, gw.allowed, "%s", gw.body)
			ev := event(t, gw)
			require.Equal(t, c.rule, ev["rule"], "%v", ev)
			if c.capability == "" {
				require.NotContains(t, ev, "capability")
			} else {
				require.Equal(t, c.capability, ev["capability"], "%v", ev)
			}
		})
	}
}
