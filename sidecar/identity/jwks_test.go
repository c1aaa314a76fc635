package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
)

func jwkJSON(t *testing.T, pub any, alg, kid string, extra map[string]any) string {
	t.Helper()
	b, err := MarshalJWKS(PublicJWK{Key: pub, Alg: alg, Kid: kid})
	require.NoError(t, err)
	var doc struct{ Keys []map[string]any }
	require.NoError(t, json.Unmarshal(b, &doc))
	k := doc.Keys[0]
	for name, v := range extra {
		if v == nil {
			delete(k, name)
			continue
		}
		k[name] = v
	}
	out, err := json.Marshal(k)
	require.NoError(t, err)
	return string(out)
}

func TestParseJWKS(t *testing.T) {
	keys := newTestKeys(t)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)

	rsaJWK := func(kid string, extra map[string]any) string {
		return jwkJSON(t, &keys.rsa.PublicKey, "RS256", kid, extra)
	}
	// A well-encoded P-256 point that is not on the curve: y := x.
	offCurve := jwkJSON(t, &keys.ec.PublicKey, "ES256", "off", map[string]any{"y": jwkField(t, &keys.ec.PublicKey, "x")})

	tests := []struct {
		name     string
		doc      string
		wantKids []string
		wantSkip []string // kids reported as skipped
		reason   string   // a skip reason contains this
		wantErr  string
	}{
		{name: "RSA, EC P-256, P-384, Ed25519",
			doc: `{"keys":[` + rsaJWK("r", nil) + `,` + jwkJSON(t, &keys.ec.PublicKey, "ES256", "e", nil) + `,` +
				jwkJSON(t, &p384.PublicKey, "ES384", "p", nil) + `,` + jwkJSON(t, edPub, "EdDSA", "o", nil) + `]}`,
			wantKids: []string{"e", "o", "p", "r"}},
		{name: "use absent is fine", doc: `{"keys":[` + rsaJWK("r", map[string]any{"use": nil, "alg": nil}) + `]}`, wantKids: []string{"r"}},
		{name: "use enc ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,` + rsaJWK("enc", map[string]any{"use": "enc"}) + `]}`, wantKids: []string{"r"}, wantSkip: []string{"enc"}},
		{name: "key_ops without verify ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,` + rsaJWK("ops", map[string]any{"key_ops": []string{"encrypt"}}) + `]}`, wantKids: []string{"r"}, wantSkip: []string{"ops"}},
		{name: "RSA 1024 ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,` + jwkJSON(t, &small.PublicKey, "RS256", "small", nil) + `]}`, wantKids: []string{"r"}, wantSkip: []string{"small"}, reason: "RSA key of 1024 bits"},
		{name: "private member ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,` + rsaJWK("priv", map[string]any{"d": "AQAB"}) + `]}`, wantKids: []string{"r"}, wantSkip: []string{"priv"}, reason: "private"},
		{name: "symmetric key ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,{"kty":"oct","k":"c2VjcmV0","kid":"hmac"}]}`, wantKids: []string{"r"}, wantSkip: []string{"hmac"}},
		{name: "point off the curve ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,` + offCurve + `]}`, wantKids: []string{"r"}, wantSkip: []string{"off"}, reason: "invalid EC point"},
		{name: "alg not fitting the key ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,` + rsaJWK("bad", map[string]any{"alg": "ES256"}) + `]}`, wantKids: []string{"r"}, wantSkip: []string{"bad"}},
		{name: "HS256 alg on RSA key ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,` + rsaJWK("hs", map[string]any{"alg": "HS256"}) + `]}`, wantKids: []string{"r"}, wantSkip: []string{"hs"}},
		{name: "no kid ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,` + rsaJWK("", map[string]any{"kid": nil}) + `]}`, wantKids: []string{"r"}, wantSkip: []string{""}},
		{name: "duplicate kid drops both", doc: `{"keys":[` + rsaJWK("r", nil) + `,` + rsaJWK("d", nil) + `,` + jwkJSON(t, &keys.ec.PublicKey, "ES256", "d", nil) + `]}`, wantKids: []string{"r"}, wantSkip: []string{"d"}},
		{name: "padded base64 ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,` + rsaJWK("pad", map[string]any{"e": "AQAB="}) + `]}`, wantKids: []string{"r"}, wantSkip: []string{"pad"}},
		{name: "even exponent ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,` + rsaJWK("even", map[string]any{"e": "AQAC"}) + `]}`, wantKids: []string{"r"}, wantSkip: []string{"even"}},
		{name: "unknown kty ignored", doc: `{"keys":[` + rsaJWK("r", nil) + `,{"kty":"XYZ","kid":"x"}]}`, wantKids: []string{"r"}, wantSkip: []string{"x"}},
		{name: "not JSON", doc: `nope`, wantErr: "parse JWKS"},
		{name: "no keys member", doc: `{}`, wantErr: `no "keys" array`},
		{name: "keys not an array", doc: `{"keys":{}}`, wantErr: "parse JWKS"},
		{name: "only unusable keys", doc: `{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}`, wantErr: "no usable"},
		{name: "empty keys", doc: `{"keys":[]}`, wantErr: "no usable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, skipped, err := parseJWKS([]byte(tt.doc))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, set)
				return
			}
			require.NoError(t, err)
			var kids []string
			for kid := range set {
				kids = append(kids, kid)
			}
			require.ElementsMatch(t, tt.wantKids, kids)
			var skippedKids, reasons []string
			for _, s := range skipped {
				skippedKids = append(skippedKids, s.Kid)
				reasons = append(reasons, s.Reason)
			}
			require.ElementsMatch(t, tt.wantSkip, skippedKids)
			if tt.reason != "" {
				require.Contains(t, strings.Join(reasons, "; "), tt.reason)
			}
		})
	}
}

func jwkField(t *testing.T, pub any, field string) string {
	t.Helper()
	alg := "EdDSA"
	if k, ok := pub.(*ecdsa.PublicKey); ok {
		alg = map[string]string{"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}[k.Curve.Params().Name]
	}
	b, err := MarshalJWKS(PublicJWK{Key: pub, Alg: alg, Kid: "k"})
	require.NoError(t, err)
	var doc struct {
		Keys []map[string]any `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	v, _ := doc.Keys[0][field].(string)
	return v
}

func TestThumbprintRFC7638(t *testing.T) {
	// RFC 7638 §3.1 example.
	set, _, err := parseJWKS([]byte(`{"keys":[{"kty":"RSA","kid":"2011-04-29","alg":"RS256","e":"AQAB",` +
		`"n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"}]}`))
	require.NoError(t, err)
	tp, err := Thumbprint(set["2011-04-29"].PublicKey())
	require.NoError(t, err)
	require.Equal(t, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs", tp)

	_, err = Thumbprint("not a key")
	require.Error(t, err)
}

func TestMarshalJWKSRefusesMismatchedAlg(t *testing.T) {
	keys := newTestKeys(t)
	tests := []struct {
		name string
		key  any
		alg  string
	}{
		{name: "EC key as RS256", key: &keys.ec.PublicKey, alg: "RS256"},
		{name: "RSA key as ES256", key: &keys.rsa.PublicKey, alg: "ES256"},
		{name: "P-256 as ES384", key: &keys.ec.PublicKey, alg: "ES384"},
		{name: "HS256", key: &keys.rsa.PublicKey, alg: "HS256"},
		{name: "private key", key: keys.rsa, alg: "RS256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := MarshalJWKS(PublicJWK{Key: tt.key, Alg: tt.alg})
			require.Error(t, err)
		})
	}
}

// jwksServer serves a JWKS that the test can swap, counting fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	body    []byte
	status  int
	fetches atomic.Int32
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{body: body, status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.WriteHeader(s.status)
		_, _ = w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

func urlAuth(url string) config.Auth {
	return testAuth(config.Issuer{Issuer: testIssuer, Audiences: []string{testAudience}, JWKSURL: url})
}

func TestJWKSURLRefresh(t *testing.T) {
	a, b := newTestKeys(t), newTestKeys(t)
	jwksOf := func(pairs ...any) []byte {
		var ks []PublicJWK
		for i := 0; i < len(pairs); i += 2 {
			ks = append(ks, PublicJWK{Key: &pairs[i].(*ecdsa.PrivateKey).PublicKey, Alg: "ES256", Kid: pairs[i+1].(string)})
		}
		out, err := MarshalJWKS(ks...)
		require.NoError(t, err)
		return out
	}
	srv := newJWKSServer(t, jwksOf(a.ec, "a"))
	clock := newFakeClock()
	v, err := NewVerifier(t.Context(), urlAuth(srv.URL), nil, WithClock(clock.Now), WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	require.Equal(t, int32(1), srv.fetches.Load(), "fetched at start")

	tokenFor := func(key *ecdsa.PrivateKey, kid string) string {
		c := validClaims(clock.Now())
		c["exp"] = clock.Now().Add(time.Hour).Unix()
		return "Bearer " + signToken(t, jwt.SigningMethodES256, key, kid, c)
	}
	verify := func(tok string) error {
		_, err := v.Verify(t.Context(), tok)
		return err
	}

	tokA := tokenFor(a.ec, "a")
	require.NoError(t, verify(tokA))

	// Rotation adds b; within the rate limit an unknown kid does not refetch.
	srv.serve(http.StatusOK, jwksOf(a.ec, "a", b.ec, "b"))
	requireKind(t, verify(tokenFor(b.ec, "b")), ErrUnknownKey, "unknown key id")
	require.Equal(t, int32(1), srv.fetches.Load())

	// After the interval the unknown kid refetches once and is found.
	clock.Advance(DefaultRefreshInterval)
	require.NoError(t, verify(tokenFor(b.ec, "b")))
	require.Equal(t, int32(2), srv.fetches.Load())

	// Many unknown kids within the interval: no further fetches.
	for i := range 20 {
		requireKind(t, verify(tokenFor(b.ec, fmt.Sprintf("nope-%d", i))), ErrUnknownKey, "unknown key id")
	}
	require.Equal(t, int32(2), srv.fetches.Load())

	// A failing endpoint keeps the last good set.
	srv.serve(http.StatusInternalServerError, []byte("oops"))
	clock.Advance(DefaultRefreshInterval)
	requireKind(t, verify(tokenFor(b.ec, "nope")), ErrUnknownKey, "unknown key id")
	require.Equal(t, int32(3), srv.fetches.Load())
	require.NoError(t, verify(tokenFor(a.ec, "a")))
	require.NoError(t, verify(tokenFor(b.ec, "b")))

	// An oversized JWKS is refused and the last good set kept.
	srv.serve(http.StatusOK, []byte(`{"keys":[],"pad":"`+strings.Repeat("x", MaxJWKSBytes)+`"}`))
	clock.Advance(DefaultRefreshInterval)
	requireKind(t, verify(tokenFor(b.ec, "nope")), ErrUnknownKey, "unknown key id")
	require.Equal(t, int32(4), srv.fetches.Load())
	require.NoError(t, verify(tokenFor(a.ec, "a")))

	// Rotation removing a: once refetched, cached tokens signed by a are
	// verified again and refused.
	require.NoError(t, verify(tokA))
	srv.serve(http.StatusOK, jwksOf(b.ec, "b"))
	clock.Advance(DefaultRefreshInterval)
	requireKind(t, verify(tokenFor(b.ec, "c")), ErrUnknownKey, "unknown key id")
	require.Equal(t, int32(5), srv.fetches.Load())
	requireKind(t, verify(tokA), ErrUnknownKey, "unknown key id")
}

func TestJWKSURLUnavailableAtStart(t *testing.T) {
	keys := newTestKeys(t)
	good, err := MarshalJWKS(PublicJWK{Key: &keys.ec.PublicKey, Alg: "ES256", Kid: ecKid})
	require.NoError(t, err)
	srv := newJWKSServer(t, []byte("down"))
	srv.serve(http.StatusServiceUnavailable, []byte("down"))
	clock := newFakeClock()
	v, err := NewVerifier(t.Context(), urlAuth(srv.URL), nil,
		WithClock(clock.Now), WithHTTPClient(srv.Client()), WithRefreshInterval(5*time.Second))
	require.NoError(t, err, "an unreachable IdP does not stop start-up")

	tok := "Bearer " + signToken(t, jwt.SigningMethodES256, keys.ec, ecKid, validClaims(clock.Now()))
	_, err = v.Verify(t.Context(), tok)
	requireKind(t, err, ErrUnavailable, "signing keys unavailable")

	srv.serve(http.StatusOK, good)
	clock.Advance(5 * time.Second)
	p, err := v.Verify(t.Context(), tok)
	require.NoError(t, err)
	require.Equal(t, "alice", p.Subject)
	require.Equal(t, int32(2), srv.fetches.Load())
}

func TestJWKSURLFetchTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	start := time.Now()
	v, err := NewVerifier(t.Context(), urlAuth(srv.URL), nil, WithHTTPClient(srv.Client()), WithFetchTimeout(100*time.Millisecond))
	require.NoError(t, err)
	require.NotNil(t, v)
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestJWKSURLConcurrentUnknownKidsFetchOnce(t *testing.T) {
	keys := newTestKeys(t)
	srv := newJWKSServer(t, keys.jwks(t))
	clock := newFakeClock()
	v, err := NewVerifier(t.Context(), urlAuth(srv.URL), nil, WithClock(clock.Now), WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	clock.Advance(DefaultRefreshInterval)

	c := validClaims(clock.Now())
	good := "Bearer " + signToken(t, jwt.SigningMethodES256, keys.ec, ecKid, c)
	unknown := "Bearer " + signToken(t, jwt.SigningMethodES256, keys.ec, "rotated-away", c)
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Go(func() {
			tok := good
			if i%2 == 0 {
				tok = unknown
			}
			_, errs[i] = v.Verify(t.Context(), tok)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 {
			requireKind(t, err, ErrUnknownKey, "unknown key id")
		} else {
			require.NoError(t, err)
		}
	}
	require.Equal(t, int32(2), srv.fetches.Load(), "one fetch at start, one for all unknown kids")
}

// waitFetches waits for every fetch in progress to end.
func waitFetches(v *Verifier) {
	for _, iss := range v.issuers {
		iss.fetchMu.Lock()
		ch := iss.fetching
		iss.fetchMu.Unlock()
		if ch != nil {
			<-ch
		}
	}
}

func ecJWKS(t *testing.T, pairs ...any) []byte {
	t.Helper()
	var ks []PublicJWK
	for i := 0; i < len(pairs); i += 2 {
		ks = append(ks, PublicJWK{Key: &pairs[i].(*ecdsa.PrivateKey).PublicKey, Alg: "ES256", Kid: pairs[i+1].(string)})
	}
	out, err := MarshalJWKS(ks...)
	require.NoError(t, err)
	return out
}

// TestJWKSURLRefetchOutlivesTheCheckDeadline: after a rotation, the first
// token with the new kid triggers a refetch. A check whose context ends
// first (Envoy's ext_authz timeout) is answered "unavailable", a retryable
// error, not "unknown key", and the fetch goes on without it: the next
// check finds the key without fetching again.
func TestJWKSURLRefetchOutlivesTheCheckDeadline(t *testing.T) {
	a, b := newTestKeys(t), newTestKeys(t)
	var (
		mu      sync.Mutex
		body    = ecJWKS(t, a.ec, "a")
		gate    chan struct{} // non-nil: the next fetch waits for it
		arrived = make(chan struct{}, 1)
		fetches atomic.Int32
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		mu.Lock()
		g, out := gate, body
		gate = nil
		mu.Unlock()
		if g != nil {
			arrived <- struct{}{}
			select {
			case <-g:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	clock := newFakeClock()
	v, err := NewVerifier(t.Context(), urlAuth(srv.URL), nil, WithClock(clock.Now), WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	require.Equal(t, int32(1), fetches.Load())

	// Rotation: the issuer now signs with b; its JWKS endpoint is slow.
	release := make(chan struct{})
	mu.Lock()
	body, gate = ecJWKS(t, a.ec, "a", b.ec, "b"), release
	mu.Unlock()
	clock.Advance(DefaultRefreshInterval)
	c := validClaims(clock.Now())
	c["exp"] = clock.Now().Add(time.Hour).Unix()
	tokB := "Bearer " + signToken(t, jwt.SigningMethodES256, b.ec, "b", c)

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := v.Verify(ctx, tokB)
		errc <- err
	}()
	<-arrived // the refetch is under way
	cancel()  // the check's deadline passes
	requireKind(t, <-errc, ErrUnavailable, "signing keys are being refreshed")

	close(release)
	waitFetches(v)
	p, err := v.Verify(t.Context(), tokB)
	require.NoError(t, err)
	require.Equal(t, "alice", p.Subject)
	require.Equal(t, int32(2), fetches.Load(), "the fetch the first check started served the next one")
}

// TestJWKSURLRevalidatedInBackground: a key set older than maxKeyAge is
// refetched in the background by the next verification, which does not
// wait for it; a key the issuer withdrew stops verifying once it lands.
func TestJWKSURLRevalidatedInBackground(t *testing.T) {
	a, b := newTestKeys(t), newTestKeys(t)
	srv := newJWKSServer(t, ecJWKS(t, a.ec, "a", b.ec, "b"))
	clock := newFakeClock()
	v, err := NewVerifier(t.Context(), urlAuth(srv.URL), nil, WithClock(clock.Now), WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	tokenFor := func(key *ecdsa.PrivateKey, kid, sub string) string {
		c := validClaims(clock.Now())
		c["sub"] = sub
		c["exp"] = clock.Now().Add(time.Hour).Unix()
		return "Bearer " + signToken(t, jwt.SigningMethodES256, key, kid, c)
	}
	tokA := tokenFor(a.ec, "a", "alice")
	_, err = v.Verify(t.Context(), tokA)
	require.NoError(t, err)

	// The issuer withdraws a.
	srv.serve(http.StatusOK, ecJWKS(t, b.ec, "b"))
	clock.Advance(DefaultMaxKeyAge - time.Second)
	_, err = v.Verify(t.Context(), tokenFor(b.ec, "b", "bob"))
	require.NoError(t, err)
	waitFetches(v)
	require.Equal(t, int32(1), srv.fetches.Load(), "younger than maxKeyAge: no refetch")

	clock.Advance(time.Second)
	_, err = v.Verify(t.Context(), tokenFor(b.ec, "b", "carol"))
	require.NoError(t, err, "the verification that starts the refetch does not wait for it")
	waitFetches(v)
	require.Equal(t, int32(2), srv.fetches.Load())

	requireKind(t, verifyErr(v, t, tokA), ErrUnknownKey, "unknown key id")
	requireKind(t, verifyErr(v, t, tokenFor(a.ec, "a", "dave")), ErrUnknownKey, "unknown key id")
	require.Equal(t, int32(2), srv.fetches.Load(), "the unknown kid is within the refresh interval")
}

func verifyErr(v *Verifier, t *testing.T, tok string) error {
	_, err := v.Verify(t.Context(), tok)
	return err
}
