package manifest_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
)

const schemaHead = "id: a\nstate: ga\nvisibility: public\ntenants: \"*\"\nhandler: h\nskill:\n  name: A\n  description: B\n  tags: [c]\n"

func TestParseDataSchemas(t *testing.T) {
	c, err := manifest.Parse("x.yaml", []byte(schemaHead+`  data_schemas:
    - type: object
      required: [invoice_id, amount]
      properties:
        invoice_id: {type: string, pattern: "^INV-[0-9]+$"}
        amount: {type: number, minimum: 0}
`))
	require.NoError(t, err)
	require.Len(t, c.Skill.DataSchemas, 1)
	s := c.Skill.DataSchemas[0]
	tests := []struct {
		name string
		data string
		want bool
	}{
		{"matches", `{"invoice_id": "INV-7", "amount": 12.5}`, true},
		{"extra members allowed", `{"invoice_id": "INV-7", "amount": 0, "note": "x"}`, true},
		{"missing member", `{"invoice_id": "INV-7"}`, false},
		{"wrong type", `{"invoice_id": "INV-7", "amount": "12"}`, false},
		{"pattern", `{"invoice_id": "7", "amount": 1}`, false},
		{"not an object", `["INV-7", 1]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v any
			require.NoError(t, json.Unmarshal([]byte(tt.data), &v))
			require.Equal(t, tt.want, s.Matches(v))
		})
	}
	b, err := json.Marshal(c.Skill)
	require.NoError(t, err)
	require.Contains(t, string(b), `"data_schemas":[{"properties":`)

	var back manifest.Skill
	require.NoError(t, json.Unmarshal(b, &back))
	require.Len(t, back.DataSchemas, 1)
	require.True(t, back.DataSchemas[0].Matches(map[string]any{"invoice_id": "INV-1", "amount": 3.0}))
	require.False(t, manifest.DataSchema{}.Matches(map[string]any{}), "the zero schema matches nothing")
}

func TestParseDataSchemasInvalid(t *testing.T) {
	tests := map[string]struct {
		schemas string
		want    string
	}{
		"not a list":     {"  data_schemas: {type: object}\n", "x.yaml:10: skill.data_schemas: want a list of JSON Schemas, got a mapping"},
		"empty list":     {"  data_schemas: []\n", "x.yaml:10: skill.data_schemas: empty list: list at least one JSON Schema, or leave the field out"},
		"entry a string": {"  data_schemas: [object]\n", "x.yaml:10: skill.data_schemas[0]: want a JSON Schema (a mapping), got a string"},
		"unknown type": {"  data_schemas:\n    - {type: object}\n    - {type: objekt}\n",
			"x.yaml:12: skill.data_schemas[1]: not a valid JSON Schema: at /type: value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'"},
		"bad pattern": {"  data_schemas:\n    - properties: {id: {pattern: \"([\"}}\n",
			"x.yaml:11: skill.data_schemas[0]: not a valid JSON Schema: at /properties/id/pattern: '([' is not valid regex"},
		"external ref": {"  data_schemas:\n    - $ref: \"file:///etc/passwd\"\n",
			"external references are not allowed in data schemas"},
		"remote ref": {"  data_schemas:\n    - $ref: \"https://example.com/schema.json\"\n",
			"x.yaml:11: skill.data_schemas[0]: not a valid JSON Schema"},
		"NaN inside": {"  data_schemas:\n    - {maximum: .nan}\n", `x.yaml:11: skill.data_schemas[0].maximum: ".nan" is not a finite number`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := manifest.Parse("x.yaml", []byte(schemaHead+tt.schemas))
			require.Nil(t, c)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestDataSchemaInternalRef(t *testing.T) {
	s, err := manifest.CompileDataSchema(map[string]any{
		"$defs": map[string]any{"id": map[string]any{"type": "string"}},
		"type":  "object", "required": []any{"id"},
		"properties": map[string]any{"id": map[string]any{"$ref": "#/$defs/id"}},
	})
	require.NoError(t, err)
	require.True(t, s.Matches(map[string]any{"id": "x"}))
	require.False(t, s.Matches(map[string]any{"id": 1.0}))
}
