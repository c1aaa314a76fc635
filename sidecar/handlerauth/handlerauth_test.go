package handlerauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/capgate/capgate/sidecar/handlerauth"
	"github.com/capgate/capgate/sidecar/identity"
)

const (
	issuer   = "https://capgate.test"
	audience = "recon.v3.reconcile"
)

func mint(t *testing.T, m *identity.Minter, mutate func(*identity.MintClaims)) string {
	t.Helper()
	c := identity.MintClaims{
		Subject: "partner-1", Tenant: "acme", Audience: audience, Scopes: []string{"recon.run", "recon.read"},
		Capability: "reconcile-invoice", DecisionID: "dec-1", Actor: "finance-agent",
	}
	if mutate != nil {
		mutate(&c)
	}
	tok, err := m.Mint(c)
	require.NoError(t, err)
	return tok
}

func newVerifier(t *testing.T, m *identity.Minter) *handlerauth.Verifier {
	t.Helper()
	v, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{Issuer: issuer, Audience: audience, JWKS: m.JWKS()})
	require.NoError(t, err)
	return v
}

// sign signs claims with key under kid, bypassing the Minter.
func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

func TestVerify(t *testing.T) {
	m, err := identity.GenerateMinter(issuer)
	require.NoError(t, err)
	v := newVerifier(t, m)
	otherIssuer, err := identity.GenerateMinter("https://elsewhere.test")
	require.NoError(t, err)

	// raw tokens are signed with own, trusted by rawV under kid "own".
	own, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ownJWKS, err := identity.MarshalJWKS(identity.PublicJWK{Key: &own.PublicKey, Alg: "ES256", Kid: "own"})
	require.NoError(t, err)
	rawV, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{Issuer: issuer, Audience: audience, JWKS: ownJWKS})
	require.NoError(t, err)
	now := time.Now()
	base := func(mutate func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": issuer, "sub": "partner-1", "aud": []string{"other", audience}, "capability": "reconcile-invoice",
			"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
		if mutate != nil {
			mutate(c)
		}
		return c
	}

	t.Run("valid token, two-hop actor chain", func(t *testing.T) {
		tok := mint(t, m, func(c *identity.MintClaims) { c.PriorAct = map[string]any{"sub": "orchestrator"} })
		c, err := v.Verify(t.Context(), "Bearer "+tok)
		require.NoError(t, err)
		require.Equal(t, "partner-1", c.Subject)
		require.Equal(t, "acme", c.Tenant)
		require.Equal(t, audience, c.Audience)
		require.Equal(t, "reconcile-invoice", c.Capability)
		require.Equal(t, "dec-1", c.DecisionID)
		require.Equal(t, issuer, c.Issuer)
		require.Equal(t, []string{"recon.read", "recon.run"}, c.Scopes)
		require.Equal(t, []string{"finance-agent", "orchestrator"}, c.Actor)
		require.WithinDuration(t, time.Now().Add(identity.MaxMintTTL), c.ExpiresAt, 2*time.Second)

		bare, err := v.Verify(t.Context(), tok)
		require.NoError(t, err)
		require.Equal(t, c, bare)
	})

	t.Run("limits, typed", func(t *testing.T) {
		tok := mint(t, m, func(c *identity.MintClaims) {
			c.Extra = map[string]any{identity.ClaimLimits: map[string]any{
				"max_parts": int64(4), "max_pdf_pages": 200, "cost_class": "medium", "ratio": 0.5, "strict": true,
			}}
		})
		c, err := v.Verify(t.Context(), tok)
		require.NoError(t, err)
		n, ok := c.Limits.Int(handlerauth.LimitMaxParts)
		require.True(t, ok)
		require.Equal(t, int64(4), n)
		n, ok = c.Limits.Int("max_pdf_pages")
		require.True(t, ok)
		require.Equal(t, int64(200), n)
		s, ok := c.Limits.String("cost_class")
		require.True(t, ok)
		require.Equal(t, "medium", s)
		f, ok := c.Limits.Float("ratio")
		require.True(t, ok)
		require.Equal(t, 0.5, f)
		b, ok := c.Limits.Bool("strict")
		require.True(t, ok)
		require.True(t, b)
		_, ok = c.Limits.Int("ratio")
		require.False(t, ok, "0.5 is not a whole number")
		_, ok = c.Limits.Int("cost_class")
		require.False(t, ok, "a string is not a number")
		_, ok = c.Limits.Int(handlerauth.LimitMaxBodyBytes)
		require.False(t, ok, "absent")

		without, err := v.Verify(t.Context(), mint(t, m, nil))
		require.NoError(t, err)
		require.Nil(t, without.Limits)
		_, ok = without.Limits.String("cost_class")
		require.False(t, ok, "a nil Limits reads as empty")
	})

	t.Run("valid raw token: aud list, scopes as a list, no act", func(t *testing.T) {
		c, err := rawV.Verify(t.Context(), "bearer "+sign(t, jwt.SigningMethodES256, own, "own", base(func(c jwt.MapClaims) {
			c["scope"] = []string{"b", "a b"}
		})))
		require.NoError(t, err)
		require.Equal(t, audience, c.Audience)
		require.Equal(t, []string{"a", "b"}, c.Scopes)
		require.Empty(t, c.Actor)
	})

	for _, tc := range []struct {
		name    string
		v       *handlerauth.Verifier
		bearer  func(t *testing.T) string
		missing bool
	}{
		{name: "no token", v: v, bearer: func(*testing.T) string { return "" }, missing: true},
		{name: "Bearer without token", v: v, bearer: func(*testing.T) string { return "Bearer " }, missing: true},
		{name: "Basic credentials", v: v, bearer: func(*testing.T) string { return "Basic dXNlcjpwdw==" }},
		{name: "not a JWT", v: v, bearer: func(*testing.T) string { return "opaque" }},
		{name: "another handler's audience", v: v, bearer: func(t *testing.T) string {
			return mint(t, m, func(c *identity.MintClaims) { c.Audience = "payments.v1.pay" })
		}},
		{name: "wrong issuer", v: v, bearer: func(t *testing.T) string { return mint(t, otherIssuer, nil) }},
		{name: "no capability", v: v, bearer: func(t *testing.T) string {
			return mint(t, m, func(c *identity.MintClaims) { c.Capability = "" })
		}},
		{name: "malformed act", v: v, bearer: func(t *testing.T) string {
			return mint(t, m, func(c *identity.MintClaims) { c.PriorAct = map[string]any{"client": "x"} })
		}},
		{name: "expired", v: rawV, bearer: func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, own, "own", base(func(c jwt.MapClaims) {
				c["iat"], c["exp"] = now.Add(-2*time.Minute).Unix(), now.Add(-time.Minute).Unix()
			}))
		}},
		{name: "no expiry", v: rawV, bearer: func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, own, "own", base(func(c jwt.MapClaims) { delete(c, "exp") }))
		}},
		{name: "not yet valid", v: rawV, bearer: func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, own, "own", base(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() }))
		}},
		{name: "issued in the future", v: rawV, bearer: func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, own, "own", base(func(c jwt.MapClaims) { c["iat"] = now.Add(time.Minute).Unix() }))
		}},
		{name: "no subject", v: rawV, bearer: func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, own, "own", base(func(c jwt.MapClaims) { delete(c, "sub") }))
		}},
		{name: "limits not an object", v: rawV, bearer: func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, own, "own", base(func(c jwt.MapClaims) { c["limits"] = []any{"max_parts", 4} }))
		}},
		{name: "tenant not a string", v: rawV, bearer: func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, own, "own", base(func(c jwt.MapClaims) { c["tenant"] = 7 }))
		}},
		{name: "alg none", v: rawV, bearer: func(t *testing.T) string {
			return sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "own", base(nil))
		}},
		{name: "HS256 under the public key's id", v: rawV, bearer: func(t *testing.T) string {
			return sign(t, jwt.SigningMethodHS256, []byte("secret"), "own", base(nil))
		}},
		{name: "no key id", v: rawV, bearer: func(t *testing.T) string { return sign(t, jwt.SigningMethodES256, own, "", base(nil)) }},
		{name: "unknown key id", v: rawV, bearer: func(t *testing.T) string { return sign(t, jwt.SigningMethodES256, own, "k2", base(nil)) }},
		{name: "another key under a known kid", v: v, bearer: func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, own, m.KeyID(), base(nil))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.v.Verify(t.Context(), tc.bearer(t))
			require.Error(t, err)
			if tc.missing {
				require.ErrorIs(t, err, handlerauth.ErrMissingToken)
			} else {
				require.ErrorIs(t, err, handlerauth.ErrInvalidToken)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	err := handlerauth.Config{JWKSURL: "ftp://x", JWKS: []byte("{}"), Leeway: -1}.Validate()
	require.ErrorContains(t, err, "issuer is required")
	require.ErrorContains(t, err, "audience is required")
	require.ErrorContains(t, err, "not both")
	require.ErrorContains(t, err, "leeway is negative")
	_, err = handlerauth.NewVerifier(t.Context(), handlerauth.Config{Issuer: issuer, Audience: audience, JWKS: []byte(`{"keys":[]}`)})
	require.ErrorContains(t, err, "no usable")
}

func TestJWKSURLRefresh(t *testing.T) {
	defer goleak.VerifyNone(t)
	clock := time.Now()
	var clockMu sync.Mutex
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	a, err := identity.GenerateMinter(issuer, identity.WithMintClock(now))
	require.NoError(t, err)
	b, err := identity.GenerateMinter(issuer, identity.WithMintClock(now))
	require.NoError(t, err)

	var mu sync.Mutex
	current := a.JWKS()
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(current)
	}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	v, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{
		Issuer: issuer, Audience: audience, JWKSURL: srv.URL, HTTPClient: client, RefreshInterval: time.Minute, Clock: now,
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, fetches.Load())

	_, err = v.Verify(t.Context(), mint(t, a, nil))
	require.NoError(t, err)

	// Rotation: b's kid is unknown, but the last fetch was too recent.
	mu.Lock()
	current = b.JWKS()
	mu.Unlock()
	_, err = v.Verify(t.Context(), mint(t, b, nil))
	require.ErrorIs(t, err, handlerauth.ErrInvalidToken)
	require.EqualValues(t, 1, fetches.Load(), "refresh is rate-limited")

	clockMu.Lock()
	clock = clock.Add(2 * time.Minute)
	clockMu.Unlock()
	c, err := v.Verify(t.Context(), mint(t, b, nil))
	require.NoError(t, err)
	require.Equal(t, "partner-1", c.Subject)
	require.EqualValues(t, 2, fetches.Load(), "an unknown kid refetches once the interval passed")
}

func TestNewVerifierFetchFails(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	_, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{Issuer: issuer, Audience: audience, JWKSURL: srv.URL, HTTPClient: client})
	require.ErrorContains(t, err, "status 404")
}

func TestMiddleware(t *testing.T) {
	m, err := identity.GenerateMinter(issuer)
	require.NoError(t, err)
	v := newVerifier(t, m)
	h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := handlerauth.FromContext(r.Context())
		require.True(t, ok)
		_, _ = io.WriteString(w, c.Subject+" "+c.Tenant+" "+c.Capability)
	}))

	for _, tc := range []struct {
		name, authorization string
		status              int
		challenge, body     string
	}{
		{"valid", "Bearer " + mint(t, m, nil), http.StatusOK, "", "partner-1 acme reconcile-invoice"},
		{"missing", "", http.StatusUnauthorized, "Bearer", `"error":"unauthenticated"`},
		{"invalid", "Bearer " + mint(t, m, func(c *identity.MintClaims) { c.Audience = "x" }), http.StatusUnauthorized,
			`Bearer error="invalid_token"`, `"error":"invalid_token"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			if tc.authorization != "" {
				r.Header.Set("Authorization", tc.authorization)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, tc.status, w.Code)
			require.Equal(t, tc.challenge, w.Header().Get("WWW-Authenticate"))
			require.Contains(t, w.Body.String(), tc.body)
			if tc.status != http.StatusOK {
				require.Equal(t, "application/json", w.Header().Get("Content-Type"))
			}
		})
	}
}

func TestServerInterceptor(t *testing.T) {
	m, err := identity.GenerateMinter(issuer)
	require.NoError(t, err)
	ic := handlerauth.NewServerInterceptor(newVerifier(t, m))

	before := func(headers map[string][]string) (context.Context, *a2asrv.CallContext, error) {
		ctx, callCtx := a2asrv.NewCallContext(t.Context(), a2asrv.NewServiceParams(headers))
		ctx, res, err := ic.Before(ctx, callCtx, &a2asrv.Request{})
		require.Nil(t, res)
		return ctx, callCtx, err
	}

	ctx, callCtx, err := before(map[string][]string{"Authorization": {"Bearer " + mint(t, m, nil)}})
	require.NoError(t, err)
	c, ok := handlerauth.FromContext(ctx)
	require.True(t, ok)
	require.Equal(t, "partner-1", c.Subject)
	require.True(t, callCtx.User.Authenticated)
	require.Equal(t, "partner-1", callCtx.User.Name)
	require.Equal(t, "acme", callCtx.User.Attributes["tenant"])

	for name, headers := range map[string]map[string][]string{
		"missing": {},
		"invalid": {"Authorization": {"Bearer nope.nope.nope"}},
		"twice":   {"Authorization": {"Bearer " + mint(t, m, nil), "Bearer " + mint(t, m, nil)}},
	} {
		_, _, err := before(headers)
		require.ErrorIs(t, err, a2a.ErrUnauthenticated, name)
	}
}
