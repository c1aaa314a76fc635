package card

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaJSON is the published A2A v1.0.1 JSON Schema, unmodified (see schema/SOURCE.md).
//
//go:embed schema/a2a-v1.0.1.json
var schemaJSON []byte

const (
	schemaURL      = "urn:capgate:a2a-v1.0.1.json"
	agentCardTitle = "Agent Card"
)

// Validator checks agent card JSON against the A2A v1.0.1 JSON Schema and
// the proto's REQUIRED fields. It is safe for concurrent use.
type Validator struct {
	schema *jsonschema.Schema
}

// NewValidator compiles the embedded schema. Compile once and reuse the
// Validator where many cards are checked.
func NewValidator() (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("read embedded A2A schema: %w", err)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("read embedded A2A schema: not an object")
	}
	defs, ok := root["definitions"].(map[string]any)
	if !ok {
		return nil, errors.New("read embedded A2A schema: no definitions")
	}
	// The bundle's $refs are file names of the generator's per-message output
	// (A2A issue #2073). Map each back to its definition, keyed by title:
	// lf.a2a.v1.<TitleWithoutSpaces>.jsonschema.json and
	// google.protobuf.<X>.jsonschema.json → #/definitions/<Title>.
	refs := make(map[string]string, 2*len(defs))
	for title := range defs {
		target := "#/definitions/" + url.PathEscape(title)
		compact := strings.ReplaceAll(title, " ", "")
		refs["lf.a2a.v1."+compact+".jsonschema.json"] = target
		refs["google.protobuf."+compact+".jsonschema.json"] = target
	}
	if err := rewriteRefs(root, refs, true); err != nil {
		return nil, fmt.Errorf("read embedded A2A schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, root); err != nil {
		return nil, fmt.Errorf("load embedded A2A schema: %w", err)
	}
	sch, err := c.Compile(schemaURL + "#/definitions/" + url.PathEscape(agentCardTitle))
	if err != nil {
		return nil, fmt.Errorf("compile A2A schema %q: %w", agentCardTitle, err)
	}
	return &Validator{schema: sch}, nil
}

// rewriteRefs replaces every $ref by its in-bundle target and drops the
// per-definition $schema keywords below the root (they are the same draft).
func rewriteRefs(v any, refs map[string]string, isRoot bool) error {
	switch v := v.(type) {
	case map[string]any:
		if !isRoot {
			delete(v, "$schema")
		}
		for k, child := range v {
			if k == "$ref" {
				s, _ := child.(string)
				target, ok := refs[s]
				if !ok {
					return fmt.Errorf("unresolvable $ref %q", s)
				}
				v[k] = target
				continue
			}
			if err := rewriteRefs(child, refs, false); err != nil {
				return err
			}
		}
	case []any:
		for _, child := range v {
			if err := rewriteRefs(child, refs, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// ValidateJSON checks one agent card with a freshly compiled Validator.
// Tests in any package use it to check served cards.
func ValidateJSON(cardJSON []byte) error {
	v, err := NewValidator()
	if err != nil {
		return err
	}
	return v.Validate(cardJSON)
}

// Validate checks cardJSON against the schema's "Agent Card" definition and
// then against the proto's REQUIRED field annotations, which the published
// schema does not carry (it has no `required` lists). All problems are
// returned, joined.
func (v *Validator) Validate(cardJSON []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(cardJSON))
	if err != nil {
		return fmt.Errorf("agent card: %w", err)
	}
	var errs []error
	if err := v.schema.Validate(doc); err != nil {
		errs = append(errs, fmt.Errorf("agent card schema: %w", err))
	}
	errs = append(errs, checkRequired(doc)...)
	return errors.Join(errs...)
}

// checkRequired enforces the fields a2a.proto marks
// `(google.api.field_behavior) = REQUIRED` on AgentCard and the messages it
// holds. A REQUIRED string must be non-empty and a REQUIRED repeated field
// non-empty (AIP-203), with one deliberate exception: `skills` must be
// present but may be empty, because the public card of an agent whose
// skills are all extended-only honestly has none.
func checkRequired(doc any) []error {
	card, ok := doc.(map[string]any)
	if !ok {
		return []error{errors.New("agent card: not a JSON object")}
	}
	var errs []error
	missing := func(path string) { errs = append(errs, fmt.Errorf("agent card: %s is required", path)) }
	str := func(obj map[string]any, key, path string) {
		if s, _ := obj[key].(string); s == "" {
			missing(path)
		}
	}
	list := func(obj map[string]any, key, path string, allowEmpty bool) []any {
		l, ok := obj[key].([]any)
		if !ok || (!allowEmpty && len(l) == 0) {
			missing(path)
		}
		return l
	}

	str(card, "name", "/name")
	str(card, "description", "/description")
	str(card, "version", "/version")
	for i, it := range list(card, "supportedInterfaces", "/supportedInterfaces", false) {
		iface, _ := it.(map[string]any)
		p := fmt.Sprintf("/supportedInterfaces/%d/", i)
		str(iface, "url", p+"url")
		str(iface, "protocolBinding", p+"protocolBinding")
		str(iface, "protocolVersion", p+"protocolVersion")
	}
	if _, ok := card["capabilities"].(map[string]any); !ok {
		missing("/capabilities")
	}
	list(card, "defaultInputModes", "/defaultInputModes", false)
	list(card, "defaultOutputModes", "/defaultOutputModes", false)
	if prov, ok := card["provider"].(map[string]any); ok {
		str(prov, "organization", "/provider/organization")
		str(prov, "url", "/provider/url")
	}
	if schemes, ok := card["securitySchemes"].(map[string]any); ok {
		for name, s := range schemes {
			scheme, _ := s.(map[string]any)
			if h, ok := scheme["httpAuthSecurityScheme"].(map[string]any); ok {
				str(h, "scheme", "/securitySchemes/"+name+"/httpAuthSecurityScheme/scheme")
			}
			if o, ok := scheme["openIdConnectSecurityScheme"].(map[string]any); ok {
				str(o, "openIdConnectUrl", "/securitySchemes/"+name+"/openIdConnectSecurityScheme/openIdConnectUrl")
			}
		}
	}
	for i, it := range list(card, "skills", "/skills", true) {
		skill, _ := it.(map[string]any)
		p := fmt.Sprintf("/skills/%d/", i)
		str(skill, "id", p+"id")
		str(skill, "name", p+"name")
		str(skill, "description", p+"description")
		list(skill, "tags", p+"tags", false)
	}
	return errs
}
