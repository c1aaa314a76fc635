package decisionlog

import (
	"maps"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/version"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/policy/engine"
)

// fastConsole writes the default console sink — no decision_logs config —
// without the plugin: the same event OPA's console decision log writes
// (type, decision_id, labels, bundles, path, input, result, metrics,
// timestamp, trace ids), encoded directly on the decision path. The plugin
// spends ~100 µs of CPU per event (event AST, drop and mask queries, JSON
// round trips), which at ext_authz rates took three quarters of capgate's
// CPU; this costs ~2 µs (BenchmarkConsole). TestConsoleMatchesPlugin is the
// differential test against the plugin's own console output.
type fastConsole struct {
	z *zap.Logger
	// labels are the events' labels in OPA's (sorted) order: the config's,
	// with OPA's id and version over them.
	labels [][2]string
}

func newFastConsole(z *zap.Logger, id string, labels map[string]string) *fastConsole {
	all := map[string]string{}
	for k, v := range labels {
		all[k] = v
	}
	all["id"], all["version"] = id, version.Version
	c := &fastConsole{z: z}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		c.labels = append(c.labels, [2]string{k, all[k]})
	}
	return c
}

func (c *fastConsole) log(e *Entry, now time.Time) {
	if ce := c.z.Check(zapcore.InfoLevel, "decision"); ce != nil {
		ce.Write(zap.Inline(&consoleEvent{e: e, c: c, now: now}))
	}
}

// consoleEvent renders one event's fields in OPA's console order (sorted).
type consoleEvent struct {
	e   *Entry
	c   *fastConsole
	now time.Time
}

func (v *consoleEvent) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	e := v.e
	if e.Revision != "" {
		_ = enc.AddObject("bundles", zapcore.ObjectMarshalerFunc(func(b zapcore.ObjectEncoder) error {
			return b.AddObject(BundleName, zapcore.ObjectMarshalerFunc(func(r zapcore.ObjectEncoder) error {
				r.AddString("revision", e.Revision)
				return nil
			}))
		}))
	}
	enc.AddString("decision_id", e.DecisionID)
	_ = enc.AddObject("input", zapcore.ObjectMarshalerFunc(e.input))
	_ = enc.AddObject("labels", zapcore.ObjectMarshalerFunc(func(l zapcore.ObjectEncoder) error {
		for _, kv := range v.c.labels {
			l.AddString(kv[0], kv[1])
		}
		return nil
	}))
	_ = enc.AddObject("metrics", zapcore.ObjectMarshalerFunc(func(m zapcore.ObjectEncoder) error {
		m.AddInt64(MetricLatency, e.Latency.Nanoseconds())
		return nil
	}))
	enc.AddString("path", e.path())
	if e.RequestedBy != "" {
		enc.AddString("requested_by", e.RequestedBy)
	}
	_ = enc.AddObject("result", zapcore.ObjectMarshalerFunc(e.result))
	if e.SpanID != "" {
		enc.AddString("span_id", e.SpanID)
	}
	enc.AddString("timestamp", v.now.UTC().Format(time.RFC3339Nano))
	if e.TraceID != "" {
		enc.AddString("trace_id", e.TraceID)
	}
	enc.AddString("type", "openpolicyagent.org/decision_logs")
	return nil
}

func (e *Entry) path() string {
	if len(e.Rules) > 0 {
		return PathDecision
	}
	return PathView
}

// input writes the same allow-list as info's.
func (e *Entry) input(enc zapcore.ObjectEncoder) error {
	put := func(k, v string) {
		if v != "" {
			enc.AddString(k, v)
		}
	}
	put("a2a_version", e.Version)
	if e.Authenticated {
		enc.AddBool("authenticated", true)
	}
	put("binding", e.Binding)
	put("capability", e.Capability)
	put("component", e.Component)
	if e.hasConfidence() {
		enc.AddFloat64("confidence", e.Confidence)
	}
	put("issuer", e.Issuer)
	put("layer", e.Layer)
	put("operation", e.Operation)
	put("principal", e.Principal)
	put("requested", e.Requested)
	if len(e.Scopes) > 0 {
		_ = enc.AddArray("scopes", zapcore.ArrayMarshalerFunc(func(a zapcore.ArrayEncoder) error {
			for _, s := range e.Scopes {
				a.AppendString(s)
			}
			return nil
		}))
	}
	if e.ScopesTruncated {
		enc.AddBool("scopes_truncated", true)
	}
	put("tenant", e.Tenant)
	return nil
}

// result writes the same result as info's.
func (e *Entry) result(enc zapcore.ObjectEncoder) error {
	enc.AddBool("allow", e.Result == Allow)
	if e.AuthReason != "" {
		enc.AddString("auth_reason", e.AuthReason)
	}
	if e.CardVersion != "" {
		enc.AddString("card_version", e.CardVersion)
	}
	if e.Code != "" {
		enc.AddString("code", e.Code)
	}
	if e.Decided {
		enc.AddBool("entitled", e.Entitled)
	}
	if len(e.Limits) > 0 {
		_ = enc.AddReflected("limits", e.Limits)
	}
	if len(e.Quotas) > 0 {
		_ = enc.AddReflected("quotas", e.Quotas)
	}
	if len(e.Reasons) > 0 {
		_ = enc.AddArray("reasons", zapcore.ArrayMarshalerFunc(func(a zapcore.ArrayEncoder) error {
			for _, r := range e.Reasons {
				a.AppendString(r)
			}
			return nil
		}))
	}
	if e.Requested != "" {
		enc.AddBool("requested_entitled", e.RequestedEntitled)
		_ = enc.AddArray("requested_rules", (*rulesArray)(&e.RequestedRules))
	}
	enc.AddString("result", e.Result)
	if e.Rule != "" {
		enc.AddString("rule", e.Rule)
	}
	if len(e.Rules) > 0 {
		_ = enc.AddArray("rules", (*rulesArray)(&e.Rules))
	}
	return nil
}

// rulesArray writes reasons as ruleList does. It is passed as a pointer, and each reason as
// a pointer to it (ruleObject): boxing a pointer copies nothing, where a closure per reason
// was an allocation per rule of every decision event.
type rulesArray []engine.Reason

// MarshalLogArray implements zapcore.ArrayMarshaler.
func (rs *rulesArray) MarshalLogArray(a zapcore.ArrayEncoder) error {
	for i := range *rs {
		_ = a.AppendObject((*ruleObject)(&(*rs)[i]))
	}
	return nil
}

// ruleObject is one reason of a rulesArray.
type ruleObject engine.Reason

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (r *ruleObject) MarshalLogObject(o zapcore.ObjectEncoder) error {
	if d := ruleDetail(engine.Reason(*r)); d != "" {
		o.AddString("detail", d)
	}
	o.AddString("effect", r.Effect)
	o.AddString("reason", r.Rule)
	o.AddString("rule", RegoRule(r.Rule))
	return nil
}
