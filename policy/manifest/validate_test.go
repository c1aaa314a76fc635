package manifest_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
)

// validCapability sets every field of the format.
func validCapability(t *testing.T) manifest.Capability {
	t.Helper()
	schema, err := manifest.CompileDataSchema(map[string]any{"type": "object", "required": []any{"invoice"}})
	require.NoError(t, err)
	return manifest.Capability{
		ID: "reconcile-invoice", State: manifest.StateDeprecated, Visibility: manifest.VisibilityExtended,
		ReplacedBy: "reconcile-invoice-v2",
		Skill: manifest.Skill{
			Name: "Reconcile", Description: "Reconciles an invoice.", Tags: []string{"finance"},
			Examples: []string{"Reconcile INV-1"}, InputModes: []string{"text/plain"}, OutputModes: []string{"application/json"},
			DataSchemas: []manifest.DataSchema{schema},
		},
		RequiresScopes: []string{"finance.read"},
		RequiresAnyOf:  [][]string{{"finance.write"}, {"finance.admin", "finance.audit"}},
		Tenants:        manifest.Tenants{List: []string{"acme"}},
		Handler:        "recon.v3",
		Limits:         map[string]any{"max_parts": 3, "pages": 40},
		Owner:          "finance-agents",
		Routing:        manifest.Routing{Mode: manifest.RoutingConfirm, MinConfidence: 0.8},
	}
}

// TestJSONIsCanonical: a capability's JSON (the bundle's registry entry,
// whose bytes the bundle revision hashes) has its keys sorted at every
// level, as json.Marshal writes a map: each struct of the format declares
// its fields in JSON-name order.
func TestJSONIsCanonical(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[manifest.Capability](), reflect.TypeFor[manifest.Skill](), reflect.TypeFor[manifest.Routing]()} {
		var names []string
		for f := range typ.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "-" {
				names = append(names, name)
			}
		}
		require.True(t, slices.IsSorted(names), "%s: declare the fields in the order of their JSON names (the JSON must be canonical): %v", typ, names)
	}
	c := validCapability(t)
	b, err := json.Marshal(&c)
	require.NoError(t, err)
	var generic any
	require.NoError(t, json.Unmarshal(b, &generic))
	canonical, err := json.Marshal(generic)
	require.NoError(t, err)
	require.Equal(t, string(canonical), string(b))

	var back manifest.Capability
	require.NoError(t, json.Unmarshal(b, &back))
	require.NoError(t, back.Validate())
	require.Equal(t, c.ID, back.ID)
	require.Equal(t, c.RequiresAnyOf, back.RequiresAnyOf)
	require.Equal(t, c.Tenants, back.Tenants)
	require.Equal(t, c.Routing, back.Routing)
	require.True(t, back.Skill.DataSchemas[0].Matches(map[string]any{"invoice": "INV-1"}))

	// The lists the format requires are written as [], never null.
	b, err = json.Marshal(manifest.Capability{})
	require.NoError(t, err)
	require.Contains(t, string(b), `"requires_scopes":[]`)
	require.Contains(t, string(b), `"tags":[]`)
	require.Contains(t, string(b), `"tenants":[]`)
}

// TestValidateAgreesWithTheDecoder: each value rule gives the same problem
// whether the manifest is a file (the YAML decoder, which reads JSON too)
// or a capability decoded from JSON (Validate, as a bundle is read).
func TestValidateAgreesWithTheDecoder(t *testing.T) {
	tests := map[string]struct {
		edit func(c *manifest.Capability)
		want string
	}{
		"id pattern":               {func(c *manifest.Capability) { c.ID = "Reconcile_Invoice" }, `id: "Reconcile_Invoice" does not match`},
		"blank id":                 {func(c *manifest.Capability) { c.ID = " " }, "id: required"},
		"state":                    {func(c *manifest.Capability) { c.State = "gaa" }, `state: "gaa" is not one of preview, ga, deprecated, removed; did you mean ga?`},
		"blank state":              {func(c *manifest.Capability) { c.State = "" }, "state: required: one of"},
		"visibility":               {func(c *manifest.Capability) { c.Visibility = "private" }, `visibility: "private" is not one of public, extended, internal`},
		"removed, no replacement":  {func(c *manifest.Capability) { c.State, c.ReplacedBy = manifest.StateRemoved, "" }, "replaced_by: required when state is removed"},
		"blank skill name":         {func(c *manifest.Capability) { c.Skill.Name = "" }, "skill.name: required"},
		"blank description":        {func(c *manifest.Capability) { c.Skill.Description = " " }, "skill.description: required"},
		"blank tag":                {func(c *manifest.Capability) { c.Skill.Tags = []string{"finance", " "} }, "skill.tags[1]: empty tag"},
		"media type":               {func(c *manifest.Capability) { c.Skill.InputModes = []string{"pdf"} }, `skill.inputModes[0]: "pdf" is not a media type`},
		"media type twice":         {func(c *manifest.Capability) { c.Skill.OutputModes = []string{"a/b", "a/b"} }, `skill.outputModes[1]: "a/b" is listed twice`},
		"empty scope":              {func(c *manifest.Capability) { c.RequiresScopes = []string{""} }, "requires_scopes[0]: empty scope"},
		"scope with a space":       {func(c *manifest.Capability) { c.RequiresScopes = []string{"a b"} }, `requires_scopes[0]: "a b" contains whitespace`},
		"one alternative":          {func(c *manifest.Capability) { c.RequiresAnyOf = [][]string{{"x"}} }, "requires_any_of: one alternative is no choice"},
		"empty alternative":        {func(c *manifest.Capability) { c.RequiresAnyOf = [][]string{{"x"}, {}} }, "requires_any_of[1]: empty alternative"},
		"alternative twice":        {func(c *manifest.Capability) { c.RequiresAnyOf = [][]string{{"x", "y"}, {"y", "x"}} }, "requires_any_of[1]: the same alternative as requires_any_of[0]"},
		"alternative already held": {func(c *manifest.Capability) { c.RequiresAnyOf = [][]string{{"finance.read"}, {"y"}} }, "requires_any_of[0]: requires_scopes already holds"},
		"scope in an alternative":  {func(c *manifest.Capability) { c.RequiresAnyOf = [][]string{{"x"}, {"y z"}} }, `requires_any_of[1][0]: "y z" contains whitespace`},
		"empty tenant list":        {func(c *manifest.Capability) { c.Tenants = manifest.Tenants{List: []string{}} }, "tenants: empty list"},
		"star in a tenant list":    {func(c *manifest.Capability) { c.Tenants = manifest.Tenants{List: []string{"acme", "*"}} }, `tenants[1]: "*" must stand alone`},
		"blank tenant":             {func(c *manifest.Capability) { c.Tenants = manifest.Tenants{List: []string{""}} }, "tenants[0]: empty tenant id"},
		"blank handler":            {func(c *manifest.Capability) { c.Handler = "" }, "handler: required"},
		"enforced limit":           {func(c *manifest.Capability) { c.Limits = map[string]any{"max_parts": 0} }, "limits.max_parts: want a positive whole number, got 0"},
		"routing mode":             {func(c *manifest.Capability) { c.Routing.Mode = "sometimes" }, `routing.mode: "sometimes" is not one of auto, confirm, explicit`},
		"min confidence":           {func(c *manifest.Capability) { c.Routing.MinConfidence = 1.5 }, "routing.min_confidence: 1.5 is outside (0, 1]"},
	}
	base := validCapability(t)
	require.NoError(t, base.Validate())
	b, err := json.Marshal(&base)
	require.NoError(t, err)
	_, err = manifest.Parse("c.json", b)
	require.NoError(t, err)
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := validCapability(t)
			tt.edit(&c)
			err := c.Validate()
			require.ErrorContains(t, err, tt.want)
			b, err := json.Marshal(&c)
			require.NoError(t, err)
			_, err = manifest.Parse("c.json", b)
			require.ErrorContains(t, err, tt.want)
			require.Contains(t, err.Error(), "c.json:1: "+tt.want, "the file's problem names its line")
		})
	}
}
