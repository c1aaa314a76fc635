package compile

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
)

func TestFromWireDataSchemas(t *testing.T) {
	entry := func(schema any) map[string]any {
		return map[string]any{
			"id": "x", "state": "ga", "visibility": "public", "tenants": "*", "handler": "h", "requires_scopes": []any{},
			"skill": map[string]any{"name": "X", "description": "x", "tags": []any{"t"}, "data_schemas": []any{schema}},
		}
	}
	c, err := fromWire("x", entry(map[string]any{"type": "object", "required": []any{"a"}}))
	require.NoError(t, err)
	require.Len(t, c.Skill.DataSchemas, 1)
	require.True(t, c.Skill.DataSchemas[0].Matches(map[string]any{"a": 1.0}))

	_, err = fromWire("x", entry(map[string]any{"type": "objekt"}))
	require.ErrorContains(t, err, "registry x: skill.data_schemas[0]: not a valid JSON Schema")
	_, err = fromWire("x", entry(map[string]any{"$ref": "file:///etc/passwd"}))
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
	c, err := fromWire(m.ID, toWire(m))
	require.NoError(t, err)
	require.Equal(t, m.Routing, c.Routing)

	w := toWire(m)
	w["routing"] = map[string]any{"mode": "sometimes"}
	_, err = fromWire(m.ID, w)
	require.ErrorContains(t, err, `routing.mode "sometimes" is not a routing mode`)
	delete(w, "routing")
	c, err = fromWire(m.ID, w)
	require.NoError(t, err)
	require.Equal(t, manifest.RoutingAuto, c.Routing.EffectiveMode())
}
