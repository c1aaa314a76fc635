package manifest

import (
	"fmt"
	"mime"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/diag/yamlnode"
)

// IDPattern is the form every capability id must have.
const IDPattern = `^[a-z0-9][a-z0-9.-]{0,62}$`

var idRE = regexp.MustCompile(IDPattern)

// topTable is the manifest format's top-level fields, in decoding order:
// a field comes after the fields its rules read (replaced_by and handler
// read state; requires_any_of reads requires_scopes; enforced_limits
// merges into limits). decodeCapability is this table run over a mapping,
// as the operation table drives the protocol. A new field is a row here,
// a field of Capability, and its value rules in validate.go.
var topTable = []field{
	{name: "id", doc: 0, required: always("required"), decode: decodeID},
	{name: "state", doc: 1, required: always(stateRequired), decode: decodeState},
	{name: "visibility", doc: 2, required: always(visibilityRequired), decode: decodeVisibility},
	{name: "replaced_by", doc: 3, required: replacedByRequired, decode: decodeReplacedBy},
	{name: "skill", doc: 4, required: always("required"), decode: func(d *decoder, f yamlnode.Pair, c *Capability) { c.Skill = d.skill(f) }},
	{name: "requires_scopes", doc: 5, decode: decodeScopes},
	{name: "requires_any_of", doc: 6, decode: func(d *decoder, f yamlnode.Pair, c *Capability) {
		c.Source.AnyOfLine = f.Value.Line
		c.RequiresAnyOf = d.anyOf(f, c.RequiresScopes)
	}},
	{name: "tenants", doc: 7, required: always(tenantsRequired), decode: func(d *decoder, f yamlnode.Pair, c *Capability) { c.Tenants = d.tenants(f) }},
	{name: "handler", doc: 8, required: handlerRequired, decode: decodeHandler},
	{name: "limits", doc: 10, decode: decodeLimits},
	{name: "enforced_limits", doc: 9, decode: func(d *decoder, f yamlnode.Pair, c *Capability) { c.Limits = d.enforcedLimits(f, c.Limits) }},
	{name: "owner", doc: 11, decode: func(d *decoder, f yamlnode.Pair, c *Capability) {
		o, _ := d.str(f, "owner")
		c.Owner = d.s.str(o)
	}},
	{name: "routing", doc: 12, decode: func(d *decoder, f yamlnode.Pair, c *Capability) { c.Routing = d.routing(f) }},
	{name: "quota", doc: 13, decode: func(d *decoder, f yamlnode.Pair, c *Capability) { c.Quota = d.quota(f) }},
}

// field is one row of topTable.
type field struct {
	name string // the key in a manifest
	// doc is the field's place in documentation order: the order a manifest
	// is written in and "known fields are ..." lists them.
	doc int
	// required says what is wrong when the field is absent, given the
	// fields decoded before it; "" (or a nil func) when it may be absent.
	required func(c *Capability) string
	// decode reads the field's value into c, reporting each problem.
	decode func(d *decoder, f yamlnode.Pair, c *Capability)
}

func always(msg string) func(*Capability) string {
	return func(*Capability) string { return msg }
}

func replacedByRequired(c *Capability) string {
	if c.State == StateRemoved {
		return replacedByMissing
	}
	return ""
}

func handlerRequired(c *Capability) string {
	if c.State == StateRemoved {
		return ""
	}
	return "required"
}

// docOrder is the names of table's fields in documentation order.
func docOrder(table []field) []string {
	out := make([]string, len(table))
	for _, f := range table {
		out[f.doc] = f.name
	}
	return out
}

// Field names of the manifest format, in documentation order.
var (
	topFields     = docOrder(topTable)
	routingFields = []string{"mode", "min_confidence"}
	skillFields   = []string{"name", "description", "tags", "examples", "inputModes", "outputModes", "data_schemas"}
	states        = []State{StatePreview, StateGA, StateDeprecated, StateRemoved}
	visibility    = []Visibility{VisibilityPublic, VisibilityExtended, VisibilityInternal}
)

// parsed is one decoded manifest with the lines registry checks need
// (0 when the field is absent).
type parsed struct {
	cap    Capability
	prefix string // field prefix, "[3]." inside a JSON array
	// Lines of the values of id, replaced_by and handler.
	idLine, replacedByLine, handlerLine int
}

// decoder turns one manifest node into a Capability, recording every
// problem it finds.
type decoder struct {
	file   string
	prefix string
	probs  *diag.Set
	lines  map[string]int // field -> line of its value
	s      *session
}

func (d *decoder) add(line int, field, format string, args ...any) {
	d.probs.Add(d.file, line, d.prefix+field, format, args...)
}

// missing reports a required field that is absent, unless an unknown key of
// the same mapping was already reported as its misspelling ("visiblity:
// unknown field; did you mean visibility?"): one message per mistake.
func (d *decoder) missing(line int, field, format string, args ...any) {
	if d.s.meant[field] {
		return
	}
	d.add(line, field, format, args...)
}

// warn records a finding that does not stop the manifest from loading.
func (d *decoder) warn(line int, field, format string, args ...any) {
	d.s.warnings.Add(d.file, line, d.prefix+field, format, args...)
}

func decodeCapability(file, prefix string, n *yaml.Node, probs *diag.Set, s *session) parsed {
	clear(s.lines)
	clear(s.meant)
	d := &decoder{file: file, prefix: prefix, probs: probs, lines: s.lines, s: s}
	p := parsed{prefix: prefix}
	// requires_scopes may be left out: it is then the empty list.
	p.cap = Capability{RequiresScopes: []string{}, Source: Source{File: file, Line: n.Line}}
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.MappingNode {
		probs.Add(file, n.Line, strings.TrimSuffix(prefix, "."), "want a mapping (one capability manifest), got %s", yamlnode.KindName(n))
		return p
	}
	fields := d.fields(n, "", topFields)
	for _, row := range topTable {
		if f, ok := fields[row.name]; ok {
			row.decode(d, f, &p.cap)
		} else if row.required != nil {
			if msg := row.required(&p.cap); msg != "" {
				d.missing(n.Line, row.name, "%s", msg)
			}
		}
	}
	p.idLine, p.replacedByLine, p.handlerLine = d.lines["id"], d.lines["replaced_by"], d.lines["handler"]
	return p
}

func decodeID(d *decoder, f yamlnode.Pair, c *Capability) {
	v, ok := d.nonBlank(f, "id", "required")
	if !ok {
		return
	}
	if msg := idProblem(v); msg != "" {
		d.add(f.Value.Line, "id", "%s", msg)
		return
	}
	c.ID = within(d.file, v)
}

func decodeState(d *decoder, f yamlnode.Pair, c *Capability) {
	if v, ok := d.nonBlank(f, "state", stateRequired); ok {
		if msg := stateProblem(State(v)); msg != "" {
			d.add(f.Value.Line, "state", "%s", msg)
		}
		c.State = State(d.s.str(v))
	}
}

func decodeVisibility(d *decoder, f yamlnode.Pair, c *Capability) {
	if v, ok := d.nonBlank(f, "visibility", visibilityRequired); ok {
		if msg := visibilityProblem(Visibility(v)); msg != "" {
			d.add(f.Value.Line, "visibility", "%s", msg)
		}
		c.Visibility = Visibility(d.s.str(v))
	}
}

func decodeReplacedBy(d *decoder, f yamlnode.Pair, c *Capability) {
	v, ok := d.str(f, "replaced_by")
	if !ok {
		return
	}
	c.ReplacedBy = v
	if v == "" && c.State == StateRemoved {
		d.missing(f.Value.Line, "replaced_by", replacedByMissing)
	}
}

func decodeScopes(d *decoder, f yamlnode.Pair, c *Capability) {
	c.Source.ScopesLine = f.Value.Line
	list, ok := d.strList(f, "requires_scopes")
	if !ok {
		return
	}
	for i, s := range list {
		if msg := scopeProblem(s); msg != "" {
			d.add(yamlnode.Resolve(f.Value).Content[i].Line, yamlnode.Index("requires_scopes", i), "%s", msg)
		}
	}
	c.RequiresScopes = list
}

func decodeHandler(d *decoder, f yamlnode.Pair, c *Capability) {
	h, ok := d.str(f, "handler")
	if ok && h == "" && c.State != StateRemoved {
		d.add(f.Value.Line, "handler", "required")
	}
	c.Handler = d.s.str(h)
}

func decodeLimits(d *decoder, f yamlnode.Pair, c *Capability) {
	v := yamlnode.Resolve(f.Value)
	if v.Kind != yaml.MappingNode {
		d.add(f.Value.Line, "limits", "want a mapping, got %s", yamlnode.KindName(v))
		return
	}
	if m, ok := yamlnode.Value(d.file, v, d.prefix+"limits", d.probs); ok {
		c.Limits = m.(map[string]any)
		d.legacyLimits(v, c.Limits)
	}
}

// anyOf reads requires_any_of: a list of at least two alternatives, each a
// non-empty list of scopes (the caller needs every scope of one of them,
// besides requires_scopes). An alternative that requires_scopes already
// holds in full would make the others pointless, and a repeated one is a
// copy-paste slip: both are errors.
func (d *decoder) anyOf(f yamlnode.Pair, all []string) [][]string {
	const field = "requires_any_of"
	const want = "want a list of alternatives, each a list of scopes (requires_any_of: [[fleet.admin], [fleet.dispatch, fleet.shift_lead]])"
	n := yamlnode.Resolve(f.Value)
	if n.Kind != yaml.SequenceNode {
		d.add(f.Value.Line, field, "%s, got %s", want, yamlnode.KindName(n))
		return nil
	}
	alts := make([][]string, len(n.Content))
	for i, c := range n.Content {
		if len(alts) < 2 {
			break // no choice: anyOfProblems says so, whatever it holds
		}
		entry := yamlnode.Index(field, i)
		if r := yamlnode.Resolve(c); r.Kind != yaml.SequenceNode {
			d.add(c.Line, entry, "want a list of scopes (an alternative), got %s", yamlnode.KindName(r))
			continue
		}
		if list, ok := d.strList(yamlnode.Pair{KeyN: f.KeyN, Value: c}, entry); ok {
			alts[i] = list // never nil: an empty alternative stays empty
		}
	}
	return anyOfProblems(alts, all, func(i, j int, msg string) {
		line := n.Line
		switch {
		case j >= 0:
			line = yamlnode.Resolve(n.Content[i]).Content[j].Line
		case i >= 0:
			line = n.Content[i].Line
		}
		d.add(line, anyOfField(i, j), "%s", msg)
	})
}

// enforcedLimits reads enforced_limits: the limits capgate enforces itself,
// a closed vocabulary (EnforcedLimits) of positive whole numbers, so that a
// misspelt name is an error rather than a limit nobody enforces. They are
// merged into limits, which is what the policy hands to enforcement; a
// name given in both is an error.
func (d *decoder) enforcedLimits(f yamlnode.Pair, limits map[string]any) map[string]any {
	n := yamlnode.Resolve(f.Value)
	if n.Kind != yaml.MappingNode {
		d.add(f.Value.Line, "enforced_limits", "want a mapping of %s, got %s", strings.Join(EnforcedLimits, ", "), yamlnode.KindName(n))
		return limits
	}
	for _, p := range yamlnode.Pairs(d.file, n, d.prefix+"enforced_limits", d.probs) {
		field := "enforced_limits." + p.Key
		if !slices.Contains(EnforcedLimits, p.Key) {
			msg := "not a limit capgate enforces"
			if s, ok := diag.Suggest(p.Key, EnforcedLimits); ok {
				msg += "; did you mean " + s + "?"
			} else {
				msg += " (known: " + strings.Join(EnforcedLimits, ", ") + "); a limit for the handler to enforce goes under limits"
			}
			d.add(p.KeyN.Line, field, "%s", msg)
			continue
		}
		v, ok := yamlnode.Value(d.file, p.Value, d.prefix+field, d.probs)
		if !ok {
			continue
		}
		if _, _, valid := LimitInt(map[string]any{p.Key: v}, p.Key); !valid {
			d.add(p.Value.Line, field, "want a positive whole number, got %s", describeLimit(v))
			continue
		}
		if _, dup := limits[p.Key]; dup {
			d.add(p.KeyN.Line, field, "also given as limits.%s: keep it under enforced_limits only", p.Key)
			continue
		}
		if limits == nil {
			limits = map[string]any{}
		}
		limits[p.Key] = v
	}
	return limits
}

// legacyLimits checks the free-form limits: an enforced limit written there
// (the spelling before enforced_limits) is still enforced, with a
// deprecation warning, and must be a positive whole number; a name that is
// one edit away from an enforced limit (max_part) is an error, since
// capgate would silently enforce nothing.
func (d *decoder) legacyLimits(n *yaml.Node, limits map[string]any) {
	for _, p := range yamlnode.Pairs(d.file, n, d.prefix+"limits", &diag.Set{}) {
		field := "limits." + p.Key
		if slices.Contains(EnforcedLimits, p.Key) {
			if _, _, valid := LimitInt(limits, p.Key); !valid {
				d.add(p.Value.Line, field, "want a positive whole number, got %s", describeLimit(limits[p.Key]))
				continue
			}
			d.warn(p.KeyN.Line, field, "deprecated spelling: capgate enforces %s, now written under enforced_limits (enforced_limits: {%s: %s}); it is still enforced", p.Key, p.Key, yamlnode.Resolve(p.Value).Value)
			continue
		}
		if s, ok := diag.Close(p.Key, EnforcedLimits, 1); ok {
			d.add(p.KeyN.Line, field, "not a limit capgate enforces; did you mean enforced_limits.%s? (a limit for the handler to enforce needs a name that is not a misspelling of one capgate enforces)", s)
		}
	}
}

// routing reads the routing policy: {mode: auto|confirm|explicit,
// min_confidence: a number in (0, 1]}.
func (d *decoder) routing(f yamlnode.Pair) Routing {
	var r Routing
	n := yamlnode.Resolve(f.Value)
	if n.Kind != yaml.MappingNode {
		d.add(f.Value.Line, "routing", "want a mapping {mode: %s, min_confidence: 0..1}, got %s", strings.Join(modeNames(), " | "), yamlnode.KindName(n))
		return r
	}
	fields := d.fields(n, "routing", routingFields)
	if m, ok := fields["routing.mode"]; ok {
		if v, ok := d.str(m, "routing.mode"); ok {
			if msg := modeProblem(RoutingMode(v)); msg != "" {
				d.add(m.Value.Line, "routing.mode", "%s", msg)
			} else {
				r.Mode = RoutingMode(v)
			}
		}
	}
	if m, ok := fields["routing.min_confidence"]; ok {
		v := yamlnode.Resolve(m.Value)
		var x float64
		if v.Kind != yaml.ScalarNode || (v.ShortTag() != yamlnode.TagFloat && v.ShortTag() != yamlnode.TagInt) || v.Decode(&x) != nil {
			d.add(m.Value.Line, "routing.min_confidence", "want a number in (0, 1], got %s", yamlnode.KindName(v))
		} else if msg := minConfidenceProblem(x, v.Value); msg != "" {
			d.add(m.Value.Line, "routing.min_confidence", "%s", msg)
		} else {
			r.MinConfidence = x
		}
	}
	return r
}

func modeNames() []string {
	out := make([]string, len(RoutingModes))
	for i, m := range RoutingModes {
		out[i] = string(m)
	}
	return out
}

func describeLimit(v any) string {
	switch v.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

func (d *decoder) skill(f yamlnode.Pair) Skill {
	var s Skill
	n := yamlnode.Resolve(f.Value)
	if n.Kind != yaml.MappingNode {
		d.add(f.Value.Line, "skill", "want a mapping, got %s", yamlnode.KindName(n))
		return s
	}
	fields := d.fields(n, "skill", skillFields)
	line := f.KeyN.Line
	s.Name, _ = d.requiredString(fields, line, "skill.name", "required")
	s.Description, _ = d.requiredString(fields, line, "skill.description", "required")
	if t, ok := fields["skill.tags"]; ok {
		if list, ok := d.strList(t, "skill.tags"); ok {
			if len(list) == 0 {
				d.add(t.Value.Line, "skill.tags", "must list at least one tag")
			}
			for i, v := range list {
				if msg := tagProblem(v); msg != "" {
					d.add(yamlnode.Resolve(t.Value).Content[i].Line, yamlnode.Index("skill.tags", i), "%s", msg)
				}
			}
			s.Tags = list
		}
	} else {
		d.missing(line, "skill.tags", "required")
	}
	if e, ok := fields["skill.examples"]; ok {
		s.Examples, _ = d.strList(e, "skill.examples")
	}
	s.InputModes = d.modes(fields, "skill.inputModes")
	s.OutputModes = d.modes(fields, "skill.outputModes")
	if f, ok := fields["skill.data_schemas"]; ok {
		s.DataSchemas = d.dataSchemas(f)
	}
	return s
}

// dataSchemas reads skill.data_schemas: a non-empty list of JSON Schemas,
// each compiled now so that a broken schema is a load error naming it.
func (d *decoder) dataSchemas(f yamlnode.Pair) []DataSchema {
	const field = "skill.data_schemas"
	n := yamlnode.Resolve(f.Value)
	if n.Kind != yaml.SequenceNode {
		d.add(f.Value.Line, field, "want a list of JSON Schemas, got %s", yamlnode.KindName(n))
		return nil
	}
	if len(n.Content) == 0 {
		d.add(n.Line, field, "empty list: list at least one JSON Schema, or leave the field out")
		return nil
	}
	out := make([]DataSchema, 0, len(n.Content))
	for i, c := range n.Content {
		entry := yamlnode.Index(field, i)
		if r := yamlnode.Resolve(c); r.Kind != yaml.MappingNode {
			d.add(c.Line, entry, "want a JSON Schema (a mapping), got %s", yamlnode.KindName(r))
			continue
		}
		doc, ok := yamlnode.Value(d.file, c, d.prefix+entry, d.probs)
		if !ok {
			continue
		}
		s, err := CompileDataSchema(doc)
		if err != nil {
			d.add(c.Line, entry, "%s", err.Error())
			continue
		}
		out = append(out, s)
	}
	return out
}

// modes reads a list of media types. A valid entry is a lower-case
// type/subtype without wildcards or parameters, so that routing can compare
// media types as plain strings.
func (d *decoder) modes(fields map[string]yamlnode.Pair, field string) []string {
	f, ok := fields[field]
	if !ok {
		return nil
	}
	list, ok := d.strList(f, field)
	if !ok {
		return nil
	}
	modesProblems(list, func(i int, msg string) {
		d.add(yamlnode.Resolve(f.Value).Content[i].Line, yamlnode.Index(field, i), "%s", msg)
	})
	return list
}

// mediaTypeProblem says what is wrong with a media type, or "" when nothing.
func mediaTypeProblem(m string) string {
	const want = "(want type/subtype, e.g. application/pdf)"
	mt, params, err := mime.ParseMediaType(m)
	if err != nil || strings.TrimSpace(m) != m {
		return "is not a media type " + want
	}
	typ, sub, ok := strings.Cut(mt, "/")
	if !ok || typ == "" || sub == "" {
		return "is not a media type " + want
	}
	if typ == "*" || sub == "*" {
		return "is a wildcard: list each concrete media type " + want
	}
	if len(params) > 0 || strings.Contains(m, ";") {
		return "has parameters: list the bare media type " + want
	}
	if mt != m {
		return "must be written in lower case (" + mt + ")"
	}
	return ""
}

func (d *decoder) tenants(f yamlnode.Pair) Tenants {
	n := yamlnode.Resolve(f.Value)
	switch {
	case yamlnode.IsString(n):
		if n.Value == "*" {
			return Tenants{All: true}
		}
		d.add(n.Line, "tenants", "%q is not allowed: %s", n.Value, tenantsWant)
	case n.Kind == yaml.SequenceNode:
		list, ok := d.strList(f, "tenants")
		if !ok {
			return Tenants{}
		}
		if len(list) == 0 {
			d.add(n.Line, "tenants", "empty list: %s", tenantsWant)
		}
		for i, t := range list {
			if msg := tenantProblem(t); msg != "" {
				d.add(n.Content[i].Line, yamlnode.Index("tenants", i), "%s", msg)
			}
		}
		return Tenants{List: list}
	default:
		d.add(f.Value.Line, "tenants", "%s, got %s", tenantsWant, yamlnode.KindName(n))
	}
	return Tenants{}
}

// fields indexes a mapping by full field path and reports unknown keys.
func (d *decoder) fields(n *yaml.Node, path string, known []string) map[string]yamlnode.Pair {
	out := map[string]yamlnode.Pair{}
	for _, p := range yamlnode.Pairs(d.file, n, d.prefix+path, d.probs) {
		field := yamlnode.Join(path, p.Key)
		if !slices.Contains(known, p.Key) {
			d.add(p.KeyN.Line, field, "%s", yamlnode.UnknownField(p.Key, known))
			if s, ok := diag.Suggest(p.Key, known); ok {
				d.s.meant[yamlnode.Join(path, s)] = true
			}
			continue
		}
		d.lines[field] = p.Value.Line
		out[field] = p
	}
	return out
}

func (d *decoder) requiredString(fields map[string]yamlnode.Pair, line int, field, missing string) (string, bool) {
	f, ok := fields[field]
	if !ok {
		d.missing(line, field, "%s", missing)
		return "", false
	}
	return d.nonBlank(f, field, missing)
}

// nonBlank reads a string that must not be blank (blank gets msg).
func (d *decoder) nonBlank(f yamlnode.Pair, field, msg string) (string, bool) {
	v, ok := d.str(f, field)
	if ok && strings.TrimSpace(v) == "" {
		d.add(f.Value.Line, field, "%s", msg)
		return "", false
	}
	return v, ok
}

func (d *decoder) str(f yamlnode.Pair, field string) (string, bool) {
	if !yamlnode.IsString(f.Value) {
		d.add(f.Value.Line, field, "want a string, got %s", yamlnode.KindName(f.Value))
		return "", false
	}
	return yamlnode.Resolve(f.Value).Value, true
}

// strList reads a list of strings. The list (and its strings) is interned:
// it may be shared with other manifests of the session and must not be
// modified.
func (d *decoder) strList(f yamlnode.Pair, field string) ([]string, bool) {
	n := yamlnode.Resolve(f.Value)
	if n.Kind != yaml.SequenceNode {
		d.add(f.Value.Line, field, "want a list of strings, got %s", yamlnode.KindName(n))
		return nil, false
	}
	out := d.s.buf[:0]
	ok := true
	for i, c := range n.Content {
		if !yamlnode.IsString(c) {
			d.add(c.Line, yamlnode.Index(field, i), "want a string, got %s", yamlnode.KindName(c))
			ok = false
			continue
		}
		out = append(out, yamlnode.Resolve(c).Value)
	}
	d.s.buf = out
	return d.s.list(out), ok
}

func strs[T ~string](vs []T) []string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return s
}

func join[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}
