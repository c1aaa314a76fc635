package identity

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/policy/config"
)

// maxActDepth bounds how many nested act claims are followed.
const maxActDepth = 32

// Principal is who is calling. The zero value is the anonymous caller.
//
// A Principal returned by Verify may be shared with the verified-token
// cache: treat its slices as read-only. The token's other claims are not
// kept: thousands of cached principals would carry them for nothing.
type Principal struct {
	Authenticated bool
	Subject       string
	Tenant        string
	Issuer        string
	// Scopes are sorted and deduplicated.
	Scopes []string
	// Actor is the act chain's subjects, outermost (the current actor) first.
	Actor []string
	// ActorIssuers are the act chain's iss members, one per Actor entry
	// ("" where a level has none); nil without an act chain.
	ActorIssuers []string
	ExpiresAt    time.Time
}

// HasScope reports whether the principal holds scope.
func (p Principal) HasScope(scope string) bool {
	_, ok := slices.BinarySearch(p.Scopes, scope)
	return ok
}

// PrincipalFromClaims builds the Principal that a token with these claims
// would yield, without any signature or time checks. It is for tooling
// (`capgate card --claims`, `capgate explain --claims`); the request path
// uses Verify.
func PrincipalFromClaims(auth config.Auth, claims map[string]any) Principal {
	scopesClaim, tenantClaim := claimNames(auth)
	p := Principal{
		Authenticated: true,
		Subject:       stringClaim(claims, "sub"),
		Tenant:        stringClaim(claims, tenantClaim),
		Issuer:        stringClaim(claims, "iss"),
		Scopes:        scopesFrom(claims, scopesClaim),
	}
	p.Actor, p.ActorIssuers = actorChain(claims)
	if exp, ok := numericDate(claims["exp"]); ok {
		p.ExpiresAt = exp
	}
	return p
}

func claimNames(auth config.Auth) (scopes, tenant string) {
	scopes, tenant = auth.ScopesClaim, auth.TenantClaim
	if scopes == "" {
		scopes = config.DefaultScopesClaim
	}
	if tenant == "" {
		tenant = config.DefaultTenantClaim
	}
	return scopes, tenant
}

func stringClaim(claims map[string]any, name string) string {
	s, _ := claims[name].(string)
	return s
}

// scopesFrom reads scopes from the configured claim, or from "scp" when that
// claim is absent. A claim may be a space-separated string or an array of
// strings; anything else (or a non-string element) yields no scope from it,
// which can only narrow what the caller may do.
func scopesFrom(claims map[string]any, name string) []string {
	v, ok := claims[name]
	if !ok {
		v = claims["scp"]
	}
	var out []string
	switch s := v.(type) {
	case string:
		out = strings.Fields(s)
	case []any:
		out = make([]string, 0, len(s))
		for _, e := range s {
			if str, ok := e.(string); ok {
				out = append(out, strings.Fields(str)...)
			}
		}
	case []string:
		for _, str := range s {
			out = append(out, strings.Fields(str)...)
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return slices.Clip(slices.Compact(out))
}

// actorChain follows act → act → … (RFC 8693 §4.1) and returns the subjects,
// outermost first. It stops at the first level without a string sub.
func actorChain(claims map[string]any) (subjects, issuers []string) {
	cur := claims
	for range maxActDepth {
		act, ok := cur["act"].(map[string]any)
		if !ok {
			break
		}
		sub, ok := act["sub"].(string)
		if !ok || sub == "" {
			break
		}
		iss, _ := act["iss"].(string)
		subjects = append(subjects, sub)
		issuers = append(issuers, iss)
		cur = act
	}
	return slices.Clip(subjects), slices.Clip(issuers)
}

// numericDate converts a JSON NumericDate (seconds since the epoch).
func numericDate(v any) (time.Time, bool) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int64:
		f = float64(n)
	case int:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return time.Time{}, false
		}
	default:
		return time.Time{}, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f > 1e15 || f < -1e15 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}
