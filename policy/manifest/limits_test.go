package manifest_test

import (
	"encoding/json"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
)

func TestLimitInt(t *testing.T) {
	tests := []struct {
		name           string
		v              any
		want           int64
		present, valid bool
	}{
		{name: "int", v: 5, want: 5, present: true, valid: true},
		{name: "int64", v: int64(1 << 40), want: 1 << 40, present: true, valid: true},
		{name: "whole float64", v: float64(200), want: 200, present: true, valid: true},
		{name: "json.Number", v: json.Number("4096"), want: 4096, present: true, valid: true},
		{name: "json.Number with exponent", v: json.Number("1e3"), want: 1000, present: true, valid: true},
		{name: "zero", v: 0, present: true},
		{name: "negative", v: int64(-1), present: true},
		{name: "fraction", v: 1.5, present: true},
		{name: "fractional json.Number", v: json.Number("2.5"), present: true},
		{name: "string", v: "10", present: true},
		{name: "bool", v: true, present: true},
		{name: "huge float", v: 1e300, present: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, present, valid := manifest.LimitInt(map[string]any{"max_parts": tt.v}, "max_parts")
			require.Equal(t, tt.present, present)
			require.Equal(t, tt.valid, valid)
			if tt.valid {
				require.Equal(t, tt.want, n)
			}
		})
	}
	_, present, valid := manifest.LimitInt(nil, "max_parts")
	require.False(t, present)
	require.False(t, valid)
}

func TestParseLegacyEnforcedLimits(t *testing.T) {
	const head = "id: a\nstate: ga\nvisibility: public\nskill: {name: A, description: B, tags: [c]}\ntenants: \"*\"\nhandler: h\n"
	c, err := manifest.Parse("x.yaml", []byte(head+"limits:\n  max_body_bytes: 65536\n  max_parts: 4\n  max_file_bytes: 1048576\n  cost_class: high\n"))
	require.NoError(t, err)
	require.Equal(t, map[string]any{"max_body_bytes": int64(65536), "max_parts": int64(4), "max_file_bytes": int64(1048576), "cost_class": "high"}, c.Limits)

	tests := map[string]struct {
		limits string
		want   string
	}{
		"zero":     {"limits:\n  max_parts: 0\n", `x.yaml:8: limits.max_parts: want a positive whole number, got 0`},
		"negative": {"limits:\n  max_body_bytes: -5\n", `x.yaml:8: limits.max_body_bytes: want a positive whole number, got -5`},
		"fraction": {"limits:\n  max_file_bytes: 1.5\n", `x.yaml:8: limits.max_file_bytes: want a positive whole number, got 1.5`},
		"string":   {"limits:\n  cost_class: low\n  max_parts: \"4\"\n", `x.yaml:9: limits.max_parts: want a positive whole number, got the string "4"`},
		"mapping":  {"limits:\n  max_parts: {n: 4}\n", `x.yaml:8: limits.max_parts: want a positive whole number, got a mapping`},
		"all three": {"limits: {max_body_bytes: 0, max_parts: x, max_file_bytes: [1]}\n",
			"x.yaml:7: limits.max_body_bytes: want a positive whole number, got 0\n" +
				"x.yaml:7: limits.max_file_bytes: want a positive whole number, got a list\n" +
				`x.yaml:7: limits.max_parts: want a positive whole number, got the string "x"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := manifest.Parse("x.yaml", []byte(head+tt.limits))
			require.Nil(t, c)
			require.EqualError(t, err, tt.want)
		})
	}
}

const limitsHead = "id: a\nstate: ga\nvisibility: public\nskill: {name: A, description: B, tags: [c]}\ntenants: \"*\"\nhandler: h\n"

func loadOne(t *testing.T, doc string) (*manifest.Registry, error) {
	t.Helper()
	return manifest.Load([]manifest.Dir{{FS: fstest.MapFS{"a.yaml": {Data: []byte(doc)}}, Name: "capabilities"}}, manifest.Options{})
}

// enforced_limits is a closed vocabulary: every limit capgate enforces, and
// nothing else, merged with the free-form limits the policy hands on.
func TestEnforcedLimits(t *testing.T) {
	reg, err := loadOne(t, limitsHead+"enforced_limits: {max_body_bytes: 65536, max_parts: 4, max_file_bytes: 1048576}\nlimits: {cost_class: high, max_pages: 9}\n")
	require.NoError(t, err)
	c, _ := reg.Get("a")
	require.Equal(t, map[string]any{"max_body_bytes": int64(65536), "max_parts": int64(4), "max_file_bytes": int64(1048576), "cost_class": "high", "max_pages": int64(9)}, c.Limits)
	require.Empty(t, reg.Warnings())
	for _, name := range manifest.EnforcedLimits {
		n, present, valid := manifest.LimitInt(c.Limits, name)
		require.True(t, present && valid && n > 0, name)
	}

	tests := map[string]struct{ limits, want string }{
		// The example: one edit from an enforced limit in the free-form map.
		"misspelt in limits":     {"limits: {max_part: 3}\n", "capabilities/a.yaml:7: limits.max_part: not a limit capgate enforces; did you mean enforced_limits.max_parts? (a limit for the handler to enforce needs a name that is not a misspelling of one capgate enforces)"},
		"case in limits":         {"limits: {Max_Parts: 3}\n", "capabilities/a.yaml:7: limits.Max_Parts: not a limit capgate enforces; did you mean enforced_limits.max_parts? (a limit for the handler to enforce needs a name that is not a misspelling of one capgate enforces)"},
		"misspelt":               {"enforced_limits: {max_part: 3}\n", "capabilities/a.yaml:7: enforced_limits.max_part: not a limit capgate enforces; did you mean max_parts?"},
		"misspelt body":          {"enforced_limits:\n  max_body_byte: 3\n", "capabilities/a.yaml:8: enforced_limits.max_body_byte: not a limit capgate enforces; did you mean max_body_bytes?"},
		"unknown":                {"enforced_limits: {cost_class: high}\n", "capabilities/a.yaml:7: enforced_limits.cost_class: not a limit capgate enforces (known: max_body_bytes, max_parts, max_file_bytes); a limit for the handler to enforce goes under limits"},
		"zero":                   {"enforced_limits: {max_parts: 0}\n", "capabilities/a.yaml:7: enforced_limits.max_parts: want a positive whole number, got 0"},
		"string":                 {"enforced_limits:\n  max_parts: \"4\"\n", `capabilities/a.yaml:8: enforced_limits.max_parts: want a positive whole number, got the string "4"`},
		"not a mapping":          {"enforced_limits: [max_parts]\n", "capabilities/a.yaml:7: enforced_limits: want a mapping of max_body_bytes, max_parts, max_file_bytes, got a list"},
		"in both":                {"limits: {max_parts: 3}\nenforced_limits: {max_parts: 3}\n", "capabilities/a.yaml:8: enforced_limits.max_parts: also given as limits.max_parts: keep it under enforced_limits only"},
		"misspelt top-level key": {"enforced_limit: {max_parts: 3}\n", "capabilities/a.yaml:7: enforced_limit: unknown field; did you mean enforced_limits?"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			reg, err := loadOne(t, limitsHead+tt.limits)
			require.Nil(t, reg)
			require.EqualError(t, err, tt.want)
		})
	}
}

// The spelling before enforced_limits still works, with a warning that
// names the file, the line and the new spelling.
func TestLegacyEnforcedLimitWarns(t *testing.T) {
	reg, err := loadOne(t, limitsHead+"limits:\n  cost_class: high\n  max_parts: 3\n")
	require.NoError(t, err)
	c, _ := reg.Get("a")
	n, _, valid := manifest.LimitInt(c.Limits, manifest.LimitMaxParts)
	require.True(t, valid)
	require.Equal(t, int64(3), n)
	require.Len(t, reg.Warnings(), 1)
	require.Equal(t, "capabilities/a.yaml:9: limits.max_parts: deprecated spelling: capgate enforces max_parts, now written under enforced_limits (enforced_limits: {max_parts: 3}); it is still enforced", reg.Warnings()[0].String())
}
