package access

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
)

// Field is one named fact of a deployment a diff can name as a cause:
// a manifest field of a capability, or a field of the config.
type Field struct {
	Name, Value string
}

// Facts are the fields of one deployment a diff compares: per capability
// its manifest fields, and the config's (issuers, claim names, preview
// settings, deny modules).
type Facts struct {
	Capabilities map[string][]Field
	Config       []Field
	auth         bool // AddAuth was called
	// runs are how each capability runs (routing, tags, limits): compared
	// for loosened guards.
	runs map[string]runFacts
}

// authFields are the fields AddAuth adds: compared only when both sides
// have them (a bundle carries no issuers or claim names).
var authFields = []string{fieldIssuers, fieldScopesClaim, fieldTenantClaim}

// config is the config fields to compare with other's.
func (f *Facts) config(other *Facts) []Field {
	if f.auth && other.auth {
		return f.Config
	}
	return slices.DeleteFunc(slices.Clone(f.Config), func(x Field) bool { return slices.Contains(authFields, x.Name) })
}

// Manifest field names, as in the manifest format. A new access-relevant
// manifest field is one more entry in capabilityFields.
const (
	fieldState      = "state"
	fieldVisibility = "visibility"
	fieldScopes     = "requires_scopes"
	fieldAnyOf      = "requires_any_of"
	fieldTenants    = "tenants"
	fieldReplacedBy = "replaced_by"
	fieldHandler    = "handler"
	fieldLimits     = "limits"
	fieldOwner      = "owner"
	fieldRouting    = "routing"
)

// Config field names: the config's keys, and "deny module NAME" for the
// deny modules of package capgate.deny.NAME.
const (
	fieldIssuers         = "auth.issuers"
	fieldScopesClaim     = "auth.scopes_claim"
	fieldTenantClaim     = "auth.tenant_claim"
	fieldPreviewScope    = "auth.preview_scope"
	fieldPreviewTenants  = "auth.preview_tenants"
	fieldAnonymousPublic = "auth.anonymous_public"
	denyModulePrefix     = "deny module "
)

func capabilityFields(c *manifest.Capability) []Field {
	return []Field{
		{fieldState, string(c.State)},
		{fieldVisibility, string(c.Visibility)},
		{fieldScopes, list(c.RequiresScopes)},
		{fieldAnyOf, anyOf(c.RequiresAnyOf)},
		{fieldTenants, tenants(c.Tenants)},
		{fieldReplacedBy, c.ReplacedBy},
		{fieldHandler, c.Handler},
		{fieldLimits, jsonValue(c.Limits)},
		{fieldOwner, c.Owner},
		{fieldRouting, routing(c.Routing)},
	}
}

// routing is a capability's routing policy as the diff shows it: its mode,
// and its own threshold when it has one.
func routing(r manifest.Routing) string {
	if r.MinConfidence == 0 {
		return string(r.EffectiveMode())
	}
	return fmt.Sprintf("%s (min_confidence %g)", r.EffectiveMode(), r.MinConfidence)
}

func list(ss []string) string { return "[" + strings.Join(ss, " ") + "]" }

// anyOf is requires_any_of as "[a] or [b c]", "" when there is none.
func anyOf(alts [][]string) string {
	parts := make([]string, len(alts))
	for i, a := range alts {
		parts[i] = list(a)
	}
	return strings.Join(parts, " or ")
}

func tenants(t manifest.Tenants) string {
	if t.All {
		return `"*"`
	}
	return list(t.List)
}

func jsonValue(v map[string]any) string {
	if len(v) == 0 {
		return ""
	}
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return "?"
	}
	return string(b)
}

var denyPackage = regexp.MustCompile(`(?m)^package\s+capgate\.deny\.([A-Za-z0-9_]+)`)

// FactsOf reads the facts of a snapshot: its manifests, its policy
// settings and its deny modules (by package, each a hash of its sources).
// The auth fields a snapshot does not carry are added by AddAuth.
func FactsOf(s *compile.Snapshot) *Facts {
	f := &Facts{Capabilities: map[string][]Field{}, runs: map[string]runFacts{}}
	for _, c := range s.Registry.All() {
		f.Capabilities[c.ID] = capabilityFields(&c)
		f.runs[c.ID] = runFactsOf(&c)
	}
	f.Config = append(f.Config,
		Field{fieldPreviewScope, s.Settings.PreviewScope},
		Field{fieldPreviewTenants, list(s.Settings.PreviewTenants)},
		Field{fieldAnonymousPublic, fmt.Sprint(s.Settings.AnonymousPublic)})
	sources := map[string][]string{}
	for _, p := range slices.Sorted(maps.Keys(s.Modules)) {
		if !strings.HasPrefix(p, compile.ExtraDir) {
			continue
		}
		name := strings.TrimPrefix(p, compile.ExtraDir)
		if m := denyPackage.FindStringSubmatch(s.Modules[p]); m != nil {
			name = m[1]
		}
		sources[name] = append(sources[name], s.Modules[p])
	}
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		sum := sha256.Sum256([]byte(strings.Join(sources[name], "\x00")))
		f.Config = append(f.Config, Field{denyModulePrefix + name, "rego sha256:" + hex.EncodeToString(sum[:6])})
	}
	return f
}

// AddAuth adds the auth fields of a config the snapshot does not carry:
// issuers (with their audiences, tenants and scopes) and claim names.
// A nil Facts stays nil.
func (f *Facts) AddAuth(a config.Auth) {
	if f == nil {
		return
	}
	f.auth = true
	issuers := make([]string, 0, len(a.Issuers))
	for _, i := range a.Issuers {
		s := i.Issuer + " audiences " + list(i.Audiences)
		if len(i.Tenants) > 0 {
			s += " tenants " + list(i.Tenants)
		}
		if len(i.Scopes) > 0 {
			s += " scopes " + list(i.Scopes)
		}
		issuers = append(issuers, s)
	}
	slices.Sort(issuers)
	f.Config = append(f.Config,
		Field{fieldIssuers, strings.Join(issuers, "; ")},
		Field{fieldScopesClaim, a.ScopesClaim},
		Field{fieldTenantClaim, a.TenantClaim})
}

// FieldChange is one field that differs between the two sides: of a
// capability (Capability set) or of the config (Capability empty). An
// absent field (a capability or deny module one side lacks) has Base or
// Head "".
type FieldChange struct {
	Capability string `json:"capability,omitempty"`
	Field      string `json:"field"`
	Base       string `json:"base"`
	Head       string `json:"head"`
}

// String is "field base → head", with "(none)" for an empty side; a
// capability or deny module one side lacks is "added" or "removed".
func (c FieldChange) String() string {
	if c.Field == "capability" || strings.HasPrefix(c.Field, denyModulePrefix) {
		switch {
		case c.Base == "":
			return c.Field + " added (" + c.Head + ")"
		case c.Head == "":
			return c.Field + " removed (was " + c.Base + ")"
		case c.Field != "capability":
			return c.Field + " changed (" + c.Base + " → " + c.Head + ")"
		}
	}
	return c.Field + " " + orNone(c.Base) + " → " + orNone(c.Head)
}

// Cause is the change named with its place: "purge-invoice-cache:
// requires_scopes [ops.admin] → []", or "config: auth.anonymous_public
// false → true".
func (c FieldChange) Cause() string {
	where := c.Capability
	if where == "" {
		where = "config"
	}
	return where + ": " + c.String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// compareFields returns the fields of a and b that differ, in a's order
// (then b's new ones).
func compareFields(capability string, a, b []Field) []FieldChange {
	var out []FieldChange
	seen := map[string]bool{}
	value := func(fs []Field, name string) string {
		for _, f := range fs {
			if f.Name == name {
				return f.Value
			}
		}
		return ""
	}
	for _, fs := range [][]Field{a, b} {
		for _, f := range fs {
			if seen[f.Name] {
				continue
			}
			seen[f.Name] = true
			if x, y := value(a, f.Name), value(b, f.Name); x != y {
				out = append(out, FieldChange{Capability: capability, Field: f.Name, Base: x, Head: y})
			}
		}
	}
	return out
}

// families maps a reason code's family (its text up to the first dot,
// or the whole deny.NAME) to the fields that decide it.
var families = map[string]struct{ capability, config []string }{
	"state":      {[]string{fieldState, fieldReplacedBy}, []string{fieldPreviewScope, fieldPreviewTenants}},
	"visibility": {[]string{fieldVisibility}, nil},
	"scope":      {[]string{fieldScopes, fieldAnyOf}, []string{fieldScopesClaim}},
	"tenant":     {[]string{fieldTenants}, []string{fieldTenantClaim}},
	"auth":       {nil, []string{fieldAnonymousPublic, fieldIssuers}},
}

func family(rule string) string {
	if strings.HasPrefix(rule, "deny.") {
		return rule
	}
	f, _, _ := strings.Cut(rule, ".")
	return f
}

// attribute names the changes that moved a cell from "from" to "to": the
// fields deciding the families of the refusals "from" had and "to" lacks,
// and of the grants "to" has and "from" lacked. A capability one side
// lacks is its own cause; when no changed field decides those families
// (a deny module reading a limit), every change of the capability, else
// of the config, is named.
func attribute(from, to Cell, capChange *CapabilityChange, capFields, config []FieldChange) []FieldChange {
	if capChange != nil && capChange.Kind != Changed {
		return []FieldChange{capChange.asField()}
	}
	fams := map[string]bool{}
	has := func(rs []engine.Reason, r engine.Reason) bool { return slices.Contains(rs, r) }
	for _, pair := range [][2][]engine.Reason{{from.VisibleReasons, to.VisibleReasons}, {from.EntitledReasons, to.EntitledReasons}} {
		for _, r := range pair[0] {
			if r.Effect == "refuse" && !has(pair[1], r) {
				fams[family(r.Rule)] = true
			}
		}
		for _, r := range pair[1] {
			if r.Effect == "grant" && !has(pair[0], r) {
				fams[family(r.Rule)] = true
			}
		}
	}
	var out []FieldChange
	for _, c := range capFields {
		for fam := range fams {
			if slices.Contains(families[fam].capability, c.Field) {
				out = append(out, c)
				break
			}
		}
	}
	for _, c := range config {
		for fam := range fams {
			if slices.Contains(families[fam].config, c.Field) || c.Field == denyModulePrefix+strings.TrimPrefix(fam, "deny.") {
				out = append(out, c)
				break
			}
		}
	}
	switch {
	case len(out) > 0:
		return out
	case len(capFields) > 0:
		return capFields
	}
	return config
}

func (c CapabilityChange) asField() FieldChange {
	f := FieldChange{Capability: c.ID, Field: "capability"}
	if c.Base != nil {
		f.Base = c.Base.Visibility + ", " + c.Base.State
	}
	if c.Head != nil {
		f.Head = c.Head.Visibility + ", " + c.Head.State
	}
	return f
}

// Risk ranks a gained cell: a gain that lets a class run something before
// one that only shows it; an internal or extended capability before a
// public one; the anonymous class, then classes of every authenticated
// caller (no scopes, no tenant), before narrower ones.
type Risk struct {
	Runs       bool   `json:"runs"`
	Visibility string `json:"visibility"`
	// Callers is "anonymous", "every authenticated caller" or "some
	// callers".
	Callers string `json:"callers"`
}

// String is "runs, internal, every authenticated caller".
func (r Risk) String() string {
	verb := "sees"
	if r.Runs {
		verb = "runs"
	}
	return verb + ", " + r.Visibility + ", " + r.Callers
}

const (
	callersAnonymous = "anonymous"
	callersAll       = "every authenticated caller"
	callersSome      = "some callers"
	callersNone      = "no class reviewed"
)

func riskOf(c CellChange, class Class, visibility string) Risk {
	r := Risk{Runs: c.Head.Entitled && !c.Base.Entitled, Visibility: visibility, Callers: callersSome}
	switch {
	case !class.Caller.Authenticated:
		r.Callers = callersAnonymous
	case len(class.Caller.Scopes) == 0 && class.Caller.Tenant == "" && class.Caller.Subject == "":
		r.Callers = callersAll
	}
	return r
}

// compareRisk orders riskier first.
func compareRisk(a, b Risk) int {
	rank := func(r Risk) [3]int {
		var out [3]int
		if !r.Runs {
			out[0] = 1
		}
		switch r.Visibility {
		case "internal", "extended":
		case "public":
			out[1] = 1
		default:
			out[1] = 2
		}
		switch r.Callers {
		case callersAnonymous:
		case callersAll:
			out[2] = 1
		default:
			out[2] = 2
		}
		return out
	}
	x, y := rank(a), rank(b)
	return slices.Compare(x[:], y[:])
}

// GainGroup is the cells one capability gained, riskiest first, and the
// changes that caused them.
type GainGroup struct {
	Capability string
	Owner      string
	Change     *CapabilityChange // nil when the capability itself did not change
	Causes     []FieldChange
	Gains      []CellChange
}

// Runs counts the classes that can now run the capability.
func (g GainGroup) Runs() int {
	n := 0
	for _, c := range g.Gains {
		if c.Risk.Runs {
			n++
		}
	}
	return n
}

// GainGroups groups the gained cells by capability, the group with the
// riskiest gain first (then by id).
func (d *Diff) GainGroups() []GainGroup {
	var groups []GainGroup
	index := map[string]int{}
	for _, c := range d.Gained {
		i, ok := index[c.Capability]
		if !ok {
			i = len(groups)
			index[c.Capability] = i
			g := GainGroup{Capability: c.Capability, Owner: d.owners[c.Capability]}
			for k := range d.Capabilities {
				if d.Capabilities[k].ID == c.Capability {
					g.Change = &d.Capabilities[k]
				}
			}
			groups = append(groups, g)
		}
		g := &groups[i]
		g.Gains = append(g.Gains, c)
		for _, cause := range c.Causes {
			if !slices.Contains(g.Causes, cause) {
				g.Causes = append(g.Causes, cause)
			}
		}
	}
	// d.Gained is already in risk order within and across groups.
	return groups
}

// rankGains sorts gained cells: by capability, the capability with the
// riskiest gain first; within one, riskiest first, then class order.
func rankGains(gains []CellChange, classOrder map[string]int) {
	worst := map[string]Risk{}
	for _, c := range gains {
		if w, ok := worst[c.Capability]; !ok || compareRisk(c.Risk, w) < 0 {
			worst[c.Capability] = c.Risk
		}
	}
	slices.SortStableFunc(gains, func(a, b CellChange) int {
		return cmp.Or(
			compareRisk(worst[a.Capability], worst[b.Capability]),
			strings.Compare(a.Capability, b.Capability),
			compareRisk(a.Risk, b.Risk),
			cmp.Compare(classOrder[a.Class], classOrder[b.Class]))
	})
}
