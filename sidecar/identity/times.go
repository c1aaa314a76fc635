package identity

import (
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// checkTimes bounds a token's time claims beyond what the JWT validator checks: iat and nbf,
// when present, must be NumericDates within range (a value such as 1e300 overflows to a time
// in the past in the validator) and not more than the clock skew in the future; and the token
// may be valid for at most maxLifetime: exp - iat, or without iat exp - nbf, or without either
// exp - now.
func (v *Verifier) checkTimes(claims jwt.MapClaims, exp time.Time) error {
	now := v.now()
	start := now
	for _, name := range []string{"nbf", "iat"} {
		raw, ok := claims[name]
		if !ok {
			continue
		}
		t, ok := numericDate(raw)
		if !ok {
			return newError(ErrInvalidToken, "invalid "+name, nil)
		}
		if t.After(now.Add(v.skew)) {
			if name == "nbf" {
				return newError(ErrInvalidToken, "token is not valid yet", nil)
			}
			return newError(ErrInvalidToken, "token issued in the future", nil)
		}
		start = t // iat, when present, wins over nbf
	}
	if exp.Sub(start) > v.maxLifetime {
		return newError(ErrInvalidToken, "token lifetime exceeds auth.max_token_lifetime", nil)
	}
	return nil
}
