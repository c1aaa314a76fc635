// Package compile turns a validated registry and the policy modules into an immutable, checked policy snapshot and OPA bundles.
package compile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/policy/quota"
	"github.com/capgate/capgate/policy/regocheck"
	"github.com/capgate/capgate/rego"
)

// Names inside the data document and the module set.
const (
	// Root is the only bundle root: every module package and every data path
	// lives under data.capgate.
	Root = "capgate"
	// ExtraDir is the module path prefix of extra (deny) modules.
	ExtraDir = "extra/"
	// RevisionLen is how many hex digits of the sha256 content hash the
	// revision keeps (128 bits).
	RevisionLen = 32

	keyCapabilities = "capabilities"
	keySettings     = "settings"
	keyProfiles     = "profiles"
	keyRegistry     = "registry"
)

// Settings are the deployment's policy settings (data.capgate.settings).
type Settings struct {
	PreviewScope    string   `json:"preview_scope"`
	PreviewTenants  []string `json:"preview_tenants"`
	AnonymousPublic bool     `json:"anonymous_public"`
	// Quotas are the deployment's quota plans (nil: none).
	Quotas *Quotas `json:"quotas,omitempty"`
}

// Snapshot is one checked, immutable revision of everything the policy
// decides on. Nothing in it may be modified after Build or ReadBundle.
type Snapshot struct {
	// Registry holds the full manifests (cards and the router read them).
	Registry *manifest.Registry
	// Settings are the policy settings (data.capgate.settings).
	Settings Settings
	// Modules maps module path to Rego source: the embedded policy modules
	// (rego.Modules paths) plus extra deny modules under ExtraDir.
	Modules map[string]string
	// Revision is the content hash over the bundle data document (Data plus
	// the full manifests) and the modules.
	Revision string

	// compiler and store are the compiled modules and the data store the
	// build's policy check evaluated; Policy hands these same objects to
	// the engine, so nothing is compiled or built twice.
	compiler *ast.Compiler
	store    storage.Store
}

// Build compiles a validated registry, the deployment's auth settings and
// extra deny modules (name -> source, already validated by the policy tool;
// each lands at ExtraDir+name) into a snapshot. The output is checked before
// it is returned: ids are non-empty and unique, every replaced_by resolves
// (see check), every module compiles (Rego v1, strict, input schema) and the
// policy evaluates over the data (see smoke).
func Build(reg *manifest.Registry, auth config.Auth, extra map[string]string, opts ...BuildOption) (*Snapshot, error) {
	var o buildOptions
	for _, opt := range opts {
		opt(&o)
	}
	if reg == nil {
		return nil, errors.New("build policy snapshot: nil registry")
	}
	builtin, err := rego.Modules()
	if err != nil {
		return nil, fmt.Errorf("build policy snapshot: read embedded policy: %w", err)
	}
	modules := maps.Clone(builtin)
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		p, err := extraPath(name)
		if err != nil {
			return nil, fmt.Errorf("build policy snapshot: %w", err)
		}
		if _, dup := modules[p]; dup {
			return nil, fmt.Errorf("build policy snapshot: extra module %q: duplicate path %s", name, p)
		}
		modules[p] = extra[name]
	}
	settings := Settings{
		PreviewScope:    auth.PreviewScope,
		PreviewTenants:  slices.Clone(auth.PreviewTenants),
		AnonymousPublic: auth.AnonymousPublic,
		Quotas:          QuotaSettings(o.quotas),
	}
	return assemble(reg, settings, modules)
}

// BuildOption adds an optional part to a build.
type BuildOption func(*buildOptions)

type buildOptions struct{ quotas quota.Config }

// WithQuotas compiles the deployment's validated quota plans
// (data.capgate.settings.quotas).
func WithQuotas(q quota.Config) BuildOption { return func(o *buildOptions) { o.quotas = q } }

// extraPath maps an extra module name to its module path under ExtraDir.
func extraPath(name string) (string, error) {
	clean := path.Clean(strings.TrimPrefix(name, ExtraDir))
	if name == "" || clean == "." || path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("extra module %q: name must be a relative path", name)
	}
	if !strings.HasSuffix(clean, ".rego") {
		clean += ".rego"
	}
	return ExtraDir + clean, nil
}

// assemble builds and checks a snapshot from its parts; Build and
// ReadBundle share it so a bundle passes exactly the checks a build does.
func assemble(reg *manifest.Registry, settings Settings, modules map[string]string) (*Snapshot, error) {
	if settings.PreviewTenants == nil {
		settings.PreviewTenants = []string{}
	}
	if err := check(reg); err != nil {
		return nil, fmt.Errorf("build policy snapshot: %w", err)
	}
	s := &Snapshot{Registry: reg, Settings: settings, Modules: modules}
	data, err := s.revisionData()
	if err != nil {
		return nil, fmt.Errorf("build policy snapshot: %w", err)
	}
	if s.Revision, err = s.revision(data); err != nil {
		return nil, fmt.Errorf("build policy snapshot: %w", err)
	}
	// The generic documents are dead from here on: over a large registry
	// they are tens of megabytes, and the policy check below builds the
	// store and compiler, so the two are not held at once.
	if err := s.checkPolicy(); err != nil {
		return nil, fmt.Errorf("build policy snapshot: %w", err)
	}
	return s, nil
}

// Data returns the document the engine stores under data.capgate:
// {"capabilities": {id: facts}, "profiles": {key: facts}, "settings":
// {...}}. It holds only what the policy reads, as plain JSON values
// (map[string]any, []any, string, bool, json.Number); bundles add
// "registry" beside it. It is derived from the registry and settings on
// every call and not kept: the engine holds the same facts as OPA values,
// and a second copy would cost megabytes over a large registry.
func (s *Snapshot) Data() (map[string]any, error) {
	caps := make(map[string]any, s.Registry.Len())
	profiles, _ := s.eachFacts(func(c *manifest.Capability, fs []fact) error { // never fails
		f := make(map[string]any, len(fs))
		for _, x := range fs {
			f[x.key] = x.val
		}
		caps[c.ID] = f
		return nil
	})
	return plainJSON(map[string]any{keyCapabilities: caps, keyProfiles: profiles, keySettings: s.Settings})
}

// revisionData is Data for the revision hash, without the JSON round trip
// that makes Data's values generic: over 10,000 capabilities that round
// trip was ~60 ms of a start. The hash is json.Marshal's bytes, which are
// the same for a value and its round trip when the value holds only plain
// JSON values and valid UTF-8 (json.Marshal writes an invalid byte as
// \ufffd, which the round trip turns into the character itself); for
// anything else it is Data. TestRevisionMatchesPlain holds the two equal.
func (s *Snapshot) revisionData() (map[string]any, error) {
	caps := make(map[string]any, s.Registry.Len())
	plain := true
	profiles, _ := s.eachFacts(func(c *manifest.Capability, fs []fact) error { // never fails
		f := make(map[string]any, len(fs))
		for _, x := range fs {
			f[x.key] = x.val
			plain = plain && roundTrips(x.val)
		}
		caps[c.ID] = f
		return nil
	})
	if !plain {
		return s.Data()
	}
	settings, err := plainJSON(s.Settings) // a struct: its round trip sorts its fields
	if err != nil {
		return nil, err
	}
	return map[string]any{keyCapabilities: caps, keyProfiles: profiles, keySettings: settings}, nil
}

// roundTrips reports whether json.Marshal writes the same bytes for v as
// for v's JSON round trip: v holds only strings of valid UTF-8, numbers,
// booleans, nulls, and maps and lists of those.
func roundTrips(v any) bool {
	switch v := v.(type) {
	case nil, bool, int64, int, json.Number:
		return true
	case float64:
		return !math.IsNaN(v) && !math.IsInf(v, 0) // else both fail to encode
	case string:
		return utf8.ValidString(v)
	case []string:
		for _, s := range v {
			if !utf8.ValidString(s) {
				return false
			}
		}
		return true
	case []any:
		for _, x := range v {
			if !roundTrips(x) {
				return false
			}
		}
		return true
	case map[string]any:
		for k, x := range v {
			if !utf8.ValidString(k) || !roundTrips(x) {
				return false
			}
		}
		return true
	}
	return false
}

// ProfileKeys returns each capability's profile key (the "profile" fact the
// policy reads), in registry order: capabilities with equal keys get equal
// decisions but for deny rules and the replaced_by their state reasons name.
func (s *Snapshot) ProfileKeys() []string {
	all := s.Registry.All()
	keys := make([]string, len(all))
	var pr profiler
	for i := range all {
		keys[i], _ = pr.of(&all[i])
	}
	return keys
}

// eachFacts calls f with every capability and its facts (see appendFacts;
// the slice is reused between calls) and returns the profiles they fall
// in, keyed as the facts name them. It stops at f's first error. Data and
// Store both walk the registry through it.
func (s *Snapshot) eachFacts(f func(c *manifest.Capability, fs []fact) error) (map[string]any, error) {
	profiles := map[string]any{}
	var fs []fact
	var pr profiler
	all := s.Registry.All()
	for i := range all {
		c := &all[i]
		key, p := pr.of(c)
		profiles[key] = p
		fs = appendFacts(fs[:0], c, key)
		if err := f(c, fs); err != nil {
			return nil, err
		}
	}
	return profiles, nil
}

// profileOf groups capabilities by the facts that decide visibility and
// entitlement (state, visibility, requires_scopes, tenants), so the policy
// evaluates its reason rules once per group. The key is a hash of those
// facts, canonical (sorted, deduplicated lists).
func profileOf(c *manifest.Capability) (string, map[string]any) {
	scopes := slices.Compact(slices.Sorted(slices.Values(nonNil(c.RequiresScopes))))
	var tenants any = "*"
	if !c.Tenants.All {
		tenants = slices.Compact(slices.Sorted(slices.Values(nonNil(c.Tenants.List))))
	}
	p := map[string]any{
		"state":           string(c.State),
		"visibility":      string(c.Visibility),
		"requires_scopes": scopes,
		"tenants":         tenants,
	}
	if alts := anyOfValue(c.RequiresAnyOf); alts != nil {
		p["requires_any_of"] = alts // only when given: keys of other profiles stay as they were
	}
	b, _ := json.Marshal(p) // maps of strings and string slices always marshal
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), p
}

// profiler is profileOf, remembered for capabilities with the same profile
// facts in the same order: a registry has a few profiles and thousands of
// capabilities, and each profileOf call is a JSON encoding and a hash.
type profiler struct {
	buf  []byte
	seen map[string]profile
}

type profile struct {
	key   string
	facts map[string]any
}

func (pr *profiler) of(c *manifest.Capability) (string, map[string]any) {
	b := appendStringKey(pr.buf[:0], string(c.State))
	b = appendStringKey(b, string(c.Visibility))
	for _, s := range c.RequiresScopes {
		b = appendStringKey(append(b, 'S'), s)
	}
	for _, alt := range c.RequiresAnyOf {
		b = append(b, 'A')
		for _, s := range alt {
			b = appendStringKey(append(b, 'a'), s)
		}
	}
	if c.Tenants.All {
		b = append(b, '*')
	}
	for _, t := range c.Tenants.List {
		b = appendStringKey(append(b, 'T'), t)
	}
	pr.buf = b
	if p, ok := pr.seen[string(b)]; ok {
		return p.key, p.facts
	}
	key, facts := profileOf(c)
	if pr.seen == nil {
		pr.seen = map[string]profile{}
	}
	pr.seen[string(b)] = profile{key, facts}
	return key, facts
}

// fact is one field of what the policy knows of a capability: its value is
// a string, a []string, or (limits) a map of plain values.
type fact struct {
	key string
	val any
}

// appendFacts appends what the policy knows of capability c, in profile
// profile, to dst, sorted by key. It is the one definition of a
// capability's entry under data.capgate.capabilities: Data makes it a map,
// Store builds OPA values from it directly.
func appendFacts(dst []fact, c *manifest.Capability, profile string) []fact {
	dst = append(dst,
		fact{"handler", c.Handler},
		fact{"id", c.ID},
	)
	if len(c.Limits) > 0 {
		dst = append(dst, fact{"limits", c.Limits})
	}
	dst = append(dst, fact{"profile", profile})
	if q := quotaFact(c.Quota); q != nil {
		dst = append(dst, fact{"quota", q})
	}
	if c.ReplacedBy != "" {
		dst = append(dst, fact{"replaced_by", c.ReplacedBy})
	}
	if alts := anyOfValue(c.RequiresAnyOf); alts != nil {
		dst = append(dst, fact{"requires_any_of", alts})
	}
	return append(dst,
		fact{"requires_scopes", nonNil(c.RequiresScopes)},
		fact{"state", string(c.State)},
		fact{"tags", nonNil(c.Skill.Tags)},
		fact{"tenants", tenantsValue(c.Tenants)},
		fact{"visibility", string(c.Visibility)},
	)
}

// anyOfValue is requires_any_of as the policy reads it: each alternative
// sorted and deduplicated, the alternatives in the manifest's order; nil
// when there are none (the fact is then left out).
func anyOfValue(alts [][]string) [][]string {
	if len(alts) == 0 {
		return nil
	}
	out := make([][]string, len(alts))
	for i, a := range alts {
		out[i] = slices.Compact(slices.Sorted(slices.Values(a)))
	}
	return out
}

func tenantsValue(t manifest.Tenants) any {
	if t.All {
		return "*"
	}
	return nonNil(t.List)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// plainJSON round-trips v through JSON so the result holds only generic
// JSON values (numbers as json.Number): the form OPA's store, bundle writer
// and signature hasher all agree on.
func plainJSON(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode data: %w", err)
	}
	var out map[string]any
	if err := util.UnmarshalJSON(b, &out); err != nil {
		return nil, fmt.Errorf("decode data: %w", err)
	}
	return out, nil
}

// revision hashes the canonical JSON (sorted keys, as json.Marshal writes
// it) of {"data": the bundle document, "modules": modules}, where the bundle
// document is data plus the full manifests under "registry" (see
// bundleDocument). The JSON is written into the hash piece by piece, each
// capability's facts and manifest on their own: over a large registry the
// whole document is tens of megabytes of JSON and generic maps.
func (s *Snapshot) revision(data map[string]any) (string, error) {
	h := sha256.New()
	w := canonicalWriter{w: h}
	w.raw(`{"data":{`)
	keys := slices.Sorted(maps.Keys(data))
	if _, dup := data[keyRegistry]; !dup {
		keys = append(keys, keyRegistry)
		slices.Sort(keys)
	}
	for i, k := range keys {
		if i > 0 {
			w.raw(",")
		}
		w.key(k)
		if k == keyRegistry {
			w.registry(s.Registry)
		} else {
			w.object(data[k])
		}
	}
	w.raw(`},"modules":`)
	w.value(s.Modules)
	w.raw("}")
	if w.err != nil {
		return "", fmt.Errorf("hash snapshot: %w", w.err)
	}
	return hex.EncodeToString(h.Sum(nil))[:RevisionLen], nil
}

// canonicalWriter writes the bytes json.Marshal gives for a value, in
// pieces: a map[string]any's entries one by one (json.Marshal sorts keys
// bytewise and encodes keys as strings), anything else whole.
type canonicalWriter struct {
	w   io.Writer
	err error
}

func (c *canonicalWriter) raw(s string) {
	if c.err == nil {
		_, c.err = io.WriteString(c.w, s)
	}
}

func (c *canonicalWriter) value(v any) {
	if c.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		c.err = err
		return
	}
	_, c.err = c.w.Write(b)
}

func (c *canonicalWriter) key(k string) {
	c.value(k)
	c.raw(":")
}

// registry writes the full manifests as bundleDocument holds them: an
// object from id to manifest, one manifest at a time.
func (c *canonicalWriter) registry(reg *manifest.Registry) {
	all := reg.All()
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(all[a].ID, all[b].ID) })
	c.raw("{")
	for n, i := range order {
		if n > 0 {
			c.raw(",")
		}
		c.key(all[i].ID)
		c.value(&all[i])
	}
	c.raw("}")
}

// object writes v, a map[string]any entry by entry (its values whole).
func (c *canonicalWriter) object(v any) {
	m, ok := v.(map[string]any)
	if !ok {
		c.value(v)
		return
	}
	c.raw("{")
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			c.raw(",")
		}
		c.key(k)
		c.value(m[k])
	}
	c.raw("}")
}

// bundleDocument is the document a bundle stores under data.capgate: data
// (from Data) plus the full manifests under "registry".
func (s *Snapshot) bundleDocument(data map[string]any) (map[string]any, error) {
	all := s.Registry.All()
	regs := make(map[string]any, len(all))
	for i := range all {
		regs[all[i].ID] = &all[i] // the manifest's own JSON
	}
	r, err := plainJSON(regs)
	if err != nil {
		return nil, err
	}
	doc := maps.Clone(data)
	doc[keyRegistry] = r
	return doc, nil
}

// check verifies the registry before anything is derived from it: every id
// is non-empty and unique (a registry built with manifest.NewRegistry, as
// ReadBundle and tests build one, has not been through manifest.Load), and
// every replaced_by resolves by manifest.ReplacedByProblem, the rule Load
// applies. Problems carry the manifest's file and line when it has them.
// The facts, profiles and data are then derived from the registry by one
// function each (appendFacts, profiler), so they cannot disagree with it.
func check(reg *manifest.Registry) error {
	var problems diag.Set
	all := reg.All()
	for i := range all {
		c := &all[i]
		file, line := position(c)
		if c.ID == "" {
			problems.Add(file, line, "id", "capability with an empty id")
			continue
		}
		if reg.Index(c.ID) != i {
			problems.Add(file, line, "id", "%q is defined more than once", c.ID)
		}
		if c.ReplacedBy != "" {
			target, _ := reg.Get(c.ReplacedBy)
			if problem := manifest.ReplacedByProblem(c, target); problem != "" {
				problems.Add(file, line, "replaced_by", "%s", problem)
			}
		}
	}
	return problems.ErrOrNil()
}

// position is where problems about c are reported: its manifest's file and
// line, or "capability <id>" for one that was not read from a file.
func position(c *manifest.Capability) (string, int) {
	if c.Source.File != "" {
		return c.Source.File, c.Source.Line
	}
	return fmt.Sprintf("capability %q", c.ID), 0
}

// checkPolicy compiles the modules, builds the store and evaluates the
// policy over it (see smoke); the compiler and store are kept for Policy.
func (s *Snapshot) checkPolicy() error {
	c, err := s.Compile()
	if err != nil {
		return err
	}
	store, err := s.Store()
	if err != nil {
		return err
	}
	if err := smoke(s.Registry, c, store); err != nil {
		return err
	}
	s.compiler, s.store = c, store
	return nil
}

// Policy returns the compiled modules and the data store (under
// data.capgate) to evaluate the snapshot with. For a snapshot from Build or
// ReadBundle they are the very objects its policy check evaluated, built
// once; callers only read them (evaluation does). Any other snapshot gets
// them compiled and built now (see Compile and Store).
func (s *Snapshot) Policy() (*ast.Compiler, storage.Store, error) {
	if s.compiler != nil && s.store != nil {
		return s.compiler, s.store, nil
	}
	c, err := s.Compile()
	if err != nil {
		return nil, nil, err
	}
	store, err := s.Store()
	if err != nil {
		return nil, nil, err
	}
	return c, store, nil
}

// Compile parses the snapshot's modules and compiles them strictly with
// the compiler setup `capgate policy check` uses (regocheck.NewCompiler:
// Rego v1, the input schema as schema.input and as the global input schema,
// so extra modules are checked without annotations). Every module's package
// must lie under data.capgate; modules under ExtraDir must follow the rule
// for deny modules (regocheck.CheckExtraModule), so they can only add
// refusals. Each call returns a new compiler.
func (s *Snapshot) Compile() (*ast.Compiler, error) {
	parsed, err := regocheck.Parse(s.Modules)
	if err != nil {
		return nil, fmt.Errorf("compile policy: %w", err)
	}
	var problems diag.Set
	root := ast.MustParseRef("data." + Root)
	for _, p := range slices.Sorted(maps.Keys(parsed)) {
		m := parsed[p]
		switch {
		case strings.HasPrefix(p, ExtraDir):
			regocheck.CheckExtraModule(&problems, p, m)
		case !m.Package.Path.HasPrefix(root):
			problems.Add(p, m.Package.Location.Row, "package", "package %s is outside the bundle root %s",
				strings.TrimPrefix(m.Package.Path.String(), "data."), Root)
		}
	}
	if err := problems.ErrOrNil(); err != nil {
		return nil, fmt.Errorf("compile policy: %w", err)
	}
	c, err := regocheck.CompileParsed(parsed, true)
	if err != nil {
		return nil, fmt.Errorf("compile policy: %w", err)
	}
	return c, nil
}

// SubjectSensitive reports whether decisions may depend on the caller's
// subject: true as soon as any module is not the embedded policy verbatim
// (extra deny modules may refuse by subject). The embedded policy never
// reads the subject.
func (s *Snapshot) SubjectSensitive() bool {
	builtin, err := rego.Modules()
	if err != nil {
		return true
	}
	for p, src := range s.Modules {
		if b, ok := builtin[p]; !ok || b != src {
			return true
		}
	}
	return false
}
