// Package delegation issues the credential a handler call carries: a
// short-lived token for this caller and this capability, self-issued by
// capgate or obtained by RFC 8693 token exchange, never the agent's own.
package delegation

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/capgate/capgate/sidecar/identity"
)

// ErrAnonymous is returned by SelfIssued and Exchange for a caller that is
// not authenticated: there is no subject to pass down.
var ErrAnonymous = errors.New("no authenticated caller to pass down")

// Subject is who the handler acts for.
type Subject struct {
	Principal identity.Principal
	// Authorization is the caller's Authorization header value as admitted.
	// Only a token exchange reads it (SubjectToken: the caller's raw token as
	// its subject_token), so a self-issued token costs no second reading of
	// it; it is never forwarded or logged.
	Authorization string
	DecisionID    string
}

// SubjectToken is the caller's raw bearer token from s.Authorization, or ""
// when there is none.
func (s Subject) SubjectToken() string {
	tok, err := identity.BearerToken(s.Authorization)
	if err != nil {
		return ""
	}
	return tok
}

// Target is the handler call the token is for.
type Target struct {
	Capability string
	// Handler is the handler name; it is the token's audience.
	Handler string
	// Scopes are the scopes the call may use (normally Narrow(caller's,
	// requires_scopes)); a token never carries a scope the caller lacks.
	Scopes []string
	// Limits are the capability's limits from the policy decision; a
	// self-issued token carries them in its limits claim (omitted when
	// empty). Tokens obtained by exchange carry what the OAuth server puts
	// in them.
	Limits map[string]any
}

// Issuer issues the token a handler call carries. An error means the call
// must not be made: there is no fallback credential.
type Issuer interface {
	Token(ctx context.Context, s Subject, t Target) (string, error)
}

// IssuerFunc adapts a function to Issuer.
type IssuerFunc func(ctx context.Context, s Subject, t Target) (string, error)

// Token calls f.
func (f IssuerFunc) Token(ctx context.Context, s Subject, t Target) (string, error) {
	return f(ctx, s, t)
}

var (
	_ Issuer = IssuerFunc(nil)
	_ Issuer = (*SelfIssued)(nil)
	_ Issuer = (*Exchange)(nil)
	_ Issuer = (*Router)(nil)
)

// Narrow returns the scopes held by the caller and required by the
// capability: the intersection, sorted and without duplicates. Entries are
// split on white space first (as token scope claims are), and empty ones
// ignored; the result does not depend on the order of either input.
func Narrow(callerScopes, required []string) []string {
	have := fields(callerScopes)
	var out []string
	for _, s := range fields(required) {
		if _, ok := slices.BinarySearch(have, s); ok {
			out = append(out, s)
		}
	}
	return out
}

// fields splits, sorts and deduplicates scopes.
func fields(in []string) []string {
	var out []string
	for _, s := range in {
		out = append(out, strings.Fields(s)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
