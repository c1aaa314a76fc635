package yamlnode_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/diag/yamlnode"
)

const indentHint = "likely an indentation problem: keys of one mapping and items of one list must line up, and tabs cannot indent"

func TestParse(t *testing.T) {
	tests := map[string]struct {
		doc  string
		want string // "" when the document parses cleanly
	}{
		"one document":   {"a: 1\n", ""},
		"json":           {`{"a": [1, 2]}`, ""},
		"empty":          {"", "f.yaml: empty file: want one document"},
		"only a comment": {"# nothing\n", "f.yaml: empty file: want one document"},
		"two documents":  {"a: 1\n---\nb: 2\n", "f.yaml:3: more than one document: put one document in each file"},
		"tab indent":     {"a:\n\tb: 1\n", "f.yaml:2: syntax error: found character that cannot start any token; " + indentHint},
		"key indented less": {"agent:\n  name: x\n description: y\n",
			"f.yaml:3: syntax error: did not find expected key (in the block from line 2); " + indentHint},
		"key indented more": {"agent:\n  name: x\n    description: y\n",
			"f.yaml:3: syntax error: mapping values are not allowed in this context; " + indentHint},
		"list item in a mapping": {"auth:\n  issuers:\n    - issuer: x\n      audiences: [a]\n     jwks_file: y\n",
			"f.yaml:5: syntax error: did not find expected '-' indicator (in the block from line 2); " + indentHint},
		"tab after spaces": {"agent:\n  name: x\n\tdescription: y\n",
			"f.yaml:3: syntax error: found a tab character that violates indentation (in the block from line 2); " + indentHint},
		"unclosed flow list":   {"a: [b, c\n", "f.yaml:1: syntax error: did not find expected ',' or ']'"},
		"flow list over lines": {"a: [b,\n  c]\nd: [\n", "f.yaml:3: syntax error: did not find expected node content"},
		"bad utf-8":            {"a: \xff\n", "f.yaml: syntax error: invalid leading UTF-8 octet"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var probs diag.Set
			n := yamlnode.Parse("f.yaml", []byte(tt.doc), &probs)
			if tt.want == "" {
				require.NoError(t, probs.ErrOrNil())
				require.NotNil(t, n)
				return
			}
			require.EqualError(t, probs.ErrOrNil(), tt.want)
		})
	}
}

func TestValue(t *testing.T) {
	var probs diag.Set
	n := yamlnode.Parse("f.yaml", []byte("a: 1\nb: 2.5\nc: [x, true, null]\nd: {e: 2024-01-01}\nf: 0x10\n"), &probs)
	require.NotNil(t, n)
	v, ok := yamlnode.Value("f.yaml", n, "", &probs)
	require.True(t, ok)
	require.NoError(t, probs.ErrOrNil())
	require.Equal(t, map[string]any{
		"a": int64(1),
		"b": 2.5,
		"c": []any{"x", true, nil},
		"d": map[string]any{"e": "2024-01-01"},
		"f": int64(16),
	}, v)

	tests := map[string]struct {
		doc  string
		want string
	}{
		"duplicate key":  {"a: 1\na: 2\n", "f.yaml:2: limits.a: duplicate key (first defined at line 1)"},
		"non-string key": {"[1]: 2\n", "f.yaml:1: limits: keys must be strings, got a list"},
		"infinity":       {"a: .inf\n", `f.yaml:1: limits.a: ".inf" is not a finite number`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var probs diag.Set
			n := yamlnode.Parse("f.yaml", []byte(tt.doc), &probs)
			require.NotNil(t, n)
			_, ok := yamlnode.Value("f.yaml", n, "limits", &probs)
			require.False(t, ok)
			require.EqualError(t, probs.ErrOrNil(), tt.want)
		})
	}
}

func TestUnknownField(t *testing.T) {
	known := []string{"replaced_by", "state"}
	require.Equal(t, "unknown field; did you mean replaced_by?", yamlnode.UnknownField("replacedBy", known))
	require.Equal(t, "unknown field; did you mean replaced_by?", yamlnode.UnknownField("Replaced-By", known))
	require.Equal(t, "unknown field; known fields are replaced_by, state", yamlnode.UnknownField("owner", known))
	require.Equal(t, "unknown field; did you mean replaced_by?", yamlnode.UnknownField("replacd_by", known))
	require.Equal(t, "unknown field; did you mean state?", yamlnode.UnknownField("stat", known))
}
