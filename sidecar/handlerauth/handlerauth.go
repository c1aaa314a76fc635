// Package handlerauth verifies the short-lived token capgate passes to a skill handler and exposes its claims.
package handlerauth

import (
	"context"
	"errors"
	"math"
	"time"
)

// Claims are what a capgate handler token says about one call: who the
// caller is, for which tenant and capability, with which narrowed scopes,
// and which agents act on the caller's behalf.
type Claims struct {
	Subject    string // the caller (sub)
	Tenant     string // the caller's tenant (tenant claim)
	Audience   string // this handler's name, the accepted aud value
	Capability string // the capability the call was authorized for
	DecisionID string // capgate's decision id, for correlating logs
	Issuer     string // capgate's issuer id (iss)
	// Scopes are the caller's scopes narrowed to the capability's
	// requires_scopes; sorted and deduplicated.
	Scopes []string
	// Actor is the act chain's subjects, outermost (the agent calling this
	// handler) first.
	Actor     []string
	ExpiresAt time.Time
	// Limits are the capability's limits (its manifest's limits, as the
	// policy decided them), from the token's limits claim; nil when it has
	// none. capgate has already enforced max_body_bytes, max_parts and
	// max_file_bytes on the message; every other limit is the handler's.
	Limits Limits
}

// Limits are a capability's limits by name. Values are JSON values
// (numbers are float64); read them with the typed accessors, which report
// false for a limit that is absent or of another type.
type Limits map[string]any

// Int returns a limit that is a whole number.
func (l Limits) Int(name string) (int64, bool) {
	f, ok := l[name].(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// Float returns a limit that is a number.
func (l Limits) Float(name string) (float64, bool) {
	f, ok := l[name].(float64)
	return f, ok
}

// String returns a limit that is a string.
func (l Limits) String(name string) (string, bool) {
	s, ok := l[name].(string)
	return s, ok
}

// Bool returns a limit that is a boolean.
func (l Limits) Bool(name string) (bool, bool) {
	b, ok := l[name].(bool)
	return b, ok
}

// ClaimLimits is the token claim that carries Limits (an object).
const ClaimLimits = "limits"

// Names of the limits capgate enforces before forwarding a message (see
// docs/manifests.md); read them with Int.
const (
	LimitMaxBodyBytes = "max_body_bytes"
	LimitMaxParts     = "max_parts"
	LimitMaxFileBytes = "max_file_bytes"
)

// Errors returned by Verify. The message after the sentinel says why, and
// never contains the token.
var (
	// ErrMissingToken is a request without a bearer token.
	ErrMissingToken = errors.New("no bearer token")
	// ErrInvalidToken is a token that failed verification.
	ErrInvalidToken = errors.New("invalid bearer token")
)

// Authenticator verifies a bearer token (an Authorization header value or
// the bare token) and returns its claims. *Verifier implements it.
type Authenticator interface {
	Verify(ctx context.Context, bearer string) (Claims, error)
}

// VerifyFunc adapts a function to an Authenticator.
type VerifyFunc func(ctx context.Context, bearer string) (Claims, error)

// Verify calls f.
func (f VerifyFunc) Verify(ctx context.Context, bearer string) (Claims, error) { return f(ctx, bearer) }

var (
	_ Authenticator = VerifyFunc(nil)
	_ Authenticator = (*Verifier)(nil)
)

type claimsKey struct{}

// NewContext returns ctx carrying c.
func NewContext(ctx context.Context, c Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// FromContext returns the claims Middleware or the server interceptor put
// in ctx.
func FromContext(ctx context.Context) (Claims, bool) {
	c, ok := ctx.Value(claimsKey{}).(Claims)
	return c, ok
}
