package admission_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuthorizationGrammarAtBothDoors: one Authorization grammar (identity.BearerToken) at both
// doors. The gateway's net/http trims a header value's leading and trailing whitespace before
// capgate reads it; Envoy hands ext_authz the value as received. Each spelling of the owner's
// credential gets the same verdict at both doors, and only the RFC 9110/6750 spellings (scheme
// in any case, 1*SP, OWS around the value) admit the owner; issue 21 found "Bearer <t> "
// admitted by the gateway and refused by ext_authz.
func TestAuthorizationGrammarAtBothDoors(t *testing.T) {
	e := startBoth(t)
	owner := classes(t, e)[0]
	tok := owner.token
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"canonical", "Bearer " + tok, true},
		{"lower-case scheme", "bearer " + tok, true},
		{"upper-case scheme", "BEARER " + tok, true},
		{"trailing space", "Bearer " + tok + " ", true},
		{"trailing spaces", "Bearer " + tok + "   ", true},
		{"trailing tab", "Bearer " + tok + "\t", true},
		{"leading space", " Bearer " + tok, true},
		{"leading tab", "\tBearer " + tok, true},
		{"two spaces", "Bearer  " + tok, true},
		{"tab after scheme", "Bearer\t" + tok, false},
		{"space and tab after scheme", "Bearer \t" + tok, false},
		{"no space", "Bearer" + tok, false},
		{"scheme only", "Bearer", false},
		{"scheme and space", "Bearer ", false},
		{"two tokens", "Bearer " + tok + " " + tok, false},
		{"a list", "Bearer " + tok + ", Bearer " + tok, false},
		{"trailing comma", "Bearer " + tok + ",", false},
		{"trailing semicolon", "Bearer " + tok + ";", false},
		{"quoted", `Bearer "` + tok + `"`, false},
		{"trailing NBSP", "Bearer " + tok + "\u00a0", false},
		{"Cyrillic e in scheme", "B\u0435arer " + tok, false},
		{"other scheme", "Token " + tok, false},
		{"basic", "Basic dXNlcjpwYXNz", false},
		{"equals", "Bearer=" + tok, false},
		{"token only", tok, false},
		{"padding", "Bearer " + tok + "==", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := header("A2A-Version", "1.0", "Content-Type", "application/json")
			h["Authorization"] = []string{tc.value}
			gw, az := e.door(t, http.MethodPost, "/", h, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"`+owner.task+`"}}`)
			require.Equal(t, tc.ok, az.allowed, "ext_authz: %s\n%s", az, az.body)
			require.Equal(t, tc.ok, gw.allowed, "gateway: %s\n%s", gw, gw.body)
			if !tc.ok {
				require.Equal(t, "UNAUTHENTICATED", gw.reason)
			}
		})
	}
}
