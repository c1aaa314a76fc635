package access

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/capgate/capgate/policy/manifest"
)

// Tags and fields a guard change names.
const (
	// TagDestructive marks a skill whose calls cannot be undone: its
	// routing mode and limits are guards a review watches.
	TagDestructive = "destructive"
	fieldTags      = "skill.tags"
)

// GuardKind says which guard of how a capability runs was loosened.
type GuardKind string

// Guard kinds, in risk order.
const (
	// GuardRouting: the routing mode went from explicit or confirm to a
	// less careful one (the router may now pick it without asking).
	GuardRouting GuardKind = "routing"
	// GuardDestructive: the destructive tag was removed.
	GuardDestructive GuardKind = "destructive"
	// GuardLimit: a numeric limit was raised or removed.
	GuardLimit GuardKind = "limit"
	// GuardQuota: a quota the policy applies was raised, made cheaper,
	// switched to fail open, or no longer applies, for a class entitled on
	// both sides.
	GuardQuota GuardKind = "quota"
)

var guardOrder = []GuardKind{GuardRouting, GuardDestructive, GuardLimit, GuardQuota}

// Guard is one way a capability that exists on both sides runs with less
// care in the head: ranked as a risk with its cause, like a gain, since
// every caller entitled to it now gets the looser behaviour.
type Guard struct {
	Capability string
	Kind       GuardKind
	// Destructive: the capability is tagged destructive on either side
	// (a loosened guard of a destructive skill ranks first).
	Destructive bool
	// Cause is the field change: routing, skill.tags, limits.NAME or
	// quota ID.
	Cause FieldChange
	// Effect says what the change lets happen.
	Effect string
	// Risk ranks it: Runs is true (the callers run it with less care),
	// Visibility is the head's, Callers the widest entitled class.
	Risk Risk
	// Callers are the classes entitled to it in the head: who gets the
	// looser behaviour.
	Callers []string
}

// String is "purge-invoice-cache: routing explicit → auto (the router may
// now pick it alone; runs, internal, some callers)".
func (g Guard) String() string {
	return fmt.Sprintf("%s: %s (%s; %s)", g.Capability, g.Cause.String(), g.Effect, g.Risk)
}

// runFacts are what decides how a capability runs once a caller may run
// it: compared by a diff for loosened guards.
type runFacts struct {
	mode        manifest.RoutingMode
	tags        []string
	destructive bool
	limits      map[string]any
}

func runFactsOf(c *manifest.Capability) runFacts {
	return runFacts{mode: c.Routing.EffectiveMode(), tags: c.Skill.Tags, destructive: slices.Contains(c.Skill.Tags, TagDestructive), limits: c.Limits}
}

// modeCare orders routing modes from least to most careful.
func modeCare(m string) int {
	return slices.Index(manifest.RoutingModes, manifest.RoutingMode(m))
}

// guards compares how capability id runs on the two sides: base and head
// are the matrices' columns, bf and hf the facts (nil when a side has
// none: only the routing mode, which the matrix holds, is compared).
func guards(id string, base, head *Capability, bf, hf *runFacts) []Guard {
	var out []Guard
	destructive := bf != nil && bf.destructive || hf != nil && hf.destructive
	if b, h := base.RoutingMode(), head.RoutingMode(); modeCare(h) < modeCare(b) {
		effect := "the router may now propose it to the caller"
		if h == string(manifest.RoutingAuto) {
			effect = "the router may now pick it alone"
		}
		out = append(out, Guard{Capability: id, Kind: GuardRouting, Destructive: destructive, Effect: effect,
			Cause: FieldChange{Capability: id, Field: fieldRouting, Base: b, Head: h}})
	}
	if bf == nil || hf == nil {
		return out
	}
	if bf.destructive && !hf.destructive {
		out = append(out, Guard{Capability: id, Kind: GuardDestructive, Destructive: true,
			Effect: "reviews, expectations and routing no longer treat it as destructive",
			Cause:  FieldChange{Capability: id, Field: fieldTags, Base: list(bf.tags), Head: list(hf.tags)}})
	}
	for _, name := range slices.Sorted(maps.Keys(bf.limits)) {
		b, ok := number(bf.limits[name])
		if !ok {
			continue
		}
		hv, present := hf.limits[name]
		h, numeric := number(hv)
		var effect string
		switch {
		case !present:
			effect = "the limit is gone"
		case numeric && h > b:
			effect = "the limit was raised"
		default:
			continue
		}
		head := ""
		if present {
			head = fmt.Sprint(hv)
		}
		out = append(out, Guard{Capability: id, Kind: GuardLimit, Destructive: destructive, Effect: effect,
			Cause: FieldChange{Capability: id, Field: fieldLimits + "." + name, Base: fmt.Sprint(bf.limits[name]), Head: head}})
	}
	return out
}

// number reads a numeric limit value (as a manifest or a bundle holds it).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case string:
		return 0, false
	}
	f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
	return f, err == nil
}

// compareGuards orders riskier first: a destructive skill's guard, then
// by kind (routing, destructive tag, limit), then by the widest caller
// exposed, then by capability and field.
func compareGuards(a, b Guard) int {
	rankD := func(g Guard) int {
		if g.Destructive {
			return 0
		}
		return 1
	}
	return cmp.Or(
		cmp.Compare(rankD(a), rankD(b)),
		cmp.Compare(slices.Index(guardOrder, a.Kind), slices.Index(guardOrder, b.Kind)),
		compareRisk(a.Risk, b.Risk),
		strings.Compare(a.Capability, b.Capability),
		strings.Compare(a.Cause.Field, b.Cause.Field))
}
