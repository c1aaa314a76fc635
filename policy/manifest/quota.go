package manifest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/diag/yamlnode"
	"github.com/capgate/capgate/policy/quota"
)

// Field names of a manifest's quota block (quota.Capability).
var (
	quotaFields = []string{"rate", "units", "on_store_error"}
	rateFields  = []string{"calls", "per"}
)

// MaxQuotaWindow bounds a rate's window (quota.rate.per).
const MaxQuotaWindow = 366 * 24 * time.Hour

// quota reads a capability's quota: {rate: {calls, per}, units,
// on_store_error}: a rate of calls per window per caller and/or what one
// call costs in units (overriding the config's cost_classes table).
func (d *decoder) quota(f yamlnode.Pair) quota.Capability {
	var q quota.Capability
	n := yamlnode.Resolve(f.Value)
	if n.Kind != yaml.MappingNode {
		d.add(f.Value.Line, "quota", `want a mapping {rate: {calls: 10, per: "1m"}, units: 5, on_store_error: closed | open}, got %s`, yamlnode.KindName(n))
		return q
	}
	fields := d.fields(n, "quota", quotaFields)
	if len(fields) == 0 && len(n.Content) == 0 {
		d.add(n.Line, "quota", "empty: give a rate, units or both, or leave the field out")
	}
	if r, ok := fields["quota.rate"]; ok {
		q.Rate = d.rate(r)
	}
	if u, ok := fields["quota.units"]; ok {
		q.Units, _ = d.positive(u, "quota.units")
	}
	if m, ok := fields["quota.on_store_error"]; ok {
		if v, ok := d.str(m, "quota.on_store_error"); ok {
			if p := storeErrorProblem(quota.StoreErrorMode(v)); p != "" {
				d.add(m.Value.Line, "quota.on_store_error", "%s", p)
			} else {
				q.OnStoreError = quota.StoreErrorMode(v)
			}
		}
		if _, rate := fields["quota.rate"]; !rate {
			d.add(m.Value.Line, "quota.on_store_error", "applies to the rate: give quota.rate too (a plan's budget sets its own)")
		}
	}
	return q
}

func (d *decoder) rate(f yamlnode.Pair) quota.Rate {
	var r quota.Rate
	n := yamlnode.Resolve(f.Value)
	if n.Kind != yaml.MappingNode {
		d.add(f.Value.Line, "quota.rate", `want a mapping {calls: 10, per: "1m"}, got %s`, yamlnode.KindName(n))
		return r
	}
	fields := d.fields(n, "quota.rate", rateFields)
	if c, ok := fields["quota.rate.calls"]; ok {
		r.Calls, _ = d.positive(c, "quota.rate.calls")
	} else {
		d.missing(n.Line, "quota.rate.calls", "required: calls per window")
	}
	if p, ok := fields["quota.rate.per"]; ok {
		v := yamlnode.Resolve(p.Value)
		dur, err := time.ParseDuration(v.Value)
		switch {
		case !yamlnode.IsString(v) || err != nil:
			d.add(p.Value.Line, "quota.rate.per", `want a duration such as "1m" or "1h", got %s`, yamlnode.KindName(v))
		case windowProblem(dur) != "":
			d.add(p.Value.Line, "quota.rate.per", "%s: %s", v.Value, windowProblem(dur))
		default:
			r.Per = dur
		}
	} else {
		d.missing(n.Line, "quota.rate.per", `required: the window, e.g. "1m"`)
	}
	return r
}

// positive reads a positive whole number.
func (d *decoder) positive(f yamlnode.Pair, field string) (int64, bool) {
	v := yamlnode.Resolve(f.Value)
	var x int64
	if v.Kind != yaml.ScalarNode || v.ShortTag() != yamlnode.TagInt || v.Decode(&x) != nil {
		d.add(f.Value.Line, field, "want a positive whole number, got %s", yamlnode.KindName(v))
		return 0, false
	}
	if p := positiveProblem(x); p != "" {
		d.add(f.Value.Line, field, "%s", p)
		return 0, false
	}
	return x, true
}

// The value rules of the quota field (see validate.go), shared by the decoder and Validate.

func positiveProblem(x int64) string {
	if x < 1 {
		return fmt.Sprintf("%d: must be positive", x)
	}
	return ""
}

func windowProblem(d time.Duration) string {
	switch {
	case d < time.Second || d%time.Second != 0:
		return "want whole seconds, at least 1s"
	case d > MaxQuotaWindow:
		return "longer than " + MaxQuotaWindow.String()
	}
	return ""
}

func storeErrorProblem(m quota.StoreErrorMode) string {
	names := make([]string, len(quota.StoreErrorModes))
	for i, x := range quota.StoreErrorModes {
		names[i] = string(x)
	}
	if !slices.Contains(names, string(m)) {
		return fmt.Sprintf("%q is not one of %s%s", m, strings.Join(names, ", "), diag.DidYouMean(string(m), names))
	}
	return ""
}

// quotaProblems applies the quota field's value rules to a capability that came as JSON.
func quotaProblems(q quota.Capability, add func(field, msg string)) {
	if q.Units != 0 {
		if p := positiveProblem(q.Units); p != "" {
			add("quota.units", p)
		}
	}
	if !q.Rate.IsZero() {
		if p := positiveProblem(q.Rate.Calls); p != "" {
			add("quota.rate.calls", p)
		}
		if p := windowProblem(q.Rate.Per); p != "" {
			add("quota.rate.per", p)
		}
	}
	if q.OnStoreError != "" {
		if p := storeErrorProblem(q.OnStoreError); p != "" {
			add("quota.on_store_error", p)
		}
		if q.Rate.IsZero() {
			add("quota.on_store_error", "applies to the rate: give quota.rate too")
		}
	}
}
