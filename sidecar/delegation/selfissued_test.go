package delegation_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"

	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/delegation"
	"github.com/capgate/capgate/sidecar/identity"
)

const (
	agentIssuer = "https://agent.example"
	agentID     = "https://agent.example/agents/finance"
)

func newMinter(t *testing.T, now func() time.Time) *identity.Minter {
	t.Helper()
	m, err := identity.GenerateMinter(agentIssuer, identity.WithMintClock(now))
	require.NoError(t, err)
	return m
}

// handlerVerifier is a handler's verifier for capgate's tokens: capgate as
// issuer, the handler as audience, capgate's JWKS.
func handlerVerifier(t *testing.T, m *identity.Minter, audience string, auth config.Auth, now func() time.Time) *identity.Verifier {
	t.Helper()
	auth.Issuers = []config.Issuer{{Issuer: m.Issuer(), Audiences: []string{audience}, JWKSFile: "capgate.jwks", Algorithms: []string{"ES256"}}}
	readFile := func(name string) ([]byte, error) {
		if name != "capgate.jwks" {
			return nil, os.ErrNotExist
		}
		return m.JWKS(), nil
	}
	v, err := identity.NewVerifier(t.Context(), auth, readFile, identity.WithClock(now))
	require.NoError(t, err)
	return v
}

func caller(scopes ...string) identity.Principal {
	return identity.Principal{Authenticated: true, Subject: "partner-7", Tenant: "acme", Scopes: scopes}
}

// TestNarrowAndMintedScopes is a property test: for random caller scopes
// and random requires_scopes, Narrow is exactly the set intersection
// (sorted, without duplicates, independent of order), and the scope claim a
// handler verifies equals Narrow — also when the issuer is handed the
// capability's scopes unnarrowed.
func TestNarrowAndMintedScopes(t *testing.T) {
	now := time.Now
	m := newMinter(t, now)
	self := delegation.NewSelfIssued(m, config.Identity{AgentID: agentID, TTL: 30 * time.Second}, config.Auth{})
	v := handlerVerifier(t, m, "reconcile", config.Auth{}, now)

	universe := []string{"a", "b", "c", "invoice.read", "recon.run", "admin", "x:y", "payments.write", "", " "}
	rng := mrand.New(mrand.NewPCG(20240601, 7))
	pick := func() []string {
		out := make([]string, rng.IntN(8))
		for i := range out {
			out[i] = universe[rng.IntN(len(universe))]
		}
		return out
	}
	shuffled := func(in []string) []string {
		out := slices.Clone(in)
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}
	setOf := func(in []string) map[string]bool {
		s := map[string]bool{}
		for _, e := range in {
			for _, f := range strings.Fields(e) {
				s[f] = true
			}
		}
		return s
	}

	for i := range 1500 {
		have, req := pick(), pick()
		got := delegation.Narrow(have, req)

		hs, rs := setOf(have), setOf(req)
		var want []string
		for s := range rs {
			if hs[s] {
				want = append(want, s)
			}
		}
		slices.Sort(want)
		require.Equal(t, len(want), len(got), "case %d: %q ∩ %q", i, have, req)
		if len(want) > 0 {
			require.Equal(t, want, got, "case %d", i)
		}
		require.True(t, slices.IsSorted(got), "case %d", i)
		require.Equal(t, len(slices.Compact(slices.Clone(got))), len(got), "case %d: duplicates", i)
		for _, s := range got {
			require.True(t, hs[s] && rs[s], "case %d: %q not in both", i, s)
		}
		require.Equal(t, got, delegation.Narrow(shuffled(have), shuffled(req)), "case %d: order", i)

		targetScopes := got
		if i%2 == 1 {
			targetScopes = req // the issuer narrows again: never more than the caller holds
		}
		p := caller(have...)
		tok, err := self.Token(t.Context(), delegation.Subject{Principal: p, DecisionID: "d"}, reconcile(targetScopes...))
		require.NoError(t, err)
		seen, err := v.Verify(t.Context(), "Bearer "+tok)
		require.NoError(t, err)
		require.Equal(t, len(got), len(seen.Scopes), "case %d", i)
		if len(got) == 0 {
			require.NotContains(t, tokenClaims(t, tok), "scope", "case %d", i)
		} else {
			require.Equal(t, got, seen.Scopes, "case %d", i)
			require.Equal(t, strings.Join(got, " "), tokenClaims(t, tok)["scope"], "case %d", i)
		}
	}
}

func TestSelfIssuedClaims(t *testing.T) {
	t0 := time.Unix(1_900_000_000, 0)
	now := func() time.Time { return t0 }
	m := newMinter(t, now)
	tests := []struct {
		name      string
		auth      config.Auth
		ttl       time.Duration
		principal identity.Principal
		target    delegation.Target
		want      map[string]any // besides jti
	}{
		{
			name:      "default claim names",
			ttl:       30 * time.Second,
			principal: caller("invoice.read", "recon.run", "admin"),
			target:    reconcile("recon.run"),
			want: map[string]any{
				"iss": agentIssuer, "sub": "partner-7", "aud": "reconcile", "tenant": "acme", "scope": "recon.run",
				"capability": "reconcile-invoice", "decision_id": "d-42", "act": map[string]any{"sub": agentID},
				"iat": float64(t0.Unix()), "nbf": float64(t0.Unix()), "exp": float64(t0.Add(30 * time.Second).Unix()),
			},
		},
		{
			name:      "configured claim names, TTL capped at 60s, no tenant",
			auth:      config.Auth{ScopesClaim: "permissions", TenantClaim: "org"},
			ttl:       10 * time.Minute,
			principal: identity.Principal{Authenticated: true, Subject: "partner-7", Scopes: []string{"recon.run"}},
			target:    reconcile("recon.run", "invoice.read"),
			want: map[string]any{
				"iss": agentIssuer, "sub": "partner-7", "aud": "reconcile", "permissions": "recon.run",
				"capability": "reconcile-invoice", "decision_id": "d-42", "act": map[string]any{"sub": agentID},
				"iat": float64(t0.Unix()), "nbf": float64(t0.Unix()), "exp": float64(t0.Add(60 * time.Second).Unix()),
			},
		},
		{
			name:      "limits in one claim",
			principal: caller("recon.run"),
			target: delegation.Target{Capability: "reconcile-invoice", Handler: "reconcile", Scopes: []string{"recon.run"},
				Limits: map[string]any{"max_pdf_pages": int64(200), "cost_class": "medium", "max_parts": int64(4)}},
			want: map[string]any{
				"iss": agentIssuer, "sub": "partner-7", "aud": "reconcile", "tenant": "acme", "scope": "recon.run",
				"capability": "reconcile-invoice", "decision_id": "d-42", "act": map[string]any{"sub": agentID},
				"limits": map[string]any{"max_pdf_pages": float64(200), "cost_class": "medium", "max_parts": float64(4)},
				"iat":    float64(t0.Unix()), "nbf": float64(t0.Unix()), "exp": float64(t0.Add(60 * time.Second).Unix()),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			self := delegation.NewSelfIssued(m, config.Identity{AgentID: agentID, TTL: tt.ttl}, tt.auth)
			v := handlerVerifier(t, m, "reconcile", tt.auth, now)
			var jtis []string
			for range 2 {
				tok, err := self.Token(t.Context(), delegation.Subject{Principal: tt.principal, DecisionID: "d-42", Authorization: "Bearer caller.raw.token"}, tt.target)
				require.NoError(t, err)
				require.NotContains(t, tok, "caller.raw.token")
				_, err = v.Verify(t.Context(), "Bearer "+tok)
				require.NoError(t, err, "the handler accepts the token")
				claims := tokenClaims(t, tok)
				jti, ok := claims["jti"].(string)
				require.True(t, ok)
				jtis = append(jtis, jti)
				delete(claims, "jti")
				require.Equal(t, tt.want, claims)
			}
			require.NotEqual(t, jtis[0], jtis[1], "jti is unique")
		})
	}
}

// tokenClaims decodes a token's payload without checking it: for asserting
// what a token carries after Verify accepted it.
func tokenClaims(t testing.TB, tok string) map[string]any {
	t.Helper()
	claims := jwt.MapClaims{}
	_, _, err := jwt.NewParser().ParseUnverified(tok, claims)
	require.NoError(t, err)
	return claims
}

func TestSelfIssuedRefusals(t *testing.T) {
	t0 := time.Unix(1_900_000_000, 0)
	m := newMinter(t, func() time.Time { return t0 })
	self := delegation.NewSelfIssued(m, config.Identity{AgentID: agentID, TTL: 30 * time.Second}, config.Auth{})
	tok, err := self.Token(t.Context(), delegation.Subject{Principal: caller("recon.run")}, reconcile("recon.run"))
	require.NoError(t, err)

	auth := config.Auth{ClockSkew: time.Second}
	tests := []struct {
		name     string
		audience string
		at       time.Time
		kind     identity.Kind
	}{
		{name: "handler it was minted for", audience: "reconcile", at: t0.Add(29 * time.Second)},
		{name: "another handler", audience: "lookup", at: t0, kind: identity.ErrInvalidToken},
		{name: "expired", audience: "reconcile", at: t0.Add(32 * time.Second), kind: identity.ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := handlerVerifier(t, m, tt.audience, auth, func() time.Time { return tt.at })
			p, err := v.Verify(t.Context(), "Bearer "+tok)
			if tt.kind == "" {
				require.NoError(t, err)
				require.Equal(t, "partner-7", p.Subject)
				return
			}
			require.ErrorIs(t, err, tt.kind)
			require.False(t, p.Authenticated)
		})
	}
}

func TestSelfIssuedErrors(t *testing.T) {
	m := newMinter(t, time.Now)
	tests := []struct {
		name string
		self *delegation.SelfIssued
		s    delegation.Subject
		t    delegation.Target
		want string
		is   error
	}{
		{name: "anonymous", self: delegation.NewSelfIssued(m, config.Identity{AgentID: agentID}, config.Auth{}),
			t: reconcile(), want: "self-issued token for handler reconcile: no authenticated caller to pass down", is: delegation.ErrAnonymous},
		{name: "no handler", self: delegation.NewSelfIssued(m, config.Identity{AgentID: agentID}, config.Auth{}),
			s: delegation.Subject{Principal: caller()}, want: "self-issued token: no handler (audience)"},
		{name: "no agent id", self: delegation.NewSelfIssued(m, config.Identity{}, config.Auth{}),
			s: delegation.Subject{Principal: caller()}, t: reconcile(), want: "self-issued token: identity.agent_id is empty"},
		{name: "no minter", self: delegation.NewSelfIssued(nil, config.Identity{AgentID: agentID}, config.Auth{}),
			s: delegation.Subject{Principal: caller()}, t: reconcile(), want: "self-issued token: no minter"},
		{name: "actor chain too deep", self: delegation.NewSelfIssued(m, config.Identity{AgentID: agentID}, config.Auth{}),
			s: delegation.Subject{Principal: identity.Principal{Authenticated: true, Subject: "s", Actor: slices.Repeat([]string{"a"}, 32)}},
			t: reconcile(), want: "self-issued token for handler reconcile: the caller's actor chain is deeper than 31"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := tt.self.Token(t.Context(), tt.s, tt.t)
			require.EqualError(t, err, tt.want)
			require.Empty(t, tok)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
		})
	}
}

// TestActorChain: the caller token's act survives two hops of delegation,
// nested exactly, and reads back as the Principal's actor chain.
func TestActorChain(t *testing.T) {
	now := time.Now
	m := newMinter(t, now)
	const agent2 = "https://agent2.example"

	// The caller's own token, as the gateway verified it: an orchestrator
	// acting for partner-7.
	callerClaims := map[string]any{
		"sub": "partner-7", "tenant": "acme", "scope": "recon.run",
		"act": map[string]any{"sub": "orchestrator", "iss": "https://idp.example", "extra": "dropped",
			"act": map[string]any{"sub": 42}}, // a level without a string sub ends the chain
	}
	p0 := identity.PrincipalFromClaims(config.Auth{}, callerClaims)
	require.Equal(t, []string{"orchestrator"}, p0.Actor)

	hop1 := delegation.NewSelfIssued(m, config.Identity{AgentID: agentID}, config.Auth{})
	tok1, err := hop1.Token(t.Context(), delegation.Subject{Principal: p0}, reconcile("recon.run"))
	require.NoError(t, err)
	p1, err := handlerVerifier(t, m, "reconcile", config.Auth{}, now).Verify(t.Context(), "Bearer "+tok1)
	require.NoError(t, err)
	require.Equal(t, []string{agentID, "orchestrator"}, p1.Actor)
	require.Equal(t, map[string]any{"sub": agentID, "act": map[string]any{"sub": "orchestrator", "iss": "https://idp.example"}}, tokenClaims(t, tok1)["act"])

	// The handler is itself an agent behind capgate and calls on.
	hop2 := delegation.NewSelfIssued(m, config.Identity{AgentID: agent2}, config.Auth{})
	tok2, err := hop2.Token(t.Context(), delegation.Subject{Principal: p1}, delegation.Target{Capability: "post-ledger", Handler: "ledger", Scopes: []string{"recon.run"}})
	require.NoError(t, err)
	p2, err := handlerVerifier(t, m, "ledger", config.Auth{}, now).Verify(t.Context(), "Bearer "+tok2)
	require.NoError(t, err)
	require.Equal(t, []string{agent2, agentID, "orchestrator"}, p2.Actor)
	require.Equal(t, map[string]any{"sub": agent2, "act": map[string]any{"sub": agentID, "act": map[string]any{"sub": "orchestrator", "iss": "https://idp.example"}}}, tokenClaims(t, tok2)["act"])
	require.Equal(t, "partner-7", p2.Subject)
	require.Equal(t, []string{"recon.run"}, p2.Scopes)

	// A principal without claims (not from a token) uses its Actor.
	tok3, err := hop1.Token(t.Context(), delegation.Subject{Principal: identity.Principal{Authenticated: true, Subject: "s", Actor: []string{"o1", "o2"}}}, reconcile())
	require.NoError(t, err)
	p3, err := handlerVerifier(t, m, "reconcile", config.Auth{}, now).Verify(t.Context(), "Bearer "+tok3)
	require.NoError(t, err)
	require.Equal(t, []string{agentID, "o1", "o2"}, p3.Actor)
}

func writeKey(t *testing.T, dir string, key any) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	name := "signing.pem"
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	return name
}

func TestNewMinter(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	wantKid, err := identity.Thumbprint(&ec.PublicKey)
	require.NoError(t, err)

	tests := []struct {
		name    string
		key     any // nil: no signing_key_file
		file    string
		kid     string
		warning bool
		err     string
	}{
		{name: "P-256 key file", key: ec, kid: wantKid},
		{name: "generated, with a warning", warning: true},
		{name: "RSA key refused", key: rsaKey, err: "identity.signing_key_file: minter: signing key must be an ECDSA P-256 private key"},
		{name: "missing file", file: "nope.pem", err: "identity.signing_key_file: read nope.pem:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := &config.Config{Dir: dir, Identity: config.Identity{Issuer: agentIssuer, AgentID: agentID}}
			if tt.key != nil {
				cfg.Identity.SigningKeyFile = writeKey(t, dir, tt.key)
			}
			if tt.file != "" {
				cfg.Identity.SigningKeyFile = tt.file
			}
			core, logs := observer.New(zap.InfoLevel)
			m, err := delegation.NewMinter(cfg, zap.New(core))
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				require.Nil(t, m)
				return
			}
			require.NoError(t, err)
			require.Equal(t, agentIssuer, m.Issuer())
			if tt.kid != "" {
				require.Equal(t, tt.kid, m.KeyID())
			}
			warnings := logs.FilterMessage(delegation.EphemeralKeyWarning).FilterLevelExact(zap.WarnLevel).Len()
			require.Equal(t, tt.warning, warnings == 1)
		})
	}
}

func TestSubjectToken(t *testing.T) {
	tests := map[string]string{
		"Bearer abc.def.ghi": "abc.def.ghi",
		"bearer abc":         "abc",
		"Basic abc":          "",
		"Bearer":             "",
		"Bearer a b":         "",
		"":                   "",
	}
	for in, want := range tests {
		require.Equal(t, want, delegation.Subject{Authorization: in}.SubjectToken(), in)
	}
}
