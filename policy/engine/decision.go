package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/policy/quota"
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
	if d.Quotas, err = parseQuotas(m["quotas"]); err != nil {
		errs = append(errs, fmt.Errorf("decision.quotas: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return Decision{}, err
	}
	return d, nil
}

// parseQuotas reads the decision's quotas: absent or null is none; a list
// of objects each with id, unit, limit, window_seconds, cost, key (a list
// of {name, value}) and on_store_error, plan optional. Anything else, an
// unknown member, an invalid quota or a repeated id is an error.
func parseQuotas(v any) ([]quota.Applied, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("want a list")
	}
	if len(list) == 0 {
		return nil, nil
	}
	out := make([]quota.Applied, 0, len(list))
	seen := make(map[string]bool, len(list))
	for i, x := range list {
		a, err := parseQuota(x)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		if seen[a.ID] {
			return nil, fmt.Errorf("[%d]: id %q repeated", i, a.ID)
		}
		seen[a.ID] = true
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b quota.Applied) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

var quotaMembers = []string{"id", "plan", "unit", "limit", "window_seconds", "cost", "key", "on_store_error"}

func parseQuota(x any) (quota.Applied, error) {
	m, ok := x.(map[string]any)
	if !ok {
		return quota.Applied{}, errors.New("want an object")
	}
	for k := range m {
		if !slices.Contains(quotaMembers, k) {
			return quota.Applied{}, fmt.Errorf("unknown member %q", k)
		}
	}
	var a quota.Applied
	var ok1, ok2, ok3 bool
	a.ID, ok1 = m["id"].(string)
	unit, ok2 := m["unit"].(string)
	mode, ok3 := m["on_store_error"].(string)
	if !ok1 || !ok2 || !ok3 {
		return quota.Applied{}, errors.New("want id, unit and on_store_error strings")
	}
	a.Unit, a.OnStoreError = quota.Unit(unit), quota.StoreErrorMode(mode)
	if p, given := m["plan"]; given {
		if a.Plan, ok = p.(string); !ok {
			return quota.Applied{}, errors.New("plan: want a string")
		}
	}
	var window int64
	for _, n := range []struct {
		key string
		dst *int64
	}{{"limit", &a.Limit}, {"window_seconds", &window}, {"cost", &a.Cost}} {
		num, ok := m[n.key].(json.Number)
		if !ok {
			return quota.Applied{}, fmt.Errorf("%s: want a whole number", n.key)
		}
		i, err := num.Int64()
		if err != nil {
			return quota.Applied{}, fmt.Errorf("%s: want a whole number", n.key)
		}
		*n.dst = i
	}
	if window > int64(365*24*time.Hour/time.Second) {
		return quota.Applied{}, fmt.Errorf("window_seconds %d: longer than a year", window)
	}
	a.Window = time.Duration(window) * time.Second
	parts, ok := m["key"].([]any)
	if !ok {
		return quota.Applied{}, errors.New("key: want a list")
	}
	for _, p := range parts {
		pm, ok := p.(map[string]any)
		if !ok || len(pm) != 2 {
			return quota.Applied{}, errors.New("key: want {name, value} objects")
		}
		name, ok1 := pm["name"].(string)
		value, ok2 := pm["value"].(string)
		if !ok1 || !ok2 {
			return quota.Applied{}, errors.New("key: want name and value strings")
		}
		a.Key = append(a.Key, quota.KeyPart{Name: name, Value: value})
	}
	if err := a.Validate(); err != nil {
		return quota.Applied{}, err
	}
	return a, nil
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
