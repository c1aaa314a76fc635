package compile

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/policy/quota"
)

// wireCapability is a full manifest as a bundle stores it under
// data.capgate.registry[id]. It mirrors the manifest format field for field
// but owns its tenants encoding, so the bundle format does not change with
// the manifest package's JSON methods.
type wireCapability struct {
	ID             string           `json:"id"`
	State          string           `json:"state"`
	Visibility     string           `json:"visibility"`
	ReplacedBy     string           `json:"replaced_by,omitempty"`
	Skill          wireSkill        `json:"skill"`
	RequiresScopes []string         `json:"requires_scopes"`
	RequiresAnyOf  [][]string       `json:"requires_any_of,omitempty"`
	Tenants        json.RawMessage  `json:"tenants"`
	Handler        string           `json:"handler"`
	Limits         map[string]any   `json:"limits,omitempty"`
	Owner          string           `json:"owner,omitempty"`
	Routing        manifest.Routing `json:"routing,omitzero"`
	Quota          *wireQuota       `json:"quota,omitempty"`
}

type wireSkill struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
	DataSchemas []any    `json:"data_schemas,omitempty"`
}

// toWire renders a capability as a plain JSON-ready map.
func toWire(c *manifest.Capability) map[string]any {
	skill := map[string]any{
		"name":        c.Skill.Name,
		"description": c.Skill.Description,
		"tags":        nonNil(c.Skill.Tags),
	}
	if len(c.Skill.Examples) > 0 {
		skill["examples"] = c.Skill.Examples
	}
	if len(c.Skill.InputModes) > 0 {
		skill["inputModes"] = c.Skill.InputModes
	}
	if len(c.Skill.OutputModes) > 0 {
		skill["outputModes"] = c.Skill.OutputModes
	}
	if len(c.Skill.DataSchemas) > 0 {
		docs := make([]any, len(c.Skill.DataSchemas))
		for i, d := range c.Skill.DataSchemas {
			docs[i] = d.Doc()
		}
		skill["data_schemas"] = docs
	}
	w := map[string]any{
		"id":              c.ID,
		"state":           string(c.State),
		"visibility":      string(c.Visibility),
		"skill":           skill,
		"requires_scopes": nonNil(c.RequiresScopes),
		"tenants":         tenantsValue(c.Tenants),
		"handler":         c.Handler,
	}
	if c.ReplacedBy != "" {
		w["replaced_by"] = c.ReplacedBy
	}
	if len(c.RequiresAnyOf) > 0 {
		w["requires_any_of"] = c.RequiresAnyOf
	}
	if len(c.Limits) > 0 {
		w["limits"] = c.Limits
	}
	if c.Owner != "" {
		w["owner"] = c.Owner
	}
	if c.Routing != (manifest.Routing{}) {
		r := map[string]any{}
		if c.Routing.Mode != "" {
			r["mode"] = string(c.Routing.Mode)
		}
		if c.Routing.MinConfidence > 0 {
			r["min_confidence"] = c.Routing.MinConfidence
		}
		w["routing"] = r
	}
	if c.Quota != (quota.Capability{}) {
		w["quota"] = toWireQuota(c.Quota)
	}
	return w
}

// fromWire decodes one registry entry. Limits come back as plain JSON
// values (numbers as float64).
func fromWire(key string, v any) (manifest.Capability, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return manifest.Capability{}, fmt.Errorf("registry %s: %w", key, err)
	}
	var w wireCapability
	if err := json.Unmarshal(b, &w); err != nil {
		return manifest.Capability{}, fmt.Errorf("registry %s: %w", key, err)
	}
	if w.ID != key {
		return manifest.Capability{}, fmt.Errorf("registry %s: id %q differs from its key", key, w.ID)
	}
	t, err := decodeTenants(w.Tenants)
	if err != nil {
		return manifest.Capability{}, fmt.Errorf("registry %s: %w", key, err)
	}
	if m := w.Routing.Mode; m != "" && !slices.Contains(manifest.RoutingModes, m) {
		return manifest.Capability{}, fmt.Errorf("registry %s: routing.mode %q is not a routing mode", key, m)
	}
	if mc := w.Routing.MinConfidence; mc < 0 || mc > 1 {
		return manifest.Capability{}, fmt.Errorf("registry %s: routing.min_confidence %v is outside (0, 1]", key, mc)
	}
	q, err := fromWireQuota(key, w.Quota)
	if err != nil {
		return manifest.Capability{}, err
	}
	var schemas []manifest.DataSchema
	for i, doc := range w.Skill.DataSchemas {
		s, err := manifest.CompileDataSchema(doc)
		if err != nil {
			return manifest.Capability{}, fmt.Errorf("registry %s: skill.data_schemas[%d]: %w", key, i, err)
		}
		schemas = append(schemas, s)
	}
	return manifest.Capability{
		ID:         w.ID,
		State:      manifest.State(w.State),
		Visibility: manifest.Visibility(w.Visibility),
		ReplacedBy: w.ReplacedBy,
		Skill: manifest.Skill{
			Name:        w.Skill.Name,
			Description: w.Skill.Description,
			Tags:        w.Skill.Tags,
			Examples:    w.Skill.Examples,
			InputModes:  w.Skill.InputModes,
			OutputModes: w.Skill.OutputModes,
			DataSchemas: schemas,
		},
		RequiresScopes: w.RequiresScopes,
		RequiresAnyOf:  w.RequiresAnyOf,
		Tenants:        t,
		Handler:        w.Handler,
		Limits:         w.Limits,
		Owner:          w.Owner,
		Routing:        w.Routing,
		Quota:          q,
		Source:         manifest.Source{File: "bundle:data.capgate.registry." + key},
	}, nil
}

func decodeTenants(raw json.RawMessage) (manifest.Tenants, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s != "*" {
			return manifest.Tenants{}, errors.New(`tenants: want "*" or a list`)
		}
		return manifest.Tenants{All: true}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil || list == nil {
		return manifest.Tenants{}, errors.New(`tenants: want "*" or a list`)
	}
	return manifest.Tenants{List: list}, nil
}
