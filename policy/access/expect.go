package access

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/diag/yamlnode"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
)

// Expectations is an access expectations file: the guarantees a security
// team states about a deployment ("no caller without ops.admin may run a
// destructive skill"), checked against its compiled policy by
// `capgate access check`. It is the positive companion of a diff: a diff
// names every change, an expectation names what must hold whatever
// changes.
type Expectations struct {
	// CallersFile is the callers file the expectations' classes come from
	// (as the file wrote it; relative to the expectations file), "" when
	// the classes are derived from the registry or inline.
	CallersFile string
	// Callers are the classes given inline (callers: a list).
	Callers []CallerSpec
	List    []Expectation
}

// Expectation is one guarantee: for every selected caller class and every
// selected capability, each requirement of Must holds; and each selected
// capability is routed at least as carefully as RoutingAtLeast.
type Expectation struct {
	Name, Description string
	Callers           CallerSelector
	Capabilities      CapabilitySelector
	Must              []Requirement
	// RoutingAtLeast is "", confirm or explicit: the selected
	// capabilities' routing mode must be at least this careful.
	RoutingAtLeast manifest.RoutingMode
	// Line is where the expectation starts in its file.
	Line int
}

// Requirement is what must hold of a cell.
type Requirement string

// Requirements.
const (
	MustVisible  Requirement = "visible"  // in the class's card
	MustHidden   Requirement = "hidden"   // not in the class's card
	MustEntitled Requirement = "entitled" // the class may run it
	MustRefused  Requirement = "refused"  // the class may not run it
)

var requirements = []Requirement{MustVisible, MustHidden, MustEntitled, MustRefused}

// holds reports whether the cell meets r.
func (r Requirement) holds(c Cell) bool {
	switch r {
	case MustVisible:
		return c.Visible
	case MustHidden:
		return !c.Visible
	case MustEntitled:
		return c.Entitled
	case MustRefused:
		return !c.Entitled
	}
	return false
}

// CallerSelector picks caller classes. Every criterion given must hold (a
// list is any of its entries); none given selects every class. Claims
// names one concrete caller instead (a class of its own, named after the
// expectation) and excludes the other criteria.
type CallerSelector struct {
	Classes []string
	// Anonymous selects the anonymous (true) or authenticated (false)
	// classes; nil: both.
	Anonymous *bool
	// WithScopes: classes holding every one of these scopes;
	// WithoutScopes: classes lacking at least one of them.
	WithScopes, WithoutScopes []string
	Tenants                   []string
	Claims                    map[string]any
}

// CapabilitySelector picks capabilities: every criterion given must hold
// (a list is any of its entries); none given selects every capability.
type CapabilitySelector struct {
	IDs, Tags, Visibility, States []string
}

// Field names of the expectations format, in documentation order.
var (
	expectationsFields = []string{"callers", "expectations"}
	expectationFields  = []string{"name", "description", "callers", "capabilities", "must", "routing_at_least"}
	callerSelFields    = []string{"classes", "anonymous", "with_scopes", "without_scopes", "tenants", "claims"}
	capSelFields       = []string{"ids", "tags", "visibility", "states"}
)

// ParseExpectations reads an expectations file (YAML or JSON):
//
//	callers: callers.yaml        # optional: a callers file, or a list of {name, claims}
//	expectations:
//	  - name: only ops admins run destructive skills
//	    callers: {without_scopes: [ops.admin]}
//	    capabilities: {tags: [destructive]}
//	    must: [refused]
//	    routing_at_least: confirm
//
// Every problem is reported at once with file:line and, for a misspelt
// key or value, the word it likely means.
func ParseExpectations(file string, b []byte) (*Expectations, error) {
	var probs diag.Set
	root := yamlnode.Parse(file, b, &probs)
	if root == nil {
		return nil, probs.ErrOrNil()
	}
	p := expectParser{file: file, probs: &probs}
	out := p.doc(root)
	if err := probs.ErrOrNil(); err != nil {
		return nil, err
	}
	return out, nil
}

type expectParser struct {
	file  string
	probs *diag.Set
}

func (p expectParser) add(line int, field, format string, args ...any) {
	p.probs.Add(p.file, line, field, format, args...)
}

// fields indexes a mapping by key, reporting unknown keys with the key
// they likely mean.
func (p expectParser) fields(n *yaml.Node, path string, known []string) map[string]yamlnode.Pair {
	out := map[string]yamlnode.Pair{}
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "want a mapping (%s), got %s", strings.Join(known, ", "), yamlnode.KindName(n))
		return out
	}
	for _, f := range yamlnode.Pairs(p.file, n, path, p.probs) {
		if !slices.Contains(known, f.Key) {
			p.add(f.KeyN.Line, yamlnode.Join(path, f.Key), "%s", yamlnode.UnknownField(f.Key, known))
			continue
		}
		out[f.Key] = f
	}
	return out
}

func (p expectParser) doc(root *yaml.Node) *Expectations {
	out := &Expectations{}
	fs := p.fields(root, "", expectationsFields)
	if f, ok := fs["callers"]; ok {
		v := yamlnode.Resolve(f.Value)
		switch {
		case yamlnode.IsString(v) && v.Value != "":
			out.CallersFile = v.Value
		case v.Kind == yaml.SequenceNode:
			wrapped := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "callers"}, v}}
			b, err := yaml.Marshal(wrapped)
			if err == nil {
				var specs []CallerSpec
				if specs, err = ParseCallers(b); err == nil {
					out.Callers = specs
				}
			}
			if err != nil {
				p.add(f.Value.Line, "callers", "%v", err)
			}
		default:
			p.add(f.Value.Line, "callers", "want a callers file (a path) or a list of {name, description, claims}, got %s", yamlnode.KindName(v))
		}
	}
	f, ok := fs["expectations"]
	if !ok {
		p.add(root.Line, "expectations", "required: a list of expectations")
		return out
	}
	list := yamlnode.Resolve(f.Value)
	if list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
		p.add(f.Value.Line, "expectations", "want a non-empty list of expectations, got %s", yamlnode.KindName(list))
		return out
	}
	seen := map[string]int{}
	for i, n := range list.Content {
		e := p.expectation(n, yamlnode.Index("expectations", i))
		if e.Name != "" {
			if first, dup := seen[e.Name]; dup {
				p.add(n.Line, yamlnode.Index("expectations", i)+".name", "%q is already the name of expectations[%d]", e.Name, first)
			}
			seen[e.Name] = i
		}
		out.List = append(out.List, e)
	}
	return out
}

func (p expectParser) expectation(n *yaml.Node, path string) Expectation {
	e := Expectation{Line: n.Line}
	fs := p.fields(n, path, expectationFields)
	if yamlnode.Resolve(n).Kind != yaml.MappingNode {
		return e // fields reported it
	}
	if f, ok := fs["name"]; ok && yamlnode.IsString(f.Value) && strings.TrimSpace(yamlnode.Resolve(f.Value).Value) != "" {
		e.Name = yamlnode.Resolve(f.Value).Value
	} else {
		p.add(n.Line, path+".name", "required: a name the report shows when the expectation fails")
	}
	if f, ok := fs["description"]; ok {
		e.Description = p.str(f, path+".description")
	}
	if f, ok := fs["callers"]; ok {
		e.Callers = p.callers(f, path+".callers")
	}
	if f, ok := fs["capabilities"]; ok {
		e.Capabilities = p.capabilities(f, path+".capabilities")
	}
	if f, ok := fs["must"]; ok {
		for i, m := range p.strList(f, path+".must") {
			r := Requirement(m)
			if !slices.Contains(requirements, r) {
				p.add(yamlnode.Resolve(f.Value).Content[i].Line, yamlnode.Index(path+".must", i), "%q is not one of %s%s", m, join(requirements), diag.DidYouMean(m, strs(requirements)))
				continue
			}
			e.Must = append(e.Must, r)
		}
		for _, pair := range [][2]Requirement{{MustVisible, MustHidden}, {MustEntitled, MustRefused}} {
			if slices.Contains(e.Must, pair[0]) && slices.Contains(e.Must, pair[1]) {
				p.add(f.Value.Line, path+".must", "%s and %s contradict each other", pair[0], pair[1])
			}
		}
	}
	if f, ok := fs["routing_at_least"]; ok {
		v := p.str(f, path+".routing_at_least")
		switch m := manifest.RoutingMode(v); m {
		case manifest.RoutingConfirm, manifest.RoutingExplicit:
			e.RoutingAtLeast = m
		case "": // not a string: str reported it
		default:
			p.add(f.Value.Line, path+".routing_at_least", "%q is not one of confirm, explicit%s", v, diag.DidYouMean(v, []string{"confirm", "explicit"}))
		}
	}
	if len(e.Must) == 0 && e.RoutingAtLeast == "" {
		p.add(n.Line, path, "states nothing: give must (%s) or routing_at_least", join(requirements))
	}
	return e
}

func (p expectParser) callers(f yamlnode.Pair, path string) CallerSelector {
	var s CallerSelector
	fs := p.fields(f.Value, path, callerSelFields)
	if v, ok := fs["classes"]; ok {
		s.Classes = p.strList(v, path+".classes")
	}
	if v, ok := fs["anonymous"]; ok {
		if r := yamlnode.Resolve(v.Value); r.ShortTag() != yamlnode.TagBool {
			p.add(v.Value.Line, path+".anonymous", "want true or false, got %s", yamlnode.KindName(r))
		} else {
			b := r.Value == "true"
			s.Anonymous = &b
		}
	}
	if v, ok := fs["with_scopes"]; ok {
		s.WithScopes = p.strList(v, path+".with_scopes")
	}
	if v, ok := fs["without_scopes"]; ok {
		s.WithoutScopes = p.strList(v, path+".without_scopes")
	}
	if v, ok := fs["tenants"]; ok {
		s.Tenants = p.strList(v, path+".tenants")
	}
	if v, ok := fs["claims"]; ok {
		r := yamlnode.Resolve(v.Value)
		if r.Kind != yaml.MappingNode {
			p.add(v.Value.Line, path+".claims", "want a mapping of JWT claims, got %s", yamlnode.KindName(r))
		} else if m, ok := yamlnode.Value(p.file, r, path+".claims", p.probs); ok {
			s.Claims = m.(map[string]any)
		}
		if len(fs) > 1 {
			p.add(v.KeyN.Line, path+".claims", "names one caller: leave out the other criteria")
		}
	}
	return s
}

func (p expectParser) capabilities(f yamlnode.Pair, path string) CapabilitySelector {
	var s CapabilitySelector
	fs := p.fields(f.Value, path, capSelFields)
	if v, ok := fs["ids"]; ok {
		s.IDs = p.strList(v, path+".ids")
	}
	if v, ok := fs["tags"]; ok {
		s.Tags = p.strList(v, path+".tags")
	}
	if v, ok := fs["visibility"]; ok {
		s.Visibility = p.strList(v, path+".visibility")
		for _, x := range s.Visibility {
			if !slices.Contains([]string{"public", "extended", "internal"}, x) {
				p.add(v.Value.Line, path+".visibility", "%q is not one of public, extended, internal%s", x, diag.DidYouMean(x, []string{"public", "extended", "internal"}))
			}
		}
	}
	if v, ok := fs["states"]; ok {
		s.States = p.strList(v, path+".states")
		for _, x := range s.States {
			if !slices.Contains([]string{"preview", "ga", "deprecated", "removed"}, x) {
				p.add(v.Value.Line, path+".states", "%q is not one of preview, ga, deprecated, removed%s", x, diag.DidYouMean(x, []string{"preview", "ga", "deprecated", "removed"}))
			}
		}
	}
	return s
}

func (p expectParser) str(f yamlnode.Pair, path string) string {
	if !yamlnode.IsString(f.Value) {
		p.add(f.Value.Line, path, "want a string, got %s", yamlnode.KindName(f.Value))
		return ""
	}
	return yamlnode.Resolve(f.Value).Value
}

// strList reads a list of strings; a single string is a list of one.
func (p expectParser) strList(f yamlnode.Pair, path string) []string {
	n := yamlnode.Resolve(f.Value)
	if yamlnode.IsString(n) {
		return []string{n.Value}
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.add(f.Value.Line, path, "want a non-empty list of strings, got %s", yamlnode.KindName(n))
		return nil
	}
	var out []string
	for i, c := range n.Content {
		if !yamlnode.IsString(c) {
			p.add(c.Line, yamlnode.Index(path, i), "want a string, got %s", yamlnode.KindName(c))
			continue
		}
		out = append(out, yamlnode.Resolve(c).Value)
	}
	return out
}

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

func join[T ~string](vs []T) string { return strings.Join(strs(vs), ", ") }

// ClaimsClass is the name of the class an expectation's claims make.
func ClaimsClass(expectation string) string { return claimsPrefix + expectation }

const claimsPrefix = "claims of "

// ClaimsClasses are the classes the expectations' claims name, read with
// toCaller as the deployment reads a token's claims.
func (x *Expectations) ClaimsClasses(toCaller func(map[string]any) engine.Caller) []Class {
	var out []Class
	for _, e := range x.List {
		if e.Callers.Claims != nil {
			out = append(out, Class{Name: ClaimsClass(e.Name), Description: "the claims of expectation " + e.Name, Caller: toCaller(e.Callers.Claims)})
		}
	}
	return out
}

// Violation is one cell (or capability, for routing) where an expectation
// does not hold, with the rule that broke it.
type Violation struct {
	Class      string `json:"class,omitempty"` // "" for a routing requirement
	Capability string `json:"capability"`
	// Must is the requirement ("refused", "routed at least confirm").
	Must string `json:"must"`
	// Got is what the policy decided: the cell's level, or the routing mode.
	Got string `json:"got"`
	// Rule names what broke it: the policy rules that granted (or
	// refused) the cell, or the manifest's routing field with its file.
	Rule string `json:"rule"`
}

// String is "partner × purge-invoice-cache: must be refused, is entitled
// (auth.authenticated scope.held(ops.admin) state.ga tenant.any)".
func (v Violation) String() string {
	where := v.Capability
	if v.Class != "" {
		where = v.Class + " × " + v.Capability
	}
	return fmt.Sprintf("%s: must be %s, is %s (%s)", where, v.Must, v.Got, v.Rule)
}

// Outcome is one expectation's result.
type Outcome struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	Line        int         `json:"line"`
	Checks      int         `json:"checks"` // requirements checked: per cell, and per capability for routing
	Violations  []Violation `json:"violations"`
	// Problem is set when the expectation could not be checked as written
	// (its selectors match nothing): it fails.
	Problem string `json:"problem,omitempty"`
}

// Held reports whether the expectation held.
func (o Outcome) Held() bool { return len(o.Violations) == 0 && o.Problem == "" }

// Report is every expectation's outcome against one deployment.
type Report struct {
	Revision string
	// File is the expectations file, for the report (set by the caller).
	File       string
	Outcomes   []Outcome
	Provenance Provenance
}

// Failed counts the expectations that did not hold.
func (r *Report) Failed() int {
	n := 0
	for _, o := range r.Outcomes {
		if !o.Held() {
			n++
		}
	}
	return n
}

// Check evaluates the expectations against the matrix (which must include
// the expectations' claims classes) and the registry it was built from
// (for tags and routing modes). A class or capability id an expectation
// names that does not exist is an error: the file is wrong, not the
// deployment.
func Check(x *Expectations, m *Matrix, reg *manifest.Registry) (*Report, error) {
	r := &Report{Revision: m.Revision}
	var errs []string
	for _, e := range x.List {
		for _, name := range e.Callers.Classes {
			if !slices.ContainsFunc(m.Classes, func(c Class) bool { return c.Name == name }) {
				errs = append(errs, fmt.Sprintf("line %d: expectation %q: unknown caller class %q (known: %s)%s", e.Line, e.Name, name, strings.Join(classNames(m.Classes), ", "), diag.DidYouMean(name, classNames(m.Classes))))
			}
		}
		for _, id := range e.Capabilities.IDs {
			if _, ok := reg.Get(id); !ok {
				errs = append(errs, fmt.Sprintf("line %d: expectation %q: unknown capability %q%s", e.Line, e.Name, id, diag.DidYouMean(id, capIDs(m.Capabilities))))
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	for _, e := range x.List {
		r.Outcomes = append(r.Outcomes, check(e, m, reg))
	}
	return r, nil
}

func classNames(cs []Class) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		if !strings.HasPrefix(c.Name, claimsPrefix) {
			out = append(out, c.Name)
		}
	}
	return out
}

func capIDs(cs []Capability) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func check(e Expectation, m *Matrix, reg *manifest.Registry) Outcome {
	o := Outcome{Name: e.Name, Description: e.Description, Line: e.Line, Violations: []Violation{}}
	var rows, cols []int
	for i, c := range m.Classes {
		if e.Callers.selects(e.Name, c) {
			rows = append(rows, i)
		}
	}
	for j, c := range m.Capabilities {
		if mc, ok := reg.Get(c.ID); ok && e.Capabilities.selects(mc) {
			cols = append(cols, j)
		}
	}
	switch {
	case len(cols) == 0:
		o.Problem = "selects no capability: a guarantee about nothing holds vacuously (check the selector)"
		return o
	case len(rows) == 0 && len(e.Must) > 0:
		o.Problem = "selects no caller class: a guarantee about nobody holds vacuously (check the selector)"
		return o
	}
	for _, i := range rows {
		for _, j := range cols {
			cell := m.Cell(i, j)
			for _, req := range e.Must {
				o.Checks++
				if req.holds(cell) {
					continue
				}
				o.Violations = append(o.Violations, Violation{
					Class: m.Classes[i].Name, Capability: m.Capabilities[j].ID,
					Must: string(req), Got: string(cell.Level()), Rule: brokenBy(req, cell),
				})
			}
		}
	}
	if e.RoutingAtLeast != "" {
		for _, j := range cols {
			o.Checks++
			c := m.Capabilities[j]
			got := manifest.RoutingMode(c.RoutingMode())
			if modeRank(got) >= modeRank(e.RoutingAtLeast) {
				continue
			}
			rule := "routing.mode " + string(got)
			if mc, ok := reg.Get(c.ID); ok {
				if mc.Routing.Mode == "" {
					rule = "no routing.mode (auto is the default)"
				}
				if mc.Source.File != "" {
					rule += " in " + mc.Source.File
				}
			}
			o.Violations = append(o.Violations, Violation{Capability: c.ID, Must: "routed at least " + string(e.RoutingAtLeast), Got: "routed " + string(got), Rule: rule})
		}
	}
	return o
}

// brokenBy names the reasons that broke req: the grants when the cell
// grants what must be refused or hidden, the refusals when it refuses what
// must be granted.
func brokenBy(req Requirement, c Cell) string {
	reasons, effect := c.VisibleReasons, "grant"
	switch req {
	case MustEntitled:
		reasons, effect = c.EntitledReasons, "refuse"
	case MustRefused:
		reasons = c.EntitledReasons
	case MustVisible:
		effect = "refuse"
	}
	var out []string
	for _, r := range reasons {
		if r.Effect == effect {
			out = append(out, r.String())
		}
	}
	verb := "granted by "
	if effect == "refuse" {
		verb = "refused by "
	}
	return verb + strings.Join(out, " ")
}

// modeRank orders routing modes from least to most careful.
func modeRank(m manifest.RoutingMode) int {
	return slices.Index(manifest.RoutingModes, m)
}

func (s CallerSelector) selects(expectation string, c Class) bool {
	if s.Claims != nil {
		return c.Name == ClaimsClass(expectation)
	}
	if strings.HasPrefix(c.Name, claimsPrefix) {
		return false // another expectation's concrete caller
	}
	if len(s.Classes) > 0 && !slices.Contains(s.Classes, c.Name) {
		return false
	}
	if s.Anonymous != nil && *s.Anonymous == c.Caller.Authenticated {
		return false
	}
	for _, sc := range s.WithScopes {
		if !slices.Contains(c.Caller.Scopes, sc) {
			return false
		}
	}
	if len(s.WithoutScopes) > 0 && !slices.ContainsFunc(s.WithoutScopes, func(sc string) bool { return !slices.Contains(c.Caller.Scopes, sc) }) {
		return false
	}
	if len(s.Tenants) > 0 && !slices.Contains(s.Tenants, c.Caller.Tenant) {
		return false
	}
	return true
}

func (s CapabilitySelector) selects(c *manifest.Capability) bool {
	if len(s.IDs) > 0 && !slices.Contains(s.IDs, c.ID) {
		return false
	}
	if len(s.Tags) > 0 && !slices.ContainsFunc(s.Tags, func(t string) bool { return slices.Contains(c.Skill.Tags, t) }) {
		return false
	}
	if len(s.Visibility) > 0 && !slices.Contains(s.Visibility, string(c.Visibility)) {
		return false
	}
	if len(s.States) > 0 && !slices.Contains(s.States, string(c.State)) {
		return false
	}
	return true
}
