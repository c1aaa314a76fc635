package identity

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// TestCacheSharesClasses: callers with the same tenant, issuer, scopes and
// actor chain share one class in the cache; a cached principal is the one
// verification returned, whatever its class.
func TestCacheSharesClasses(t *testing.T) {
	keys := newTestKeys(t)
	clock := newFakeClock()
	v := newFileVerifier(t, testAuth(), keys.jwks(t), WithClock(clock.Now))
	entry := func(claims jwt.MapClaims) (cacheEntry, Principal) {
		t.Helper()
		tok := signToken(t, jwt.SigningMethodES256, keys.ec, ecKid, claims)
		p, err := v.Verify(t.Context(), "Bearer "+tok)
		require.NoError(t, err)
		again, err := v.Verify(t.Context(), "Bearer "+tok) // from the cache
		require.NoError(t, err)
		require.Equal(t, p, again)
		e, ok := v.cache.Peek(sha256.Sum256([]byte(tok)))
		require.True(t, ok)
		return e, p
	}
	claims := func(sub string, edit func(jwt.MapClaims)) jwt.MapClaims {
		c := validClaims(clock.Now())
		c["sub"] = sub
		if edit != nil {
			edit(c)
		}
		return c
	}
	alice, pa := entry(claims("alice", nil))
	bob, pb := entry(claims("bob", nil))
	require.Same(t, alice.class, bob.class)
	require.Equal(t, "alice", pa.Subject)
	require.Equal(t, "bob", pb.Subject)

	for name, edit := range map[string]func(jwt.MapClaims){
		"tenant": func(c jwt.MapClaims) { c["tenant"] = "globex" },
		"scopes": func(c jwt.MapClaims) { c["scope"] = "recon.run" },
		"actor":  func(c jwt.MapClaims) { c["act"] = map[string]any{"sub": "agent"} },
		"actor issuer": func(c jwt.MapClaims) {
			c["act"] = map[string]any{"sub": "agent", "iss": "https://agents.example"}
		},
	} {
		other, p := entry(claims("carol", edit))
		require.NotSame(t, alice.class, other.class, name)
		require.Equal(t, "carol", p.Subject, name)
	}
}

func TestClassTableBounded(t *testing.T) {
	var tab classTable
	exp := time.Unix(1_900_000_000, 0)
	first := tab.entry(Principal{Authenticated: true, Subject: "s", Tenant: "t-0", ExpiresAt: exp})
	for i := 1; i < maxInternedClasses; i++ {
		tab.entry(Principal{Authenticated: true, Subject: "s", Tenant: fmt.Sprint("t-", i)})
	}
	require.Len(t, tab.classes, maxInternedClasses)
	again := tab.entry(Principal{Authenticated: true, Subject: "x", Tenant: "t-0"})
	require.Same(t, first.class, again.class)

	// Full: the table starts over; entries made before keep their class.
	tab.entry(Principal{Authenticated: true, Subject: "s", Tenant: "new"})
	require.Len(t, tab.classes, 1)
	require.Equal(t, "t-0", first.principal().Tenant)
	require.Equal(t, exp, first.principal().ExpiresAt)
}

func TestClassKeyUnambiguous(t *testing.T) {
	distinct := []Principal{
		{},
		{Tenant: "a", Issuer: "b"},
		{Tenant: "ab"},
		{Issuer: "ab"},
		{Scopes: []string{}},
		{Scopes: []string{""}},
		{Scopes: []string{"a", "b"}},
		{Scopes: []string{"ab"}},
		{Actor: []string{"a"}},
		{Actor: []string{"a"}, ActorIssuers: []string{""}},
		{Actor: []string{"a"}, ActorIssuers: []string{"i"}},
		{Tenant: "1:a"},
	}
	seen := map[string]int{}
	for i, p := range distinct {
		k := classKey(p)
		j, dup := seen[k]
		require.False(t, dup, "principals %d and %d share the key %q", j, i, k)
		seen[k] = i
	}
}
