package metrics

import "github.com/prometheus/client_golang/prometheus"

// DecisionCode is the code label of capgate_decisions_total: what kind of
// answer a request got, from a fixed set, so that an operator can tell a
// caller refused by policy from a request capgate could not serve. The
// A2A code of each denial is in the decision log; this label only classes it.
type DecisionCode uint8

// The decision codes. CodeOK is the code of every allowed request; the
// others are codes of denials.
const (
	// CodeOK: the request was allowed and answered.
	CodeOK DecisionCode = iota
	// CodeRefused: the caller was refused — by the policy, by admission
	// (credential, tenant, task or context owner, extension), by routing or
	// lifecycle (no capability for the caller, a removed one).
	CodeRefused
	// CodeInvalid: the request itself was refused — malformed, too large,
	// an unknown method or route, an unsupported operation or version, or
	// one the task's state or the handler does not allow.
	CodeInvalid
	// CodeUnavailable: something capgate needs to decide could not answer
	// — the task store (Redis down, a write no replica confirmed) or an
	// issuer's signing keys. capgate failed closed; the caller may retry.
	CodeUnavailable
	// CodeError: capgate or the handler failed — a policy that could not be
	// evaluated, a handler error or an invalid handler answer, an internal
	// error.
	CodeError

	numDecisionCodes
)

// DecisionCodes lists every code, CodeOK first.
func DecisionCodes() []DecisionCode {
	out := make([]DecisionCode, numDecisionCodes)
	for i := range out {
		out[i] = DecisionCode(i)
	}
	return out
}

// String is the code's label value.
func (c DecisionCode) String() string {
	switch c {
	case CodeOK:
		return "ok"
	case CodeRefused:
		return "refused"
	case CodeInvalid:
		return "invalid"
	case CodeUnavailable:
		return "unavailable"
	}
	return "error"
}

// Result is the result label that goes with the code: allow for CodeOK,
// deny for every other.
func (c DecisionCode) Result() string {
	if c == CodeOK {
		return "allow"
	}
	return "deny"
}

// DecisionCounters are the decision counters of one component and
// operation, one per code, resolved once so that counting does no label
// hashing. Resolving them creates every series at 0.
type DecisionCounters [numDecisionCodes]prometheus.Counter

// DecisionCounters resolves (and so creates at 0) the counters of component
// and operation: result allow with code ok, result deny with each other code.
func (m *Metrics) DecisionCounters(component, operation string) *DecisionCounters {
	var c DecisionCounters
	for _, code := range DecisionCodes() {
		c[code] = m.Decisions.WithLabelValues(component, operation, code.Result(), code.String())
	}
	return &c
}

// Inc counts one decision with code c.
func (d *DecisionCounters) Inc(c DecisionCode) {
	if c >= numDecisionCodes {
		c = CodeError
	}
	d[c].Inc()
}
