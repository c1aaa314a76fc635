package compile

import (
	"testing"

	"github.com/stretchr/testify/require"
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
