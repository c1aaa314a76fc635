// Package manifest holds capability manifests: their types, loading from
// YAML or JSON files, and validation of a whole registry at once.
package manifest

import (
	"encoding/json"
	"slices"
	"sort"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/quota"
)

// State is a capability's lifecycle state.
type State string

// Lifecycle states, in the order a capability normally moves through them.
const (
	StatePreview    State = "preview"
	StateGA         State = "ga"
	StateDeprecated State = "deprecated"
	StateRemoved    State = "removed"
)

// Visibility says which cards may list a capability.
type Visibility string

// Visibilities.
const (
	VisibilityPublic   Visibility = "public"
	VisibilityExtended Visibility = "extended"
	VisibilityInternal Visibility = "internal"
)

// Capability is one manifest: a skill and the server-side facts about it.
// Only Skill (plus ID) ever reaches a card.
//
// Its JSON (MarshalJSON) is the manifest format and the entry a policy
// bundle stores under data.capgate.registry[id]: one schema, written once.
// The fields are declared in the bytewise order of their JSON names, so
// that encoding/json writes canonical JSON (sorted keys, as it writes a
// map), which the bundle's revision hashes; TestJSONIsCanonical holds it.
// The manifest format's field order for people is decode.go's table.
type Capability struct {
	Handler string         `json:"handler"`
	ID      string         `json:"id"`
	Limits  map[string]any `json:"limits,omitempty"`
	Owner   string         `json:"owner,omitempty"`
	// Quota is what capgate counts for calls of the capability (manifest
	// quota: a rate per caller and/or its cost in units); zero when the
	// manifest has none. Server-side only.
	Quota quota.Capability `json:"quota,omitzero"`
	// ReplacedBy is the capability that replaces this one.
	ReplacedBy string `json:"replaced_by,omitempty"`
	// RequiresAnyOf are alternative scope sets (manifest requires_any_of):
	// besides every scope of RequiresScopes, the caller must hold every
	// scope of at least one of them. Empty when the manifest has none.
	RequiresAnyOf  [][]string `json:"requires_any_of,omitempty"`
	RequiresScopes []string   `json:"requires_scopes"`
	// Routing is how the router may choose the capability for a message
	// (server-side only: never in a card).
	Routing    Routing    `json:"routing,omitzero"`
	Skill      Skill      `json:"skill"`
	State      State      `json:"state"`
	Tenants    Tenants    `json:"tenants"`
	Visibility Visibility `json:"visibility"`

	// Source is where the manifest was read from (not part of the format).
	Source Source `json:"-"`
}

// MarshalJSON writes the manifest as JSON, lists that are required by the
// format (requires_scopes, skill.tags) as [] rather than null when empty.
func (c Capability) MarshalJSON() ([]byte, error) {
	type plain Capability // the fields, without this method
	p := plain(c)
	if p.RequiresScopes == nil {
		p.RequiresScopes = []string{}
	}
	if p.Skill.Tags == nil {
		p.Skill.Tags = []string{}
	}
	return json.Marshal(p)
}

// Skill is the card-facing block of a manifest (A2A AgentSkill minus id).
// Its fields are in JSON-name order too (see Capability).
type Skill struct {
	// DataSchemas are the JSON Schemas of the structured data parts the
	// skill accepts (routing only: they never reach a card).
	DataSchemas []DataSchema `json:"data_schemas,omitempty"`
	Description string       `json:"description"`
	Examples    []string     `json:"examples,omitempty"`
	InputModes  []string     `json:"inputModes,omitempty"`
	Name        string       `json:"name"`
	OutputModes []string     `json:"outputModes,omitempty"`
	Tags        []string     `json:"tags"`
}

// RoutingMode says how a message may reach a capability without the
// caller naming it.
type RoutingMode string

// Routing modes.
const (
	// RoutingAuto: the router's layers may choose it (the default).
	RoutingAuto RoutingMode = "auto"
	// RoutingConfirm: a pick by the router is put to the caller as a
	// question naming the skill; it runs on the caller's yes.
	RoutingConfirm RoutingMode = "confirm"
	// RoutingExplicit: reachable only by a skill hint, a task bound to it,
	// or the caller's choice in a clarification; never by the router alone.
	RoutingExplicit RoutingMode = "explicit"
)

// RoutingModes are the modes, in documentation order.
var RoutingModes = []RoutingMode{RoutingAuto, RoutingConfirm, RoutingExplicit}

// Routing is a capability's routing policy (manifest field routing). Its
// fields are in JSON-name order too (see Capability).
type Routing struct {
	// MinConfidence is the classifier confidence the capability needs to be
	// chosen instead of router.threshold; 0 when not given.
	MinConfidence float64 `json:"min_confidence,omitempty"`
	// Mode is "" when not given: auto.
	Mode RoutingMode `json:"mode,omitempty"`
}

// EffectiveMode is the mode, auto when none is given.
func (r Routing) EffectiveMode() RoutingMode {
	if r.Mode == "" {
		return RoutingAuto
	}
	return r.Mode
}

// Tenants is either every tenant ("*") or an explicit, non-empty list.
type Tenants struct {
	All  bool
	List []string
}

// Allows reports whether tenant t is admitted.
func (t Tenants) Allows(tenant string) bool {
	if t.All {
		return true
	}
	for _, v := range t.List {
		if v == tenant {
			return true
		}
	}
	return false
}

// Source locates a manifest for error messages.
type Source struct {
	File string // display path, e.g. "capabilities/reconcile.yaml"
	Line int    // line of the document start (YAML), 0 when unknown
	// ScopesLine is the line of requires_scopes' value, 0 when absent.
	ScopesLine int
	// AnyOfLine is the line of requires_any_of's value, 0 when absent.
	AnyOfLine int
}

// Routable reports whether the state allows execution at all
// (preview still needs an opted-in caller).
func (c *Capability) Routable() bool {
	return c.State == StatePreview || c.State == StateGA || c.State == StateDeprecated
}

// ScopeSets are the scope sets that each grant the capability (an OR of
// ANDs, as OpenAPI and A2A security requirements are): requires_scopes
// alone, or requires_scopes ∪ A for each alternative A of requires_any_of.
// Each set is sorted and deduplicated.
func (c *Capability) ScopeSets() [][]string {
	if len(c.RequiresAnyOf) == 0 {
		return [][]string{slices.Compact(slices.Sorted(slices.Values(c.RequiresScopes)))}
	}
	out := make([][]string, len(c.RequiresAnyOf))
	for i, alt := range c.RequiresAnyOf {
		out[i] = slices.Compact(slices.Sorted(slices.Values(slices.Concat(c.RequiresScopes, alt))))
	}
	return out
}

// ScopesFor returns the scopes the capability requires of a caller holding
// held: requires_scopes and every alternative of requires_any_of the caller
// holds in full (the alternatives that grant it), deduplicated and sorted.
// A caller holding no alternative gets requires_scopes alone (and is not
// entitled: the policy decides that, this only names the scopes).
func (c *Capability) ScopesFor(held []string) []string {
	out := append([]string(nil), c.RequiresScopes...)
	for _, alt := range c.RequiresAnyOf {
		if holdsAll(held, alt) {
			out = append(out, alt...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func holdsAll(held, want []string) bool {
	for _, w := range want {
		if !slices.Contains(held, w) {
			return false
		}
	}
	return true
}

// Registry is a validated set of capabilities, sorted by id. Its
// capabilities are read-only: a loaded registry's capabilities share equal
// strings and string lists (tags, media types, scopes, tenant lists) with
// each other.
type Registry struct {
	caps []Capability
	byID map[string]int
	// warnings are findings of Load that did not stop it (deprecations).
	warnings []diag.Problem
}

// NewRegistry builds a registry from capabilities that have already been
// validated. The slice is copied and sorted by id.
func NewRegistry(caps []Capability) *Registry {
	return newRegistry(append([]Capability(nil), caps...))
}

// newRegistry is NewRegistry for a slice the registry may keep: the caller
// hands it over and must not use it afterwards.
func newRegistry(caps []Capability) *Registry {
	if len(caps) == 0 {
		caps = nil // as NewRegistry's copy of an empty slice
	}
	r := &Registry{caps: caps, byID: make(map[string]int, len(caps))}
	sort.Slice(r.caps, func(i, j int) bool { return r.caps[i].ID < r.caps[j].ID })
	for i := range r.caps {
		r.byID[r.caps[i].ID] = i
	}
	return r
}

// All returns the capabilities sorted by id. Callers must not modify them.
func (r *Registry) All() []Capability { return r.caps }

// Warnings are the findings of loading that did not stop it (a deprecated
// spelling), in reporting order, each with its file and line.
func (r *Registry) Warnings() []diag.Problem { return r.warnings }

// Len is the number of capabilities.
func (r *Registry) Len() int { return len(r.caps) }

// Get returns the capability with the given id. Callers must not modify it.
func (r *Registry) Get(id string) (*Capability, bool) {
	i, ok := r.byID[id]
	if !ok {
		return nil, false
	}
	return &r.caps[i], true
}

// Index returns the position of id in All(), or -1.
func (r *Registry) Index(id string) int {
	i, ok := r.byID[id]
	if !ok {
		return -1
	}
	return i
}
