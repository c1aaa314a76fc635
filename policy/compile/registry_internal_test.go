package compile

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
)

func TestRegistryEntryDataSchemas(t *testing.T) {
	entry := func(schema any) map[string]any {
		return map[string]any{
			"id": "x", "state": "ga", "visibility": "public", "tenants": "*", "handler": "h", "requires_scopes": []any{},
			"skill": map[string]any{"name": "X", "description": "x", "tags": []any{"t"}, "data_schemas": []any{schema}},
		}
	}
	c, err := registryEntry("x", entry(map[string]any{"type": "object", "required": []any{"a"}}))
	require.NoError(t, err)
	require.Len(t, c.Skill.DataSchemas, 1)
	require.True(t, c.Skill.DataSchemas[0].Matches(map[string]any{"a": 1.0}))

	_, err = registryEntry("x", entry(map[string]any{"type": "objekt"}))
	require.ErrorContains(t, err, "registry x: data schema: not a valid JSON Schema")
	_, err = registryEntry("x", entry(map[string]any{"$ref": "file:///etc/passwd"}))
	require.ErrorContains(t, err, "external references are not allowed")
}

// TestRoutingRoundTrip: a manifest's routing policy travels in the bundle's
// registry (the router of a bundle-fed sidecar reads it there) and back.
func TestRoutingRoundTrip(t *testing.T) {
	m, err := manifest.Parse("x.yaml", []byte(`id: cancel-booking
state: ga
visibility: extended
skill: {name: Cancel a booking, description: Cancels a booking., tags: [travel]}
tenants: "*"
handler: h
routing: {mode: explicit, min_confidence: 0.85}
`))
	require.NoError(t, err)
	require.Equal(t, manifest.Routing{Mode: manifest.RoutingExplicit, MinConfidence: 0.85}, m.Routing)
	c, err := registryEntry(m.ID, entryOf(t, m))
	require.NoError(t, err)
	require.Equal(t, m.Routing, c.Routing)

	w := entryOf(t, m)
	w["routing"] = map[string]any{"mode": "sometimes"}
	_, err = registryEntry(m.ID, w)
	require.ErrorContains(t, err, `routing.mode: "sometimes" is not one of auto, confirm, explicit`)
	delete(w, "routing")
	c, err = registryEntry(m.ID, w)
	require.NoError(t, err)
	require.Equal(t, manifest.RoutingAuto, c.Routing.EffectiveMode())
}

// entryOf is c as a bundle's registry holds it: plain JSON values.
func entryOf(t *testing.T, c *manifest.Capability) map[string]any {
	t.Helper()
	m, err := plainJSON(c)
	require.NoError(t, err)
	return m
}
