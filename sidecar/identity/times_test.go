package identity

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// TestTokenTimesBounded: iat and nbf are NumericDates no further in the future than the clock
// skew (nbf = 1e300 overflowed to the past in the JWT validator and was accepted: issue 21),
// and a token is valid for at most auth.max_token_lifetime (default 24h).
func TestTokenTimesBounded(t *testing.T) {
	keys := newTestKeys(t)
	clock := newFakeClock()
	now := clock.Now()
	rs := func(mut func(jwt.MapClaims)) string {
		c := validClaims(now)
		mut(c)
		return signToken(t, jwt.SigningMethodRS256, keys.rsa, rsaKid, c)
	}
	day := now.Add(24 * time.Hour).Unix()
	tests := []struct {
		name  string
		token string
		desc  string // empty: accepted
	}{
		{"nbf 1e300", rs(func(c jwt.MapClaims) { c["nbf"] = 1e300 }), "invalid nbf"},
		{"nbf -1e300", rs(func(c jwt.MapClaims) { c["nbf"] = -1e300 }), "invalid nbf"},
		{"iat 1e300", rs(func(c jwt.MapClaims) { c["iat"] = 1e300 }), "invalid iat"},
		{"nbf a string", rs(func(c jwt.MapClaims) { c["nbf"] = "now" }), "invalid token"},
		{"nbf in the future", rs(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() }), "token not yet valid"},
		{"nbf in the past", rs(func(c jwt.MapClaims) { c["nbf"] = now.Add(-time.Minute).Unix() }), ""},
		{"lifetime exactly 24h", rs(func(c jwt.MapClaims) { c["exp"] = day }), ""},
		{"lifetime over 24h", rs(func(c jwt.MapClaims) { c["exp"] = day + 1 }), "token lifetime exceeds auth.max_token_lifetime"},
		{"exp 1e15", rs(func(c jwt.MapClaims) { c["exp"] = 1e15 }), "token lifetime exceeds"},
		{"issued long ago, exp within a day of iat", rs(func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(-23*time.Hour).Unix(), now.Add(time.Hour).Unix()
		}), ""},
		{"issued long ago, exp beyond a day of iat", rs(func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(-48*time.Hour).Unix(), now.Add(time.Hour).Unix()
		}), "token lifetime exceeds auth.max_token_lifetime"},
		{"no iat: nbf bounds the lifetime", rs(func(c jwt.MapClaims) {
			delete(c, "iat")
			c["nbf"], c["exp"] = now.Add(-2*time.Hour).Unix(), now.Add(23*time.Hour).Unix()
		}), "token lifetime exceeds auth.max_token_lifetime"},
		{"no iat nor nbf: now bounds the lifetime", rs(func(c jwt.MapClaims) { delete(c, "iat"); c["exp"] = day + 60 }), "token lifetime exceeds auth.max_token_lifetime"},
		{"no iat nor nbf, within a day", rs(func(c jwt.MapClaims) { delete(c, "iat"); c["exp"] = day - 60 }), ""},
	}
	v := newFileVerifier(t, testAuth(), keys.jwks(t), WithClock(clock.Now))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := v.Verify(t.Context(), "Bearer "+tt.token)
			if tt.desc == "" {
				require.NoError(t, err)
				require.True(t, p.Authenticated)
				return
			}
			require.ErrorContains(t, err, tt.desc)
			require.Equal(t, Principal{}, p)
		})
	}

	// auth.max_token_lifetime narrows it.
	auth := testAuth()
	auth.MaxTokenLifetime = time.Hour
	short := newFileVerifier(t, auth, keys.jwks(t), WithClock(clock.Now))
	_, err := short.Verify(t.Context(), "Bearer "+rs(func(c jwt.MapClaims) { c["exp"] = now.Add(2 * time.Hour).Unix() }))
	require.ErrorContains(t, err, "token lifetime exceeds auth.max_token_lifetime")
	_, err = short.Verify(t.Context(), "Bearer "+rs(func(jwt.MapClaims) {}))
	require.NoError(t, err)
}
