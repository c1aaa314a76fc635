package decisionlog

import (
	"maps"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/server"

	"github.com/capgate/capgate/policy/engine"
)

// BundleName names capgate's policy and data in an event's bundles: its
// revision is the policy revision the decision was made at.
const BundleName = "capgate"

// Paths of the policy decisions an event records: the entitlement view
// (cards, routing, ext_authz) or the full decision with its reasons (the
// handler-call re-check).
const (
	PathView     = "capgate/authz/entitled"
	PathDecision = "capgate/authz/decision"
)

// MetricLatency is the event metric holding the decision's latency, named
// as OPA names its timers.
const MetricLatency = "timer_capgate_decision_ns"

// regoRules maps a reason's prefix to the Rego rule of the embedded policy
// (rego/capgate/authz/authz.rego) that produces it.
var regoRules = map[string]string{
	"state":      "data.capgate.authz._state_reasons",
	"scope":      "data.capgate.authz._scope_reasons",
	"tenant":     "data.capgate.authz._tenant_reasons",
	"auth":       "data.capgate.authz._entitled_auth_reasons",
	"visibility": "data.capgate.authz._visibility_reasons",
	"deny":       "data.capgate.authz._deny_reasons",
	"capability": "data.capgate.authz.decision",
}

// RegoRule names the Rego rule behind a reason such as "scope.missing".
func RegoRule(reason string) string {
	if strings.HasPrefix(reason, "scope.any_of_") {
		return "data.capgate.authz._any_of_reasons" // requires_any_of's own reasons
	}
	prefix, _, _ := strings.Cut(reason, ".")
	if r, ok := regoRules[prefix]; ok {
		return r
	}
	return "data.capgate.authz"
}

// info turns an entry into the decision the OPA plugin logs. The input is
// an allow-list of the entry's fields (never a header, token or text); the
// result holds the outcome, the reason codes and the rules that decided.
func (e *Entry) info(now func() time.Time) *server.Info {
	input := map[string]any{}
	put := func(k, v string) {
		if v != "" {
			input[k] = v
		}
	}
	put("component", e.Component)
	put("binding", e.Binding)
	put("a2a_version", e.Version)
	put("operation", e.Operation)
	put("principal", e.Principal)
	put("tenant", e.Tenant)
	put("capability", e.Capability)
	put("layer", e.Layer)
	if e.hasConfidence() {
		input["confidence"] = e.Confidence
	}
	put("issuer", e.Issuer)
	put("requested", e.Requested)
	if e.Authenticated {
		input["authenticated"] = true
	}
	if len(e.Scopes) > 0 {
		input["scopes"] = anys(e.Scopes)
	}
	if e.ScopesTruncated {
		input["scopes_truncated"] = true
	}
	result := map[string]any{"allow": e.Result == Allow, "result": e.Result}
	if e.Decided {
		result["entitled"] = e.Entitled
	}
	if e.Requested != "" {
		result["requested_entitled"] = e.RequestedEntitled
		result["requested_rules"] = ruleList(e.RequestedRules)
	}
	if e.Code != "" {
		result["code"] = e.Code
	}
	if e.AuthReason != "" {
		result["auth_reason"] = e.AuthReason
	}
	if e.CardVersion != "" {
		result["card_version"] = e.CardVersion
	}
	if e.Rule != "" {
		result["rule"] = e.Rule
	}
	if len(e.Limits) > 0 {
		result["limits"] = maps.Clone(e.Limits)
	}
	if len(e.Quotas) > 0 {
		qs := make([]any, len(e.Quotas))
		for i, q := range e.Quotas {
			qs[i] = map[string]any{"quota": q.ID, "limit": q.Limit, "window_seconds": q.Window, "remaining": q.Remaining, "reset_seconds": q.Reset}
		}
		result["quotas"] = qs
	}
	if len(e.Reasons) > 0 {
		rs := make([]any, len(e.Reasons))
		for i, r := range e.Reasons {
			rs[i] = r
		}
		result["reasons"] = rs
	}
	path := PathView
	if len(e.Rules) > 0 {
		path = PathDecision
		result["rules"] = ruleList(e.Rules)
	}
	var in, res any = input, result
	info := &server.Info{
		DecisionID: e.DecisionID,
		TraceID:    e.TraceID,
		SpanID:     e.SpanID,
		Path:       path,
		Timestamp:  now(),
		Input:      &in,
		Results:    &res,
		Metrics:    latency{Metrics: metrics.NoOp(), ns: e.Latency.Nanoseconds()},
		RemoteAddr: e.RequestedBy,
	}
	if e.Revision != "" {
		info.Bundles = map[string]server.BundleInfo{BundleName: {Revision: e.Revision}}
	}
	return info
}

// ruleList is the event form of reasons. A reason's detail is recorded
// for scope.missing only: the scope names the capability requires and the
// caller lacks (from the manifest; the caller's own scopes are in input).
func ruleList(rs []engine.Reason) []any {
	rules := make([]any, len(rs))
	for i, r := range rs {
		m := map[string]any{"reason": r.Rule, "effect": r.Effect, "rule": RegoRule(r.Rule)}
		if d := ruleDetail(r); d != "" {
			m["detail"] = d
		}
		rules[i] = m
	}
	return rules
}

// ruleDetail is the detail an event records of a reason.
func ruleDetail(r engine.Reason) string {
	if r.Rule == "scope.missing" {
		return r.Detail
	}
	return ""
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// latency is the event's metrics: the decision latency only.
type latency struct {
	metrics.Metrics
	ns int64
}

func (l latency) All() map[string]any { return map[string]any{MetricLatency: l.ns} }
