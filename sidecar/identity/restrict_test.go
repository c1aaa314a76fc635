package identity

import (
	"net/http"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
)

// TestIssuerRestrictions: an issuer's tenants list refuses a token naming another tenant; its
// scopes list narrows what its tokens grant.
func TestIssuerRestrictions(t *testing.T) {
	keys := newTestKeys(t)
	clock := newFakeClock()
	iss := config.Issuer{Issuer: testIssuer, Audiences: []string{testAudience}, JWKSFile: "jwks.json",
		Tenants: []string{"acme"}, Scopes: []string{"recon.run"}}
	v := newFileVerifier(t, testAuth(iss), keys.jwks(t), WithClock(clock.Now))
	sign := func(mod func(jwt.MapClaims)) string {
		c := validClaims(clock.Now())
		mod(c)
		return "Bearer " + signToken(t, jwt.SigningMethodES256, keys.ec, ecKid, c)
	}
	p, err := v.Verify(t.Context(), sign(func(jwt.MapClaims) {}))
	require.NoError(t, err)
	require.Equal(t, "acme", p.Tenant)
	require.Equal(t, []string{"recon.run"}, p.Scopes, "invoices.read is not a scope this issuer may grant")

	_, err = v.Verify(t.Context(), sign(func(c jwt.MapClaims) { c["tenant"] = "globex" }))
	requireKind(t, err, ErrInvalidToken, "the token's issuer may not assert this tenant")
	_, err = v.Verify(t.Context(), sign(func(c jwt.MapClaims) { delete(c, "tenant") }))
	requireKind(t, err, ErrInvalidToken, "the token's issuer may not assert this tenant")

	p, err = v.Verify(t.Context(), sign(func(c jwt.MapClaims) { c["scope"] = "admin invoices.read" }))
	require.NoError(t, err)
	require.Empty(t, p.Scopes)

	// Without lists, anything goes (as before).
	free := newFileVerifier(t, testAuth(), keys.jwks(t), WithClock(clock.Now))
	p, err = free.Verify(t.Context(), sign(func(c jwt.MapClaims) { c["tenant"] = "globex" }))
	require.NoError(t, err)
	require.Equal(t, []string{"invoices.read", "recon.run"}, p.Scopes)
}

func TestPeerPrincipals(t *testing.T) {
	m := PeerPrincipals(config.Auth{MTLSPrincipals: map[string]config.MTLSPrincipal{
		"spiffe://example.org/a": {Subject: "orch", Tenant: "acme", Scopes: []string{"b", "a", "b"}},
		"spiffe://example.org/b": {},
	}})
	require.Equal(t, Principal{Authenticated: true, Subject: "orch", Tenant: "acme", Issuer: MTLSIssuer, Scopes: []string{"a", "b"}}, m["spiffe://example.org/a"])
	require.Equal(t, Principal{Authenticated: true, Subject: "spiffe://example.org/b", Issuer: MTLSIssuer}, m["spiffe://example.org/b"])
}

func TestLegacyTaskIssuer(t *testing.T) {
	one := []config.Issuer{{Issuer: "https://a"}}
	require.Equal(t, "https://a", LegacyTaskIssuer(config.Auth{Issuers: one}))
	require.Empty(t, LegacyTaskIssuer(config.Auth{Issuers: append(one, config.Issuer{Issuer: "https://b"})}), "two issuers: old bindings are nobody's")
	require.Empty(t, LegacyTaskIssuer(config.Auth{Issuers: one, MTLSPrincipals: map[string]config.MTLSPrincipal{"spiffe://x": {}}}))
	require.Empty(t, LegacyTaskIssuer(config.Auth{}))
}

func TestProxyTrust(t *testing.T) {
	secret := "0123456789abcdef0123456789abcdef-proxy"
	read := fileReader(map[string][]byte{"secret": []byte(secret + "\n")})
	tr, err := NewProxyTrust(&config.TrustedProxy{Addresses: []string{"127.0.0.1", "10.0.0.0/8"}, SecretFile: "secret"}, read)
	require.NoError(t, err)
	const spiffe = "spiffe://example.org/ns/partners/sa/orchestrator"
	xfcc := `By=spiffe://example.org/ns/agents/sa/finance;Hash=abc;URI=` + spiffe
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name, remote string
		h            http.Header
		peer         string
		trusted, bad bool
	}{
		{"proxy with secret", "127.0.0.1:5555", h("X-Capgate-Proxy-Secret", secret, "X-Forwarded-Client-Cert", xfcc), spiffe, true, false},
		{"proxy in a CIDR", "10.1.2.3:5555", h("X-Capgate-Proxy-Secret", secret, "X-Forwarded-Client-Cert", xfcc), spiffe, true, false},
		{"IPv4-mapped proxy address", "[::ffff:127.0.0.1]:5555", h("X-Capgate-Proxy-Secret", secret, "X-Forwarded-Client-Cert", xfcc), spiffe, true, false},
		{"quoted URI, two elements: the last is the peer", "127.0.0.1:1", h("X-Capgate-Proxy-Secret", secret,
			"X-Forwarded-Client-Cert", `URI=spiffe://example.org/first,By=x;URI="`+spiffe+`"`), spiffe, true, false},
		{"proxy without a client certificate", "127.0.0.1:1", h("X-Capgate-Proxy-Secret", secret), "", true, false},
		{"direct caller forging both headers", "192.0.2.9:5555", h("X-Capgate-Proxy-Secret", secret, "X-Forwarded-Client-Cert", xfcc), "", false, false},
		{"right address, wrong secret", "127.0.0.1:5555", h("X-Capgate-Proxy-Secret", "guess", "X-Forwarded-Client-Cert", xfcc), "", false, false},
		{"right address, no secret", "127.0.0.1:5555", h("X-Forwarded-Client-Cert", xfcc), "", false, false},
		{"secret given twice", "127.0.0.1:5555", h("X-Capgate-Proxy-Secret", secret, "X-Capgate-Proxy-Secret", secret, "X-Forwarded-Client-Cert", xfcc), "", false, false},
		{"client certificate header twice", "127.0.0.1:5555", h("X-Capgate-Proxy-Secret", secret, "X-Forwarded-Client-Cert", xfcc, "X-Forwarded-Client-Cert", xfcc), "", true, true},
		{"two URIs in one element", "127.0.0.1:5555", h("X-Capgate-Proxy-Secret", secret, "X-Forwarded-Client-Cert", "URI=a;URI=b"), "", true, true},
		{"malformed field", "127.0.0.1:5555", h("X-Capgate-Proxy-Secret", secret, "X-Forwarded-Client-Cert", "garbage"), "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer, trusted, err := tr.Peer(tc.remote, tc.h)
			require.Equal(t, tc.trusted, trusted)
			require.Equal(t, tc.bad, err != nil, "%v", err)
			require.Equal(t, tc.peer, peer)
		})
	}
	ux, err := NewProxyTrust(&config.TrustedProxy{Addresses: []string{"unix"}, SecretFile: "secret"}, read)
	require.NoError(t, err)
	peer, trusted, err := ux.Peer("@", h("X-Capgate-Proxy-Secret", secret, "X-Forwarded-Client-Cert", xfcc))
	require.NoError(t, err)
	require.True(t, trusted, "a connection over the gateway's Unix socket")
	require.Equal(t, spiffe, peer)
	_, trusted, _ = ux.Peer("127.0.0.1:1", h("X-Capgate-Proxy-Secret", secret, "X-Forwarded-Client-Cert", xfcc))
	require.False(t, trusted, "unix trusts no TCP peer")

	var none *ProxyTrust
	peer, trusted, err = none.Peer("127.0.0.1:1", h("X-Forwarded-Client-Cert", xfcc))
	require.NoError(t, err)
	require.False(t, trusted)
	require.Empty(t, peer, "without auth.trusted_proxy the header is never read")

	_, err = NewProxyTrust(&config.TrustedProxy{Addresses: []string{"127.0.0.1"}, SecretFile: "short"}, fileReader(map[string][]byte{"short": []byte("x")}))
	require.Error(t, err)
	_, err = NewProxyTrust(&config.TrustedProxy{Addresses: []string{"nope"}, SecretFile: "secret"}, read)
	require.Error(t, err)
}
