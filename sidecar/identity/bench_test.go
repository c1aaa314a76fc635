package identity

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/capgate/capgate/test/heaptest"
)

// BenchmarkVerifyCached is the ext_authz hot path: a token seen before.
func BenchmarkVerifyCached(b *testing.B) {
	keys := newTestKeys(b)
	v := newFileVerifier(b, testAuth(), keys.jwks(b))
	header := "Bearer " + signToken(b, jwt.SigningMethodRS256, keys.rsa, rsaKid, validClaims(time.Now()))
	ctx := b.Context()
	if _, err := v.Verify(ctx, header); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v.Verify(ctx, header); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkVerifyUncachedRS256(b *testing.B) {
	keys := newTestKeys(b)
	benchUncached(b, keys, jwt.SigningMethodRS256, keys.rsa, rsaKid)
}

func BenchmarkVerifyUncachedES256(b *testing.B) {
	keys := newTestKeys(b)
	benchUncached(b, keys, jwt.SigningMethodES256, keys.ec, ecKid)
}

// benchUncached alternates two tokens through a one-entry cache, so every
// call is a full verification (plus the cache insert it would do anyway).
func benchUncached(b *testing.B, keys testKeys, m jwt.SigningMethod, key any, kid string) {
	v := newFileVerifier(b, testAuth(), keys.jwks(b), WithCacheSize(1))
	var headers [2]string
	for i := range headers {
		c := validClaims(time.Now())
		c["jti"] = i
		headers[i] = "Bearer " + signToken(b, m, key, kid, c)
	}
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := v.Verify(ctx, headers[i%2]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if hits, _ := v.CacheStats(); hits != 0 {
		b.Fatalf("%d cache hits in an uncached benchmark", hits)
	}
}

// BenchmarkCacheRetained10k reports the heap a full verified-token cache
// keeps: DefaultCacheSize distinct callers' tokens (in 50 classes), each
// verified once. The signing and first verification are not timed; the
// figure is the retained-MiB/op metric.
func BenchmarkCacheRetained10k(b *testing.B) {
	keys := newTestKeys(b)
	headers := make([]string, DefaultCacheSize)
	now := time.Now()
	for i := range headers {
		c := validClaims(now)
		c["sub"] = fmt.Sprintf("caller-%06d", i)
		c["tenant"] = fmt.Sprintf("tenant-%d", i%5)
		c["scope"] = fmt.Sprintf("scope.%d", i%10)
		headers[i] = "Bearer " + signToken(b, jwt.SigningMethodES256, keys.ec, ecKid, c)
	}
	ctx := b.Context()
	var retained heaptest.Retained
	for b.Loop() {
		b.StopTimer()
		retained.Start()
		v := newFileVerifier(b, testAuth(), keys.jwks(b))
		for _, h := range headers {
			if _, err := v.Verify(ctx, h); err != nil {
				b.Fatal(err)
			}
		}
		if v.CacheLen() != len(headers) {
			b.Fatalf("cache holds %d tokens, want %d", v.CacheLen(), len(headers))
		}
		retained.Stop()
		runtime.KeepAlive(v)
		b.StartTimer()
	}
	retained.Report(b)
}

// benchMintClaims is a handler token as the gateway mints it per message.
func benchMintClaims() MintClaims {
	return MintClaims{
		Subject: "user-0007", Tenant: "acme", Audience: "banking-handler",
		Scopes:     []string{"banking:read", "banking:write"},
		Capability: "banking.transfer", DecisionID: "d-0123456789abcdef",
		Actor: "capgate-agent", TTL: 30 * time.Second,
		Extra: map[string]any{ClaimLimits: map[string]any{"max_amount": 1000}},
	}
}

// BenchmarkMint is one handler token: claims encoding and the ES256
// signature.
func BenchmarkMint(b *testing.B) {
	m, err := GenerateMinter("https://capgate.example")
	if err != nil {
		b.Fatal(err)
	}
	c := benchMintClaims()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Mint(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeClaims is a handler token's claims (benchMintClaims) encoded by encodeClaims
// and, for comparison, by json.Marshal (the plain version it is held equal to).
func BenchmarkEncodeClaims(b *testing.B) {
	m, err := GenerateMinter("https://capgate.example")
	if err != nil {
		b.Fatal(err)
	}
	cl, err := m.claims(benchMintClaims())
	if err != nil {
		b.Fatal(err)
	}
	for _, enc := range []struct {
		name string
		f    func(jwt.MapClaims) ([]byte, error)
	}{{"encodeClaims", encodeClaims}, {"json.Marshal", func(c jwt.MapClaims) ([]byte, error) { return json.Marshal(c) }}} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.f(cl); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
