package identity

import (
	"context"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

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
	// Reason classes the failure for operators.
	Reason Reason
	// Issuer is the token's iss claim as the token states it, UNVERIFIED (a refused token's
	// signature may not have been checked): control characters removed, at most
	// MaxIssuerBytes. Empty when the token's claims could not be decoded.
	Issuer string
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
	return &Error{Kind: kind, Description: description, Err: cause, Reason: reasonFor(kind, description)}
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
		// The *Error stays the cause, so that the doors read its Reason and Issuer.
		return protocol.Wrap(protocol.Unauthenticated, ie, ie.Description)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return protocol.Wrap(protocol.Internal, err, "the check was cancelled")
	}
	return protocol.Errorf(protocol.Unauthenticated, "the bearer token could not be verified")
}

// Reason is the class of an Unauthenticated refusal, for operators: the decision event and the
// log line carry it (the client sees only the Description). The set is closed: reasonFor is the
// one place a failure is classed.
type Reason string

// Reason classes.
const (
	ReasonMissingCredential Reason = "missing_credential" // no credential where one is required
	ReasonMalformed         Reason = "malformed"          // header or token not well formed
	ReasonSignature         Reason = "signature"          // the signature does not verify
	ReasonUnknownIssuer     Reason = "unknown_issuer"     // iss missing or not a configured issuer
	ReasonAudience          Reason = "audience"           // aud missing or not accepted
	ReasonUnknownKeyID      Reason = "unknown_key_id"     // kid missing or not in the issuer's keys
	ReasonAlgorithm         Reason = "algorithm"          // alg not allowed, or not the key's
	ReasonExpired           Reason = "expired"            // exp has passed
	ReasonNotYetValid       Reason = "not_yet_valid"      // nbf or iat in the future
	ReasonLifetime          Reason = "lifetime_too_long"  // longer than auth.max_token_lifetime
	ReasonTenantNotAllowed  Reason = "tenant_not_allowed" // the issuer may not assert the tenant
	ReasonInvalidClaims     Reason = "invalid_claims"     // another claim is missing or invalid
	ReasonKeysUnavailable   Reason = "keys_unavailable"   // the issuer's keys could not be loaded
	ReasonUnauthenticated   Reason = "unauthenticated"    // any other Unauthenticated refusal
)

// Reasons lists every Reason, for docs and tests.
var Reasons = []Reason{
	ReasonMissingCredential, ReasonMalformed, ReasonSignature, ReasonUnknownIssuer, ReasonAudience,
	ReasonUnknownKeyID, ReasonAlgorithm, ReasonExpired, ReasonNotYetValid, ReasonLifetime,
	ReasonTenantNotAllowed, ReasonInvalidClaims, ReasonKeysUnavailable, ReasonUnauthenticated,
}

// reasonFor classes a failure by its kind and its (constant) description.
func reasonFor(kind Kind, description string) Reason {
	switch kind {
	case ErrMalformed:
		return ReasonMalformed
	case ErrExpired:
		return ReasonExpired
	case ErrUnknownIssuer:
		return ReasonUnknownIssuer
	case ErrUnknownKey:
		return ReasonUnknownKeyID
	case ErrUnavailable:
		return ReasonKeysUnavailable
	}
	switch description {
	case "malformed token":
		return ReasonMalformed
	case "invalid signature":
		return ReasonSignature
	case "missing issuer", "issuer not accepted":
		return ReasonUnknownIssuer
	case "audience not accepted":
		return ReasonAudience
	case "algorithm not allowed", "key does not match algorithm", "unsupported critical header":
		return ReasonAlgorithm
	case "token not yet valid", "token is not valid yet", "token issued in the future":
		return ReasonNotYetValid
	case "token lifetime exceeds auth.max_token_lifetime":
		return ReasonLifetime
	case "the token's issuer may not assert this tenant":
		return ReasonTenantNotAllowed
	}
	return ReasonInvalidClaims
}

// MaxIssuerBytes bounds the issuer an Error carries for logs.
const MaxIssuerBytes = 256

// boundIssuer is s without control characters (and not valid UTF-8 replaced), cut to
// MaxIssuerBytes on a rune boundary.
func boundIssuer(s string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > MaxIssuerBytes {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Refusal reads an Unauthenticated refusal's class and issuer from err (a protocol error whose
// cause is an *Error, or MissingCredentials): the one place the doors read them. The issuer is
// the token's unverified iss claim, bounded; it is empty when the token could not be decoded.
func Refusal(err error) (Reason, string) {
	var ie *Error
	if errors.As(err, &ie) {
		return ie.Reason, ie.Issuer
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.Unauthenticated {
		return "", ""
	}
	if pe.WWWAuthenticate() == "Bearer" {
		return ReasonMissingCredential, ""
	}
	return ReasonUnauthenticated, ""
}
