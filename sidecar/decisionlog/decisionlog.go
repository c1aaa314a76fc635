// Package decisionlog records one event per authorization decision in OPA's
// decision-log format: by default on the console, encoded directly on the
// decision path as OPA's console sink writes it (a differential test holds
// the two equal); with the `services` and `decision_logs` config keys (OPA's
// schema), through OPA's own decision-log plugin run by an embedded plugin
// manager, off the decision path — batched gzip uploads with retry, masking,
// dropping and drop-on-overflow — so an OPA control plane or log collector
// reads capgate's events unchanged. It also mints decision ids and names the
// rules outside Rego that a refusal may record (rules.go). An event never
// holds a token or message content: an Entry has no field that could hold
// one, and the mask policy erases such fields should a future input carry
// them.
package decisionlog

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/quota"
)

// Result values.
const (
	Allow = "allow"
	Deny  = "deny"
)

// Entry is one decision.
type Entry struct {
	DecisionID string
	Component  string // "gateway" or "extauthz"
	Binding    string
	Version    string
	Operation  string
	Principal  string
	Tenant     string
	Capability string
	Layer      string  // routing layer that chose the capability, when routed
	Confidence float64 // classifier confidence, when the classifier decided
	Result     string  // Allow or Deny
	Code       string  // error code of a denial
	Reasons    []string
	// Rules are the policy's reasons for the capability's entitlement,
	// when the decision evaluated them (the handler-call re-check): each
	// names the Rego rule that produced it.
	Rules []engine.Reason
	// Caller facts the policy decided on, recorded so that `capgate access
	// replay` can ask the same question again: never a token or a claim
	// value other than these. Issuer is the verified token's; on an
	// Unauthenticated refusal, the refused token's (see AuthReason).
	Authenticated bool
	Issuer        string
	// Scopes are the principal's scope names (sorted), at most MaxScopes;
	// ScopesTruncated says there were more (the event is not replayable).
	Scopes          []string
	ScopesTruncated bool
	// Decided says the policy's entitlement answer on Capability was
	// evaluated (the handler-call re-check); Entitled is that answer.
	Decided, Entitled bool
	// Requested is a capability the caller asked for by a skill hint (a
	// known capability id only) that the router did not choose;
	// RequestedEntitled and RequestedRules are the policy's answer on it.
	Requested         string
	RequestedEntitled bool
	RequestedRules    []engine.Reason
	// Limits are the limits the policy's decision on Capability carried
	// (the handler-call re-check of an entitled call).
	Limits map[string]any
	// Quotas are what is left of each quota the call was charged against (package
	// policy/quota); a refusal over a quota names it in Rule ("quota.<id>").
	Quotas   []quota.State
	Revision string
	// CardVersion is the public card's version at Revision (the gateway's
	// events; "" at ext_authz).
	CardVersion string
	Latency     time.Duration
	// RequestedBy is the address of the peer that asked (OPA's
	// requested_by): the client's socket address at the gateway, the
	// downstream source Envoy reports at ext_authz.
	RequestedBy string
	// TraceID and SpanID tie the event to the request's trace (W3C ids,
	// hex); Log fills them from Span.
	TraceID, SpanID string
	// Span is the request's span (nil or non-recording with tracing off):
	// Log puts the decision's facts on it and its ids in the event.
	Span trace.Span
	// AuthReason is the class of an Unauthenticated refusal (identity.Reason: "expired",
	// "unknown_issuer", ...); Issuer is then the refused token's iss claim, unverified and
	// bounded (identity.Refusal). Neither is ever the token.
	AuthReason string
	// Rule names the check outside Rego that made a denial (RuleTaskOwner, RuleRemoved, ...;
	// rules.go), when one did.
	Rule string
}

// MaxScopes bounds the scope names an event records.
const MaxScopes = 64

// SetScopes records the principal's scope names, at most MaxScopes.
func (e *Entry) SetScopes(scopes []string) {
	e.Scopes, e.ScopesTruncated = scopes, false
	if len(scopes) > MaxScopes {
		e.Scopes, e.ScopesTruncated = scopes[:MaxScopes], true
	}
}

// hasConfidence reports whether Confidence is part of the decision: the
// classifier decided, or its score sent the caller to clarify. Every sink
// writes the confidence on that rule.
func (e *Entry) hasConfidence() bool { return e.Layer == "classifier" || e.Layer == "clarify" }

// IDs mints decision ids: random (version 4) UUIDs, the form OPA gives its
// decision ids, so that tools matching OPA's events match capgate's. It
// also holds a random per-process instance id (the events' labels.id).
type IDs struct {
	prefix string
}

// NewIDs seeds a fresh id source.
func NewIDs() *IDs {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms; fall back to time.
		return &IDs{prefix: strconv.FormatInt(time.Now().UnixNano(), 36)}
	}
	return &IDs{prefix: hex.EncodeToString(b[:])}
}

// Next returns a new id: a random UUID.
func (g *IDs) Next() string {
	return uuid.NewString()
}
