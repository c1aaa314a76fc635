package identity

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/capgate/capgate/policy/config"
)

func TestVerifyHeader(t *testing.T) {
	keys := newTestKeys(t)
	clock := newFakeClock()
	v := newFileVerifier(t, testAuth(), keys.jwks(t), WithClock(clock.Now), WithLogger(zaptest.NewLogger(t)))
	tok := signToken(t, jwt.SigningMethodRS256, keys.rsa, rsaKid, validClaims(clock.Now()))

	tests := []struct {
		name   string
		header string
		anon   bool
		kind   Kind
		desc   string
	}{
		{name: "empty is anonymous", header: "", anon: true},
		{name: "Bearer", header: "Bearer " + tok},
		{name: "lower case scheme", header: "bearer " + tok},
		{name: "upper case scheme", header: "BEARER " + tok},
		{name: "basic scheme", header: "Basic dXNlcjpwYXNz", kind: ErrMalformed, desc: "authorization scheme must be Bearer"},
		{name: "scheme only", header: "Bearer", kind: ErrMalformed},
		{name: "scheme and space", header: "Bearer ", kind: ErrMalformed},
		{name: "two spaces (1*SP)", header: "Bearer  " + tok},
		{name: "tab between scheme and token", header: "Bearer\t" + tok, kind: ErrMalformed},
		{name: "leading and trailing OWS", header: " \tBearer " + tok + " \t"},
		{name: "two tokens", header: "Bearer " + tok + " " + tok, kind: ErrMalformed},
		{name: "trailing tab (OWS)", header: "Bearer " + tok + "\t"},
		{name: "trailing NBSP", header: "Bearer " + tok + "\u00a0", kind: ErrMalformed},
		{name: "padding", header: "Bearer abc.def.ghi==", kind: ErrMalformed, desc: "malformed token"},
		{name: "padding inside", header: "Bearer abc=.def", kind: ErrMalformed, desc: "expected exactly one bearer token"},
		{name: "token without scheme", header: tok, kind: ErrMalformed},
		{name: "not a JWS", header: "Bearer abc.def", kind: ErrMalformed, desc: "malformed token"},
		{name: "bad characters", header: "Bearer a!b.c.d", kind: ErrMalformed, desc: "expected exactly one bearer token"},
		{name: "bad base64", header: "Bearer a.b.c", kind: ErrMalformed},
		{name: "just over the limit", header: "Bearer " + strings.Repeat("a", MaxTokenBytes+1), kind: ErrMalformed, desc: "token too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := v.Verify(t.Context(), tt.header)
			switch {
			case tt.anon:
				require.NoError(t, err)
				require.Equal(t, Principal{}, p)
			case tt.kind != "":
				requireKind(t, err, tt.kind, tt.desc)
				require.Equal(t, Principal{}, p)
			default:
				require.NoError(t, err)
				require.True(t, p.Authenticated)
				require.Equal(t, "alice", p.Subject)
			}
		})
	}
}

func TestVerifyHugeTokenRefusedQuickly(t *testing.T) {
	keys := newTestKeys(t)
	v := newFileVerifier(t, testAuth(), keys.jwks(t))
	huge := "Bearer " + strings.Repeat("A", 1<<20) + "." + strings.Repeat("B", 1<<20) + ".C"
	_, err := v.Verify(t.Context(), huge)
	requireKind(t, err, ErrMalformed, "token too large")
	hits, misses := v.CacheStats()
	require.Zero(t, hits+misses, "refused before the cache")
}

func TestVerifyToken(t *testing.T) {
	keys := newTestKeys(t)
	other := newTestKeys(t)
	clock := newFakeClock()
	now := clock.Now()
	v := newFileVerifier(t, testAuth(), keys.jwks(t), WithClock(clock.Now), WithLogger(zaptest.NewLogger(t)))

	with := func(mut func(jwt.MapClaims)) jwt.MapClaims {
		c := validClaims(now)
		mut(c)
		return c
	}
	rs := func(c jwt.MapClaims) string { return signToken(t, jwt.SigningMethodRS256, keys.rsa, rsaKid, c) }
	pubDER, err := x509.MarshalPKIXPublicKey(&keys.rsa.PublicKey)
	require.NoError(t, err)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	noneTok, err := jwt.NewWithClaims(jwt.SigningMethodNone, validClaims(now)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	good := rs(validClaims(now))
	parts := strings.Split(good, ".")
	tamperedPayload := parts[0] + "." + strings.TrimRight(jwtSegment(t, with(func(c jwt.MapClaims) { c["sub"] = "mallory" })), "=") + "." + parts[2]
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	sig[10] ^= 1
	tamperedSig := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)

	// ES256 signatures are 64 bytes: the last base64url character carries 4
	// unused bits, which must be zero (strict decoding).
	esTok := signToken(t, jwt.SigningMethodES256, keys.ec, ecKid, validClaims(now))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	nonCanonical := esTok[:len(esTok)-1] + string(alphabet[strings.IndexByte(alphabet, esTok[len(esTok)-1])|1])

	tests := []struct {
		name  string
		token string
		kind  Kind // empty: accepted
		desc  string
	}{
		{name: "RS256 valid", token: good},
		{name: "ES256 valid", token: signToken(t, jwt.SigningMethodES256, keys.ec, ecKid, validClaims(now))},
		{name: "aud array with accepted audience", token: rs(with(func(c jwt.MapClaims) { c["aud"] = []string{"other", testAudience} }))},
		{name: "expired", token: rs(with(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() })), kind: ErrExpired, desc: "token expired"},
		{name: "expired within skew", token: rs(with(func(c jwt.MapClaims) { c["exp"] = now.Add(-10 * time.Second).Unix() }))},
		{name: "missing exp", token: rs(with(func(c jwt.MapClaims) { delete(c, "exp") })), kind: ErrInvalidToken, desc: "missing exp"},
		{name: "nbf in the future", token: rs(with(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() })), kind: ErrInvalidToken, desc: "token not yet valid"},
		{name: "nbf within skew", token: rs(with(func(c jwt.MapClaims) { c["nbf"] = now.Add(10 * time.Second).Unix() }))},
		{name: "iat in the future beyond skew", token: rs(with(func(c jwt.MapClaims) { c["iat"] = now.Add(time.Minute).Unix() })), kind: ErrInvalidToken, desc: "token issued in the future"},
		{name: "iat within skew", token: rs(with(func(c jwt.MapClaims) { c["iat"] = now.Add(10 * time.Second).Unix() }))},
		{name: "wrong audience", token: rs(with(func(c jwt.MapClaims) { c["aud"] = "someone-else" })), kind: ErrInvalidToken, desc: "audience not accepted"},
		{name: "missing audience", token: rs(with(func(c jwt.MapClaims) { delete(c, "aud") })), kind: ErrInvalidToken, desc: "audience not accepted"},
		{name: "unknown issuer", token: rs(with(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.test" })), kind: ErrUnknownIssuer, desc: "unknown issuer"},
		{name: "missing issuer", token: rs(with(func(c jwt.MapClaims) { delete(c, "iss") })), kind: ErrInvalidToken, desc: "missing issuer"},
		{name: "missing subject", token: rs(with(func(c jwt.MapClaims) { delete(c, "sub") })), kind: ErrInvalidToken, desc: "missing subject"},
		{name: "unknown kid", token: signToken(t, jwt.SigningMethodRS256, keys.rsa, "rsa-2", validClaims(now)), kind: ErrUnknownKey, desc: "unknown key id"},
		{name: "path traversal kid", token: signToken(t, jwt.SigningMethodRS256, keys.rsa, "../../etc/passwd", validClaims(now)), kind: ErrUnknownKey, desc: "unknown key id"},
		{name: "kid with quotes", token: signToken(t, jwt.SigningMethodRS256, keys.rsa, `rsa-1" or "1"="1`, validClaims(now)), kind: ErrUnknownKey, desc: "unknown key id"},
		{name: "missing kid", token: signToken(t, jwt.SigningMethodRS256, keys.rsa, "", validClaims(now)), kind: ErrUnknownKey, desc: "missing key id"},
		{name: "signed by another key under our kid", token: signToken(t, jwt.SigningMethodRS256, other.rsa, rsaKid, validClaims(now)), kind: ErrInvalidToken, desc: "invalid signature"},
		{name: "tampered signature", token: tamperedSig, kind: ErrInvalidToken, desc: "invalid signature"},
		{name: "tampered payload", token: tamperedPayload, kind: ErrInvalidToken, desc: "invalid signature"},
		{name: "non-canonical base64 signature", token: nonCanonical, kind: ErrMalformed, desc: "malformed token"},
		{name: "alg none", token: noneTok, kind: ErrInvalidToken, desc: "algorithm not allowed"},
		{name: "HS256 signed with the RSA public key PEM", token: signToken(t, jwt.SigningMethodHS256, pubPEM, rsaKid, validClaims(now)), kind: ErrInvalidToken, desc: "algorithm not allowed"},
		{name: "HS256 signed with the RSA public key DER", token: signToken(t, jwt.SigningMethodHS256, pubDER, rsaKid, validClaims(now)), kind: ErrInvalidToken, desc: "algorithm not allowed"},
		{name: "alg outside the issuer allow-list", token: signToken(t, jwt.SigningMethodPS256, keys.rsa, rsaKid, validClaims(now)), kind: ErrInvalidToken, desc: "algorithm not allowed"},
		{name: "ES256 with an RSA kid", token: signToken(t, jwt.SigningMethodES256, keys.ec, rsaKid, validClaims(now)), kind: ErrInvalidToken, desc: "key does not match algorithm"},
		{name: "RS256 with an EC kid", token: signToken(t, jwt.SigningMethodRS256, keys.rsa, ecKid, validClaims(now)), kind: ErrInvalidToken, desc: "key does not match algorithm"},
		{name: "crit header", token: func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodRS256, validClaims(now))
			tok.Header["kid"] = rsaKid
			tok.Header["crit"] = []string{"exp"}
			s, err := tok.SignedString(keys.rsa)
			require.NoError(t, err)
			return s
		}(), kind: ErrInvalidToken, desc: "unsupported critical header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := v.Verify(t.Context(), "Bearer "+tt.token)
			if tt.kind != "" {
				requireKind(t, err, tt.kind, tt.desc)
				require.Equal(t, Principal{}, p)
				require.NotContains(t, err.Error(), tt.token, "a token never appears in an error")
				return
			}
			require.NoError(t, err)
			require.True(t, p.Authenticated)
			require.Equal(t, "alice", p.Subject)
			require.Equal(t, "acme", p.Tenant)
			require.Equal(t, testIssuer, p.Issuer)
			require.Equal(t, []string{"invoices.read", "recon.run"}, p.Scopes)
		})
	}
}

// jwtSegment encodes claims as a JWS payload segment.
func jwtSegment(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, c).SigningString()
	require.NoError(t, err)
	return strings.SplitN(s, ".", 2)[1]
}

func TestVerifyClaimsMapping(t *testing.T) {
	keys := newTestKeys(t)
	clock := newFakeClock()
	now := clock.Now()

	tests := []struct {
		name         string
		auth         func(*config.Auth)
		claims       map[string]any
		wantScopes   []string
		wantTenant   string
		wantActor    []string
		wantActorIss []string
	}{
		{name: "scope string", claims: map[string]any{"scope": "b a  b"}, wantScopes: []string{"a", "b"}, wantTenant: "acme"},
		{name: "scope array", claims: map[string]any{"scope": []string{"b", "a", "a"}}, wantScopes: []string{"a", "b"}, wantTenant: "acme"},
		{name: "scope array with non-strings", claims: map[string]any{"scope": []any{"a", 1, true}}, wantScopes: []string{"a"}, wantTenant: "acme"},
		{name: "scope of the wrong type", claims: map[string]any{"scope": 42}, wantTenant: "acme"},
		{name: "scp used when scope absent", claims: map[string]any{"scope": nil, "scp": []string{"x", "y"}}, wantScopes: []string{"x", "y"}, wantTenant: "acme"},
		{name: "scope wins over scp", claims: map[string]any{"scope": "a", "scp": []string{"x"}}, wantScopes: []string{"a"}, wantTenant: "acme"},
		{name: "custom claims", auth: func(a *config.Auth) { a.ScopesClaim, a.TenantClaim = "perms", "org" },
			claims: map[string]any{"perms": "p q", "org": "globex"}, wantScopes: []string{"p", "q"}, wantTenant: "globex"},
		{name: "tenant not a string", claims: map[string]any{"tenant": 7, "scope": "a"}, wantScopes: []string{"a"}},
		{name: "actor chain", claims: map[string]any{"scope": "a", "act": map[string]any{"sub": "agent-b", "iss": "https://b", "act": map[string]any{"sub": "agent-a"}}},
			wantScopes: []string{"a"}, wantTenant: "acme", wantActor: []string{"agent-b", "agent-a"}, wantActorIss: []string{"https://b", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			auth := testAuth()
			if tt.auth != nil {
				tt.auth(&auth)
			}
			v := newFileVerifier(t, auth, keys.jwks(t), WithClock(clock.Now))
			c := validClaims(now)
			for k, val := range tt.claims {
				if val == nil {
					delete(c, k)
					continue
				}
				c[k] = val
			}
			p, err := v.Verify(t.Context(), "Bearer "+signToken(t, jwt.SigningMethodES256, keys.ec, ecKid, c))
			require.NoError(t, err)
			require.Equal(t, tt.wantScopes, p.Scopes)
			require.Equal(t, tt.wantTenant, p.Tenant)
			require.Equal(t, tt.wantActor, p.Actor)
			require.Equal(t, tt.wantActorIss, p.ActorIssuers)
			require.Equal(t, time.Unix(now.Add(10*time.Minute).Unix(), 0), p.ExpiresAt)

			// The unsigned path yields the same principal from the same
			// claims, as they arrive (JSON-decoded).
			raw, err := json.Marshal(c)
			require.NoError(t, err)
			var decoded map[string]any
			require.NoError(t, json.Unmarshal(raw, &decoded))
			q := PrincipalFromClaims(auth, decoded)
			require.Equal(t, p, q)
		})
	}
}

func TestPrincipalFromClaims(t *testing.T) {
	tests := []struct {
		name   string
		claims map[string]any
		want   Principal
	}{
		{name: "empty", claims: map[string]any{}, want: Principal{Authenticated: true}},
		{name: "full", claims: map[string]any{"sub": "bob", "iss": "i", "tenant": "t", "scope": "s2 s1", "exp": float64(1_800_000_000)},
			want: Principal{Authenticated: true, Subject: "bob", Issuer: "i", Tenant: "t", Scopes: []string{"s1", "s2"}, ExpiresAt: time.Unix(1_800_000_000, 0)}},
		{name: "garbage types", claims: map[string]any{"sub": 1, "tenant": []any{"x"}, "scope": map[string]any{}, "exp": "soon", "act": "agent"},
			want: Principal{Authenticated: true}},
		{name: "act without sub stops the chain", claims: map[string]any{"act": map[string]any{"act": map[string]any{"sub": "x"}}},
			want: Principal{Authenticated: true}},
		{name: "huge exp ignored", claims: map[string]any{"exp": 1e300}, want: Principal{Authenticated: true}},
		{name: "act issuers kept per level", claims: map[string]any{"act": map[string]any{"sub": "b", "iss": "https://b", "act": map[string]any{"sub": "a", "iss": 7}}},
			want: Principal{Authenticated: true, Actor: []string{"b", "a"}, ActorIssuers: []string{"https://b", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PrincipalFromClaims(config.Auth{}, tt.claims)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestVerifyCache(t *testing.T) {
	keys := newTestKeys(t)
	clock := newFakeClock()
	v := newFileVerifier(t, testAuth(), keys.jwks(t), WithClock(clock.Now), WithCacheSize(3))

	c := validClaims(clock.Now())
	c["exp"] = clock.Now().Add(time.Minute).Unix()
	tok := signToken(t, jwt.SigningMethodES256, keys.ec, ecKid, c)

	p1, err := v.Verify(t.Context(), "Bearer "+tok)
	require.NoError(t, err)
	p2, err := v.Verify(t.Context(), "bearer "+tok)
	require.NoError(t, err)
	require.Equal(t, p1, p2)
	hits, misses := v.CacheStats()
	require.Equal(t, uint64(1), hits)
	require.Equal(t, uint64(1), misses)

	// Still valid within the skew after exp, refused after it, even from the cache.
	clock.Advance(time.Minute + 20*time.Second)
	_, err = v.Verify(t.Context(), "Bearer "+tok)
	require.NoError(t, err)
	clock.Advance(11 * time.Second)
	_, err = v.Verify(t.Context(), "Bearer "+tok)
	requireKind(t, err, ErrExpired, "token expired")
	hits, _ = v.CacheStats()
	require.Equal(t, uint64(3), hits)
	_, err = v.Verify(t.Context(), "Bearer "+tok)
	requireKind(t, err, ErrExpired, "token expired")
	_, misses = v.CacheStats()
	require.Equal(t, uint64(2), misses, "the expired entry was dropped")

	// Bounded: more distinct tokens than the size leave size entries.
	for i := range 10 {
		c := validClaims(clock.Now())
		c["jti"] = i
		_, err := v.Verify(t.Context(), "Bearer "+signToken(t, jwt.SigningMethodES256, keys.ec, ecKid, c))
		require.NoError(t, err)
	}
	require.Equal(t, 3, v.CacheLen())
}

func TestVerifyCancelledContext(t *testing.T) {
	keys := newTestKeys(t)
	v := newFileVerifier(t, testAuth(), keys.jwks(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := v.Verify(ctx, "Bearer "+signToken(t, jwt.SigningMethodES256, keys.ec, ecKid, validClaims(time.Now())))
	require.ErrorIs(t, err, context.Canceled)
}

func TestNewVerifierErrors(t *testing.T) {
	keys := newTestKeys(t)
	files := map[string][]byte{"jwks.json": keys.jwks(t), "bad.json": []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}`), "junk.json": []byte("not json")}
	good := config.Issuer{Issuer: testIssuer, Audiences: []string{testAudience}, JWKSFile: "jwks.json"}
	mod := func(f func(*config.Issuer)) config.Issuer { i := good; f(&i); return i }

	tests := []struct {
		name    string
		auth    config.Auth
		wantErr string // empty: accepted
	}{
		{name: "valid", auth: testAuth(good)},
		{name: "no issuers", auth: config.Auth{}},
		{name: "explicit algorithms", auth: testAuth(mod(func(i *config.Issuer) { i.Algorithms = []string{"ES256", "EdDSA", "PS512"} }))},
		{name: "empty issuer", auth: testAuth(mod(func(i *config.Issuer) { i.Issuer = "" })), wantErr: "issuer is empty"},
		{name: "no audiences", auth: testAuth(mod(func(i *config.Issuer) { i.Audiences = nil })), wantErr: "audience"},
		{name: "both file and url", auth: testAuth(mod(func(i *config.Issuer) { i.JWKSURL = "https://idp.example.test/jwks" })), wantErr: "exactly one of jwks_file and jwks_url"},
		{name: "neither file nor url", auth: testAuth(mod(func(i *config.Issuer) { i.JWKSFile = "" })), wantErr: "exactly one of jwks_file and jwks_url"},
		{name: "HS256 allowed", auth: testAuth(mod(func(i *config.Issuer) { i.Algorithms = []string{"RS256", "HS256"} })), wantErr: `algorithm "HS256" is not allowed`},
		{name: "none allowed", auth: testAuth(mod(func(i *config.Issuer) { i.Algorithms = []string{"none"} })), wantErr: `algorithm "none" is not allowed`},
		{name: "duplicate issuer", auth: testAuth(good, good), wantErr: "duplicate issuer"},
		{name: "missing file", auth: testAuth(mod(func(i *config.Issuer) { i.JWKSFile = "nope.json" })), wantErr: "read jwks_file nope.json"},
		{name: "no usable key", auth: testAuth(mod(func(i *config.Issuer) { i.JWKSFile = "bad.json" })), wantErr: "no usable signature verification key"},
		{name: "junk file", auth: testAuth(mod(func(i *config.Issuer) { i.JWKSFile = "junk.json" })), wantErr: "parse JWKS"},
		{name: "jwks_url not a URL", auth: testAuth(mod(func(i *config.Issuer) { i.JWKSFile, i.JWKSURL = "", "::nope" })), wantErr: "jwks_url"},
		{name: "jwks_url relative", auth: testAuth(mod(func(i *config.Issuer) { i.JWKSFile, i.JWKSURL = "", "/jwks.json" })), wantErr: "absolute http(s) URL"},
		{name: "jwks_url file scheme", auth: testAuth(mod(func(i *config.Issuer) { i.JWKSFile, i.JWKSURL = "", "file:///etc/passwd" })), wantErr: "absolute http(s) URL"},
		{name: "negative skew", auth: func() config.Auth { a := testAuth(good); a.ClockSkew = -time.Second; return a }(), wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewVerifier(t.Context(), tt.auth, fileReader(files))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, v)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, v)
		})
	}
}

// TestKeyfuncRefusesSymmetricAlgs exercises the keyfunc's own guard, which
// sits behind the parser's allow-list: even if an HMAC alg got that far, no
// key (and so no public key bytes as an HMAC secret) is handed out.
func TestKeyfuncRefusesSymmetricAlgs(t *testing.T) {
	keys := newTestKeys(t)
	auth := testAuth()
	auth.Issuers[0].Algorithms = []string{"RS256"}
	v := newFileVerifier(t, auth, keys.jwks(t))
	for _, m := range []jwt.SigningMethod{jwt.SigningMethodHS256, jwt.SigningMethodHS384, jwt.SigningMethodHS512, jwt.SigningMethodNone} {
		t.Run(m.Alg(), func(t *testing.T) {
			tok := &jwt.Token{Method: m, Header: map[string]any{"alg": m.Alg(), "kid": rsaKid}, Claims: validClaims(t0)}
			iss, err := v.keyFor(t.Context(), tok)
			requireKind(t, err, ErrInvalidToken, "algorithm not allowed")
			require.Nil(t, iss)
		})
	}
}

func TestErrorIs(t *testing.T) {
	err := error(newError(ErrExpired, "token expired", nil))
	require.ErrorIs(t, err, ErrExpired)
	require.NotErrorIs(t, err, ErrMalformed)
	require.ErrorIs(t, err, &Error{Kind: ErrExpired})
	require.Equal(t, "expired: token expired", err.Error())
	require.Equal(t, "malformed", (&Error{Kind: ErrMalformed}).Error())
}

// TestVerifyWarmCacheRefusesAsBearerToken: Verify looks a token up in its cache before
// reading the token's bytes (a cached token was read when it was first verified). Every
// header built around a cached token that BearerToken refuses is refused by Verify with
// BearerToken's error, and neither hits nor misses the cache.
func TestVerifyWarmCacheRefusesAsBearerToken(t *testing.T) {
	keys := newTestKeys(t)
	clock := newFakeClock()
	v := newFileVerifier(t, testAuth(), keys.jwks(t), WithClock(clock.Now))
	tok := signToken(t, jwt.SigningMethodRS256, keys.rsa, rsaKid, validClaims(clock.Now()))
	_, err := v.Verify(t.Context(), "Bearer "+tok)
	require.NoError(t, err)

	var headers []string
	for _, around := range []string{" ", "\t", "\u00a0", "!", "=", "==", " x", ".", "%", "\x00", "é"} {
		headers = append(headers, "Bearer "+tok+around, "Bearer "+around+tok, "Bearer "+tok[:10]+around+tok[10:])
	}
	headers = append(headers, "Bearer "+tok+" "+tok, "Basic "+tok, "Bearer\t"+tok, tok,
		"Bearer "+tok+strings.Repeat("A", MaxTokenBytes), "Bearer "+strings.Repeat("A", MaxTokenBytes+1))
	refused := 0
	for _, h := range headers {
		_, want := BearerToken(h)
		if want == nil {
			continue
		}
		refused++
		hits, misses := v.CacheStats()
		_, got := v.Verify(t.Context(), h)
		require.Error(t, got, "%q", h)
		var we, ge *Error
		require.ErrorAs(t, want, &we)
		require.ErrorAs(t, got, &ge)
		require.Equal(t, we.Kind, ge.Kind, "%q", h)
		require.Equal(t, we.Description, ge.Description, "%q", h)
		h2, m2 := v.CacheStats()
		require.Equal(t, hits, h2, "%q hit the cache", h)
		require.Equal(t, misses, m2, "%q counted as a miss", h)
	}
	require.GreaterOrEqual(t, refused, 30)
	// The cached token itself is still a hit.
	hits, _ := v.CacheStats()
	_, err = v.Verify(t.Context(), "Bearer "+tok)
	require.NoError(t, err)
	h2, _ := v.CacheStats()
	require.Equal(t, hits+1, h2)
}
