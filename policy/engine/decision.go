package engine

import (
	"encoding/json"
	"errors"
	"fmt"
)

// parseDecision reads one report of the policy (decision or an explain
// entry). Anything missing or mistyped is an error: a malformed answer
// must never read as a grant.
func parseDecision(v any) (Decision, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Decision{}, errors.New("decision is not an object")
	}
	var d Decision
	var errs []error
	str := func(key string, dst *string, required bool) {
		x, ok := m[key].(string)
		if !ok && (required || m[key] != nil) {
			errs = append(errs, fmt.Errorf("decision.%s: want a string", key))
		}
		*dst = x
	}
	boolean := func(key string, dst *bool) {
		x, ok := m[key].(bool)
		if !ok {
			errs = append(errs, fmt.Errorf("decision.%s: want a boolean", key))
		}
		*dst = x
	}
	str("capability", &d.Capability, true)
	str("state", &d.State, false)
	str("visibility", &d.Visibility, false)
	boolean("exists", &d.Exists)
	boolean("visible", &d.Visible)
	boolean("entitled", &d.Entitled)
	var allow bool
	boolean("allow", &allow)
	if allow != d.Entitled {
		errs = append(errs, errors.New("decision: allow and entitled differ"))
	}
	reasons, _ := m["reasons"].(map[string]any)
	var err error
	if d.VisibleReasons, err = parseReasons(reasons["visible"]); err != nil {
		errs = append(errs, fmt.Errorf("decision.reasons.visible: %w", err))
	}
	if d.EntitledReasons, err = parseReasons(reasons["entitled"]); err != nil {
		errs = append(errs, fmt.Errorf("decision.reasons.entitled: %w", err))
	}
	switch l := m["limits"].(type) {
	case nil: // a policy without limits in its decision
	case map[string]any:
		if len(l) > 0 {
			d.Limits = plainNumbers(l).(map[string]any)
		}
	default:
		errs = append(errs, errors.New("decision.limits: want an object"))
	}
	if err := errors.Join(errs...); err != nil {
		return Decision{}, err
	}
	return d, nil
}

func parseReasons(v any) ([]Reason, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("want a list")
	}
	out := make([]Reason, 0, len(list))
	for _, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			return nil, errors.New("want objects")
		}
		rule, ok1 := m["rule"].(string)
		effect, ok2 := m["effect"].(string)
		if !ok1 || !ok2 {
			return nil, errors.New("want rule and effect strings")
		}
		if effect != "grant" && effect != "refuse" {
			return nil, fmt.Errorf("effect %q: want grant or refuse", effect)
		}
		detail, _ := m["detail"].(string)
		out = append(out, Reason{Rule: rule, Effect: effect, Detail: detail})
	}
	return out, nil
}

// plainNumbers replaces the json.Numbers OPA answers with in v by int64
// (whole numbers that fit) or float64, so that limits read and marshal
// as numbers with any JSON library. Maps and lists are rebuilt.
func plainNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return string(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plainNumbers(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainNumbers(e)
		}
		return out
	}
	return v
}

// String renders the reason as the CLI and reports show it: rule, or
// rule(detail).
func (r Reason) String() string {
	if r.Detail == "" {
		return r.Rule
	}
	return r.Rule + "(" + r.Detail + ")"
}
