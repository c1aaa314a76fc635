package manifest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/diag/yamlnode"
)

// The value rules of the manifest format. Each says what is wrong with a
// value ("" when nothing is); the YAML decoder (decode.go) reports them at
// the value's line, Validate for a capability that came as JSON. A rule is
// written here once and called by both.

func idProblem(v string) string {
	if !idRE.MatchString(v) {
		return fmt.Sprintf("%q does not match %s", v, IDPattern)
	}
	return ""
}

func stateProblem(v State) string {
	if !slices.Contains(states, v) {
		return fmt.Sprintf("%q is not one of %s%s", v, join(states), diag.DidYouMean(string(v), strs(states)))
	}
	return ""
}

func visibilityProblem(v Visibility) string {
	if !slices.Contains(visibility, v) {
		return fmt.Sprintf("%q is not one of %s%s", v, join(visibility), diag.DidYouMean(string(v), strs(visibility)))
	}
	return ""
}

// Messages for a required value that is missing or blank.
var (
	stateRequired      = "required: one of " + join(states)
	visibilityRequired = "required: one of " + join(visibility)
)

const (
	tenantsRequired   = `required: "*" or a non-empty list`
	tenantsWant       = `want "*" or a non-empty list of tenant ids`
	replacedByMissing = "required when state is removed"
)

func scopeProblem(s string) string {
	switch {
	case s == "":
		return "empty scope"
	case strings.IndexFunc(s, unicode.IsSpace) >= 0:
		return fmt.Sprintf("%q contains whitespace: list each scope separately", s)
	}
	return ""
}

func tagProblem(s string) string {
	if strings.TrimSpace(s) == "" {
		return "empty tag"
	}
	return ""
}

func tenantProblem(t string) string {
	switch {
	case t == "*":
		return `"*" must stand alone (tenants: "*"), not inside a list`
	case strings.TrimSpace(t) == "":
		return "empty tenant id"
	}
	return ""
}

func modeProblem(m RoutingMode) string {
	if !slices.Contains(RoutingModes, m) {
		return fmt.Sprintf("%q is not one of %s", m, join(RoutingModes))
	}
	return ""
}

// minConfidenceProblem: text is the number as written.
func minConfidenceProblem(x float64, text string) string {
	if !(x > 0 && x <= 1) {
		return text + " is outside (0, 1]"
	}
	return ""
}

// modesProblems reports (index, problem) for each bad media type of a
// list: not a plain lower-case type/subtype, or listed twice.
func modesProblems(list []string, report func(i int, msg string)) {
	seen := map[string]bool{}
	for i, m := range list {
		if msg := mediaTypeProblem(m); msg != "" {
			report(i, fmt.Sprintf("%q %s", m, msg))
			continue
		}
		if seen[m] {
			report(i, fmt.Sprintf("%q is listed twice", m))
		}
		seen[m] = true
	}
}

// anyOfProblems applies the requires_any_of rules to alts, the
// alternatives (a nil entry is one the caller could not read and has
// reported): at least two; each a non-empty list of valid scopes; none
// repeated; none that requires_scopes (all) already holds in full. report
// gets the alternative's index (-1 for the list) and the scope's (-1 for
// the alternative). It returns the alternatives that passed.
func anyOfProblems(alts [][]string, all []string, report func(i, j int, msg string)) [][]string {
	switch len(alts) {
	case 0:
		report(-1, -1, "empty list: list at least two alternatives, or leave the field out")
		return nil
	case 1:
		report(-1, -1, "one alternative is no choice: list its scopes under requires_scopes, or add another alternative")
		return nil
	}
	var out [][]string
	seen := map[string]int{}
	for i, list := range alts {
		if list == nil {
			continue
		}
		if len(list) == 0 {
			report(i, -1, "empty alternative: it would grant every caller; list its scopes")
			continue
		}
		valid := true
		for j, s := range list {
			if msg := scopeProblem(s); msg != "" {
				report(i, j, msg)
				valid = false
			}
		}
		if !valid {
			continue
		}
		key := strings.Join(slices.Compact(slices.Sorted(slices.Values(list))), " ")
		if first, dup := seen[key]; dup {
			report(i, -1, "the same alternative as "+yamlnode.Index("requires_any_of", first))
			continue
		}
		seen[key] = i
		if holdsAll(all, list) {
			report(i, -1, "requires_scopes already holds every scope of this alternative, so every entitled caller holds it and the other alternatives add nothing: move the scopes the alternatives share to requires_scopes")
			continue
		}
		out = append(out, list)
	}
	return out
}

// Validate checks c's values by the rules of the manifest format: the
// rules the YAML decoder applies to a manifest file (the same functions),
// for a capability that came as JSON, such as a policy bundle's registry
// entry. It returns every problem found, joined, each naming its field.
// Registry-wide rules (unique ids, replaced_by targets, handlers) are not
// a single capability's: Load and the policy compiler apply them.
func (c *Capability) Validate() error {
	var errs []error
	add := func(field, msg string) { errs = append(errs, errors.New(field+": "+msg)) }
	required := func(field, v, msg string) bool {
		if strings.TrimSpace(v) == "" {
			add(field, msg)
			return false
		}
		return true
	}
	if required("id", c.ID, "required") {
		if p := idProblem(c.ID); p != "" {
			add("id", p)
		}
	}
	if required("state", string(c.State), stateRequired) {
		if p := stateProblem(c.State); p != "" {
			add("state", p)
		}
	}
	if required("visibility", string(c.Visibility), visibilityRequired) {
		if p := visibilityProblem(c.Visibility); p != "" {
			add("visibility", p)
		}
	}
	if c.State == StateRemoved && c.ReplacedBy == "" {
		add("replaced_by", replacedByMissing)
	}
	c.Skill.validate(add)
	for i, s := range c.RequiresScopes {
		if p := scopeProblem(s); p != "" {
			add(yamlnode.Index("requires_scopes", i), p)
		}
	}
	if c.RequiresAnyOf != nil {
		anyOfProblems(c.RequiresAnyOf, c.RequiresScopes, func(i, j int, msg string) {
			add(anyOfField(i, j), msg)
		})
	}
	c.Tenants.validate(add)
	if c.Handler == "" && c.State != StateRemoved {
		add("handler", "required")
	}
	for _, name := range EnforcedLimits {
		if _, given, valid := LimitInt(c.Limits, name); given && !valid {
			add("limits."+name, "want a positive whole number, got "+describeLimit(c.Limits[name]))
		}
	}
	if c.Routing.Mode != "" {
		if p := modeProblem(c.Routing.Mode); p != "" {
			add("routing.mode", p)
		}
	}
	if mc := c.Routing.MinConfidence; mc != 0 {
		if p := minConfidenceProblem(mc, fmt.Sprint(mc)); p != "" {
			add("routing.min_confidence", p)
		}
	}
	quotaProblems(c.Quota, add)
	return errors.Join(errs...)
}

func (s *Skill) validate(add func(field, msg string)) {
	if strings.TrimSpace(s.Name) == "" {
		add("skill.name", "required")
	}
	if strings.TrimSpace(s.Description) == "" {
		add("skill.description", "required")
	}
	// That a manifest file lists tags is the YAML format's rule (decode.go):
	// they help a card's reader, no decision reads them, and registries
	// built in Go without tags compile to bundles that must read back.
	for i, t := range s.Tags {
		if p := tagProblem(t); p != "" {
			add(yamlnode.Index("skill.tags", i), p)
		}
	}
	modesProblems(s.InputModes, func(i int, msg string) { add(yamlnode.Index("skill.inputModes", i), msg) })
	modesProblems(s.OutputModes, func(i int, msg string) { add(yamlnode.Index("skill.outputModes", i), msg) })
}

func (t Tenants) validate(add func(field, msg string)) {
	switch {
	case t.All:
	case t.List == nil:
		add("tenants", tenantsRequired)
	case len(t.List) == 0:
		add("tenants", "empty list: "+tenantsWant)
	}
	for i, v := range t.List {
		if p := tenantProblem(v); p != "" {
			add(yamlnode.Index("tenants", i), p)
		}
	}
}

// anyOfField names requires_any_of, alternative i, or scope j of it.
func anyOfField(i, j int) string {
	f := "requires_any_of"
	if i >= 0 {
		f = yamlnode.Index(f, i)
	}
	if j >= 0 {
		f = yamlnode.Index(f, j)
	}
	return f
}
