package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
)

const mintIssuer = "https://capgate.example.test"

func minterVerifier(t *testing.T, m *Minter, audience string, clock *fakeClock) *Verifier {
	t.Helper()
	auth := config.Auth{Issuers: []config.Issuer{{Issuer: mintIssuer, Audiences: []string{audience}, JWKSFile: "capgate.jwks", Algorithms: []string{"ES256"}}}}
	v, err := NewVerifier(t.Context(), auth, fileReader(map[string][]byte{"capgate.jwks": m.JWKS()}), WithClock(clock.Now))
	require.NoError(t, err)
	return v
}

func TestMintRoundTrip(t *testing.T) {
	clock := newFakeClock()
	m, err := GenerateMinter(mintIssuer, WithMintClock(clock.Now))
	require.NoError(t, err)
	v := minterVerifier(t, m, "recon.v3", clock)

	tests := []struct {
		name      string
		claims    MintClaims
		wantActor []string
		wantTTL   time.Duration
	}{
		{name: "plain", claims: MintClaims{Subject: "alice", Tenant: "acme", Audience: "recon.v3", Scopes: []string{"recon.run", "a", "recon.run"}},
			wantTTL: MaxMintTTL},
		{name: "one hop", claims: MintClaims{Subject: "alice", Tenant: "acme", Audience: "recon.v3", Scopes: []string{"recon.run"}, Actor: "finance-agent", TTL: 10 * time.Second},
			wantActor: []string{"finance-agent"}, wantTTL: 10 * time.Second},
		{name: "two hops nested", claims: MintClaims{Subject: "alice", Tenant: "acme", Audience: "recon.v3", Actor: "finance-agent",
			PriorAct: map[string]any{"sub": "orchestrator", "act": map[string]any{"sub": "planner"}}},
			wantActor: []string{"finance-agent", "orchestrator", "planner"}, wantTTL: MaxMintTTL},
		{name: "TTL capped", claims: MintClaims{Subject: "alice", Audience: "recon.v3", TTL: time.Hour}, wantTTL: MaxMintTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.claims
			c.Capability, c.DecisionID = "reconcile-invoice", "dec-123"
			tok, err := m.Mint(c)
			require.NoError(t, err)
			p, err := v.Verify(t.Context(), "Bearer "+tok)
			require.NoError(t, err)
			require.True(t, p.Authenticated)
			require.Equal(t, c.Subject, p.Subject)
			require.Equal(t, c.Tenant, p.Tenant)
			require.Equal(t, mintIssuer, p.Issuer)
			require.Equal(t, normaliseScopesSlice(c.Scopes), p.Scopes)
			require.Equal(t, tt.wantActor, p.Actor)
			require.Equal(t, clock.Now().Add(tt.wantTTL), p.ExpiresAt)
			claims := tokenClaims(t, tok)
			require.Equal(t, "reconcile-invoice", claims[ClaimCapability])
			require.Equal(t, "dec-123", claims[ClaimDecisionID])
			require.Equal(t, "recon.v3", claims["aud"])
			require.NotEmpty(t, claims["jti"])
			require.Equal(t, float64(clock.Now().Unix()), claims["nbf"])
		})
	}
}

func normaliseScopesSlice(in []string) []string {
	s := normaliseScopes(in)
	if s == "" {
		return nil
	}
	p := PrincipalFromClaims(config.Auth{}, map[string]any{"scope": s})
	return p.Scopes
}

func TestMintRefused(t *testing.T) {
	clock := newFakeClock()
	m, err := GenerateMinter(mintIssuer, WithMintClock(clock.Now))
	require.NoError(t, err)
	other, err := GenerateMinter(mintIssuer, WithMintClock(clock.Now))
	require.NoError(t, err)
	v := minterVerifier(t, m, "recon.v3", clock)

	mint := func(m *Minter, aud string) string {
		tok, err := m.Mint(MintClaims{Subject: "alice", Audience: aud})
		require.NoError(t, err)
		return tok
	}
	forOther := mint(m, "lookup.v1")
	otherKey := mint(other, "recon.v3")
	expiring := mint(m, "recon.v3")

	_, err = v.Verify(t.Context(), "Bearer "+forOther)
	requireKind(t, err, ErrInvalidToken, "audience not accepted")
	_, err = v.Verify(t.Context(), "Bearer "+otherKey)
	requireKind(t, err, ErrUnknownKey, "unknown key id")

	clock.Advance(MaxMintTTL + config.DefaultClockSkew)
	_, err = v.Verify(t.Context(), "Bearer "+expiring)
	requireKind(t, err, ErrExpired, "token expired")
}

func TestMintClaimsErrors(t *testing.T) {
	m, err := GenerateMinter(mintIssuer)
	require.NoError(t, err)
	tests := []struct {
		name    string
		claims  MintClaims
		wantErr string
	}{
		{name: "no subject", claims: MintClaims{Audience: "a"}, wantErr: "subject is required"},
		{name: "no audience", claims: MintClaims{Subject: "s"}, wantErr: "audience is required"},
		{name: "negative TTL", claims: MintClaims{Subject: "s", Audience: "a", TTL: -time.Second}, wantErr: "negative TTL"},
		{name: "prior act without actor", claims: MintClaims{Subject: "s", Audience: "a", PriorAct: map[string]any{"sub": "x"}}, wantErr: "needs an actor"},
		{name: "extra overrides exp", claims: MintClaims{Subject: "s", Audience: "a", Extra: map[string]any{"exp": 1}}, wantErr: `claim "exp" set twice`},
		{name: "extra overrides tenant", claims: MintClaims{Subject: "s", Audience: "a", Tenant: "t", Extra: map[string]any{"tenant": "u"}}, wantErr: `claim "tenant" set twice`},
		{name: "tenant claim named sub", claims: MintClaims{Subject: "s", Audience: "a", Tenant: "t", TenantClaim: "sub"}, wantErr: `claim "sub" set twice`},
		{name: "extra accepted", claims: MintClaims{Subject: "s", Audience: "a", Extra: map[string]any{"purpose": "demo"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := m.Mint(tt.claims)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Empty(t, tok)
				return
			}
			require.NoError(t, err)
			require.NotEmpty(t, tok)
		})
	}
}

func TestMinterJWKS(t *testing.T) {
	m, err := GenerateMinter(mintIssuer)
	require.NoError(t, err)
	var doc struct {
		Keys []map[string]string `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(m.JWKS(), &doc))
	require.Len(t, doc.Keys, 1)
	k := doc.Keys[0]
	require.Equal(t, "EC", k["kty"])
	require.Equal(t, "P-256", k["crv"])
	require.Equal(t, "sig", k["use"])
	require.Equal(t, "ES256", k["alg"])
	require.Equal(t, m.KeyID(), k["kid"])
	require.Len(t, k["x"], 43)
	require.Len(t, k["y"], 43)
	require.NotContains(t, k, "d")
	require.Equal(t, mintIssuer, m.Issuer())

	// kid is the RFC 7638 thumbprint, stable for the key.
	set, _, err := parseJWKS(m.JWKS())
	require.NoError(t, err)
	tp, err := Thumbprint(set[m.KeyID()].PublicKey())
	require.NoError(t, err)
	require.Equal(t, m.KeyID(), tp)

	// The returned slice is a copy.
	b := m.JWKS()
	b[0] = 'X'
	require.NotEqual(t, b, m.JWKS())
}

func TestNewMinterErrors(t *testing.T) {
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)

	tests := []struct {
		name    string
		issuer  string
		key     crypto.Signer
		wantErr string
	}{
		{name: "P-256", issuer: mintIssuer, key: p256},
		{name: "empty issuer", issuer: "", key: p256, wantErr: "issuer is empty"},
		{name: "P-384", issuer: mintIssuer, key: p384, wantErr: "P-256"},
		{name: "RSA", issuer: mintIssuer, key: rsaKey, wantErr: "P-256"},
		{name: "Ed25519", issuer: mintIssuer, key: edKey, wantErr: "P-256"},
		{name: "nil", issuer: mintIssuer, key: nil, wantErr: "P-256"},
		{name: "typed nil", issuer: mintIssuer, key: (*ecdsa.PrivateKey)(nil), wantErr: "P-256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMinter(tt.issuer, tt.key)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, m)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, m)
		})
	}
}

func pemOf(t *testing.T, typ string, der []byte) []byte {
	t.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestLoadSigningKey(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)

	pkcs8 := func(k any) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		require.NoError(t, err)
		return pemOf(t, "PRIVATE KEY", der)
	}
	sec1 := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalECPrivateKey(k)
		require.NoError(t, err)
		return pemOf(t, "EC PRIVATE KEY", der)
	}
	pub, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	require.NoError(t, err)

	tests := []struct {
		name    string
		pem     []byte
		wantAlg string
		wantErr string
	}{
		{name: "PKCS#8 RSA", pem: pkcs8(rsaKey), wantAlg: "RS256"},
		{name: "PKCS#1 RSA", pem: pemOf(t, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), wantAlg: "RS256"},
		{name: "PKCS#8 P-256", pem: pkcs8(ecKey), wantAlg: "ES256"},
		{name: "SEC 1 P-256", pem: sec1(ecKey), wantAlg: "ES256"},
		{name: "SEC 1 after EC PARAMETERS", pem: append(pemOf(t, "EC PARAMETERS", []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}), sec1(ecKey)...), wantAlg: "ES256"},
		{name: "RSA 1024", pem: pkcs8(small), wantErr: "1024 bits"},
		{name: "P-384", pem: sec1(p384), wantErr: "P-384 not supported"},
		{name: "Ed25519", pem: pkcs8(edKey), wantErr: "unsupported key type"},
		{name: "public key", pem: pemOf(t, "PUBLIC KEY", pub), wantErr: `unsupported PEM block "PUBLIC KEY"`},
		{name: "encrypted", pem: pemOf(t, "ENCRYPTED PRIVATE KEY", []byte{1}), wantErr: "encrypted"},
		{name: "garbage DER", pem: pemOf(t, "PRIVATE KEY", []byte("nope")), wantErr: "parse PRIVATE KEY"},
		{name: "not PEM", pem: []byte("hello"), wantErr: "no PEM private key"},
		{name: "empty", pem: nil, wantErr: "no PEM private key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, alg, err := LoadSigningKey(tt.pem)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, key)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantAlg, alg)
			require.NotNil(t, key)
		})
	}
}

func TestSignDemoToken(t *testing.T) {
	keys := newTestKeys(t)
	clock := newFakeClock()
	v := newFileVerifier(t, testAuth(), keys.jwks(t), WithClock(clock.Now))
	claims := validClaims(clock.Now())

	tests := []struct {
		name      string
		key       crypto.Signer
		alg       string
		kid       string
		nilClaims bool
		wantErr   string
	}{
		{name: "RS256", key: keys.rsa, alg: "RS256", kid: rsaKid},
		{name: "ES256", key: keys.ec, alg: "ES256", kid: ecKid},
		{name: "RSA key as ES256", key: keys.rsa, alg: "ES256", kid: rsaKid, wantErr: "does not fit"},
		{name: "EC key as HS256", key: keys.ec, alg: "HS256", kid: ecKid, wantErr: "does not fit"},
		{name: "nil key", key: nil, alg: "ES256", wantErr: "unsupported key type"},
		{name: "typed nil key", key: (*ecdsa.PrivateKey)(nil), alg: "ES256", wantErr: "nil ECDSA key"},
		{name: "nil claims", key: keys.ec, alg: "ES256", kid: ecKid, nilClaims: true, wantErr: "no claims"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := map[string]any(claims)
			if tt.nilClaims {
				c = nil
			}
			tok, err := SignDemoToken(tt.key, tt.alg, tt.kid, c)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Empty(t, tok)
				return
			}
			require.NoError(t, err)
			p, err := v.Verify(t.Context(), "Bearer "+tok)
			require.NoError(t, err)
			require.Equal(t, "alice", p.Subject)
		})
	}
}
