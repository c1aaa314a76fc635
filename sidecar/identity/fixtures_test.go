package identity

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
)

const (
	testIssuer   = "https://idp.example.test"
	testAudience = "capgate"
	rsaKid       = "rsa-1"
	ecKid        = "ec-1"
)

var t0 = time.Unix(1_800_000_000, 0)

// fakeClock is an adjustable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testKeys are one issuer's signing keys.
type testKeys struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
}

func newTestKeys(t testing.TB) testKeys {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return testKeys{rsa: r, ec: e}
}

func (k testKeys) jwks(t testing.TB) []byte {
	t.Helper()
	b, err := MarshalJWKS(
		PublicJWK{Key: &k.rsa.PublicKey, Alg: "RS256", Kid: rsaKid},
		PublicJWK{Key: &k.ec.PublicKey, Alg: "ES256", Kid: ecKid},
	)
	require.NoError(t, err)
	return b
}

func validClaims(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss":    testIssuer,
		"sub":    "alice",
		"aud":    testAudience,
		"iat":    now.Unix(),
		"exp":    now.Add(10 * time.Minute).Unix(),
		"scope":  "recon.run invoices.read",
		"tenant": "acme",
	}
}

func signToken(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

func testAuth(iss ...config.Issuer) config.Auth {
	if len(iss) == 0 {
		iss = []config.Issuer{{Issuer: testIssuer, Audiences: []string{testAudience}, JWKSFile: "jwks.json"}}
	}
	return config.Auth{Issuers: iss, ClockSkew: 30 * time.Second}
}

// fileReader serves files from a map.
func fileReader(files map[string][]byte) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		b, ok := files[name]
		if !ok {
			return nil, errors.New("no such file")
		}
		return b, nil
	}
}

func newFileVerifier(t testing.TB, auth config.Auth, jwks []byte, opts ...Option) *Verifier {
	t.Helper()
	v, err := NewVerifier(t.Context(), auth, fileReader(map[string][]byte{"jwks.json": jwks}), opts...)
	require.NoError(t, err)
	return v
}

func requireKind(t testing.TB, err error, kind Kind, description string) {
	t.Helper()
	require.Error(t, err)
	var ie *Error
	require.ErrorAs(t, err, &ie)
	require.Equal(t, kind, ie.Kind, "error: %v", err)
	require.ErrorIs(t, err, kind)
	if description != "" {
		require.Equal(t, description, ie.Description)
	}
}

// tokenClaims decodes a token's payload without checking it: for asserting
// what a token carries after Verify accepted it.
func tokenClaims(t testing.TB, tok string) jwt.MapClaims {
	t.Helper()
	claims := jwt.MapClaims{}
	_, _, err := jwt.NewParser().ParseUnverified(tok, claims)
	require.NoError(t, err)
	return claims
}
