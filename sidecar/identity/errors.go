package identity

import (
	"context"
	"errors"

	"github.com/capgate/capgate/sidecar/protocol"
)

// Kind classifies a verification failure. Each Kind is also an error, so
// errors.Is(err, identity.ErrExpired) matches any *Error of that kind.
type Kind string

// Failure kinds.
const (
	// ErrMalformed: the Authorization header or the token is not well formed
	// (wrong scheme, extra fields, too large, not a compact JWS).
	ErrMalformed Kind = "malformed"
	// ErrInvalidToken: signature, algorithm or a claim (iss, aud, nbf, iat) is wrong.
	ErrInvalidToken Kind = "invalid_token"
	// ErrExpired: the token's exp has passed (beyond the clock skew).
	ErrExpired Kind = "expired"
	// ErrUnknownIssuer: the token's iss is not a configured issuer.
	ErrUnknownIssuer Kind = "unknown_issuer"
	// ErrUnknownKey: the token's kid names no key of its issuer's key set.
	ErrUnknownKey Kind = "unknown_key"
	// ErrUnavailable: the issuer's key set could not be loaded at all; the
	// caller may answer 503 rather than 401.
	ErrUnavailable Kind = "unavailable"
)

// Error implements error so that a Kind can be an errors.Is target.
func (k Kind) Error() string { return string(k) }

// Error is a verification failure. Description is safe to show to a client:
// it never contains the token or key material.
type Error struct {
	Kind        Kind
	Description string
	// Err is the underlying cause, for logs only (it may name library internals).
	Err error
}

func (e *Error) Error() string {
	if e.Description == "" {
		return string(e.Kind)
	}
	return string(e.Kind) + ": " + e.Description
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is e's Kind or an *Error of the same Kind.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Kind:
		return e.Kind == t
	case *Error:
		return t != nil && e.Kind == t.Kind
	}
	return false
}

func newError(kind Kind, description string, cause error) *Error {
	return &Error{Kind: kind, Description: description, Err: cause}
}

// ProtocolError maps a Verify failure to the A2A error a client gets: the
// verifier's client-safe description (never the token) as Unauthenticated;
// issuer keys that cannot be fetched, or a cancelled check, as an internal
// error — the token may be valid, so it is not called bad.
func ProtocolError(err error) *protocol.Error {
	var ie *Error
	if errors.As(err, &ie) {
		if ie.Kind == ErrUnavailable {
			return protocol.Wrap(protocol.Internal, err, "the token issuer's keys are unavailable; try again later")
		}
		return protocol.Errorf(protocol.Unauthenticated, "%s", ie.Description)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return protocol.Wrap(protocol.Internal, err, "the check was cancelled")
	}
	return protocol.Errorf(protocol.Unauthenticated, "the bearer token could not be verified")
}
