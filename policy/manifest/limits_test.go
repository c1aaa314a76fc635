package manifest_test

import (
	"encoding/json"
	"testing"

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

func TestParseEnforcedLimits(t *testing.T) {
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
