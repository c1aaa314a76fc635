package yamlnode_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/diag/yamlnode"
)

// sameTree reports the first difference between the tree yaml.v3 built
// (want) and the JSON parser's (got), or "".
func sameTree(want, got *yaml.Node, at string) string {
	w := fmt.Sprintf("kind=%v tag=%q style=%v value=%q line=%d col=%d anchor=%q n=%d comments=%q%q%q",
		want.Kind, want.Tag, want.Style, want.Value, want.Line, want.Column, want.Anchor, len(want.Content), want.HeadComment, want.LineComment, want.FootComment)
	g := fmt.Sprintf("kind=%v tag=%q style=%v value=%q line=%d col=%d anchor=%q n=%d comments=%q%q%q",
		got.Kind, got.Tag, got.Style, got.Value, got.Line, got.Column, got.Anchor, len(got.Content), got.HeadComment, got.LineComment, got.FootComment)
	if w != g {
		return fmt.Sprintf("%s: yaml.v3 %s, JSON parser %s", at, w, g)
	}
	for i := range want.Content {
		if d := sameTree(want.Content[i], got.Content[i], fmt.Sprintf("%s/%d", at, i)); d != "" {
			return d
		}
	}
	return ""
}

// checkSame asserts that when the JSON parser takes data, yaml.v3 reads it
// without a problem into the same tree; it returns whether it took data.
func checkSame(t testing.TB, name string, data []byte) bool {
	t.Helper()
	got, ok := yamlnode.ParseJSON(data)
	if !ok {
		return false
	}
	var probs diag.Set
	want := yamlnode.ParseYAML("f.json", data, &probs)
	if err := probs.ErrOrNil(); err != nil {
		t.Fatalf("%s: the JSON parser took a document yaml.v3 rejects: %v\n%q", name, err, data)
	}
	if d := sameTree(want, got, name); d != "" {
		t.Fatalf("%s\n%q", d, data)
	}
	return true
}

var jsonCases = map[string]struct {
	doc  string
	took bool // whether the JSON parser takes it (else yaml.v3 reads it)
}{
	"object":                {`{"a": [1, 2]}`, true},
	"compact":               {`{"a":[1,-2.5e3,true,false,null,{},[]],"b":{"c":"d"}}`, true},
	"lines and columns":     {"{\n  \"id\": \"x\",\n  \"list\": [\n    \"é\", \"ü\", 3\n  ],\n  \"n\": {\"k\": \"v\"}\n}\n", true},
	"crlf":                  {"{\r\n  \"a\": \"b\",\r\n  \"c\": [1,\r\n 2]\r\n}\r\n", true},
	"lone cr":               {"{\r  \"a\": \"b\",\r  \"c\": 1\r}", true},
	"tabs inside":           {"{\n\t\"a\": \"b\",\n\t\"c\": {\n\t\t\"d\": 1\n\t}\n}\n", true},
	"escapes":               {`{"a": "q\" b\\ s\b f\f n\n r\r t\t u\u00e9\u0000\u2028"}`, true},
	"escaped backslash u":   {`{"a": "\\ud800"}`, true},
	"duplicate keys":        {`{"a": 1, "a": 2}`, true},
	"array root":            {`[{"id": "a"}, {"id": "b"}]`, true},
	"numbers":               {`[0, -0, 1e3, 1E+3, 1.5, -1.5e-7, 12345678901234567890123, 1e400]`, true},
	"strings like literals": {`{"true": "null", "1": "0x10", "<<": "~", "y": "yes"}`, true},
	"unicode":               {`{"名前": "値 ✓ 😀"}`, true},
	"key spanning space":    {`{"a"   :   "b"}`, true},
	"nested deep":           {strings.Repeat("[", 50) + strings.Repeat("]", 50), true},

	"yaml":                 {"a: 1\n", false},
	"scalar root":          {`"a"`, false},
	"number root":          {`5`, false},
	"empty":                {``, false},
	"two values":           {`{} {}`, false},
	"trailing garbage":     {`{"a": 1} x`, false},
	"trailing comma":       {`{"a": 1,}`, false},
	"comment":              {"{\"a\": 1} # c\n", false},
	"escaped slash":        {`{"a": "http:\/\/x"}`, false},
	"surrogate pair":       {`{"a": "\ud83d\ude00"}`, false},
	"lone surrogate":       {`{"a": "\uDC00"}`, false},
	"key colon next line":  {"{\"a\"\n: 1}", false},
	"long key":             {`{"` + strings.Repeat("k", 1100) + `": 1}`, false},
	"tab before root":      {"\t{}", false},
	"tab after root":       {"{}\n\t\n", false},
	"del":                  {"{\"a\": \"\x7f\"}", false},
	"c1 control":           {"{\"a\": \"\u0085\"}", false},
	"line separator":       {"{\"a\": \"\u2028\"}", false},
	"byte order mark":      {"\ufeff{}", false},
	"invalid utf-8":        {"{\"a\": \"\xff\"}", false},
	"too deep":             {strings.Repeat("[", 1001) + strings.Repeat("]", 1001), false},
	"control in string":    {"{\"a\": \"\x01\"}", false},
	"single quotes":        {`{'a': 1}`, false},
	"unquoted key":         {`{a: 1}`, false},
	"leading zero":         {`[01]`, false},
	"flow yaml":            {`{a: [b, c]}`, false},
	"json then yaml break": {"{\"a\": 1}\n---\n{}", false},
}

func TestParseJSONMatchesYAML(t *testing.T) {
	for name, tt := range jsonCases {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tt.took, checkSame(t, name, []byte(tt.doc)))
		})
	}
}

// TestParseJSONCorpus runs every JSON file of the repository, the routing
// registry when it is there, and the 10,000 synthetic manifests test/loadgen
// loads (compact and indented) through both parsers.
func TestParseJSONCorpus(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	took := 0
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == "node_modules" || e.Name() == ".git") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		if checkSame(t, p, b) {
			took++
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, took, 20, "JSON files the JSON parser took")

	if b, err := os.ReadFile(filepath.Join(root, "..", "shared", "data", "routing", "manifests.json")); err == nil {
		require.True(t, checkSame(t, "routing manifests.json", b))
	}

	n := 10000
	if testing.Short() {
		n = 500
	}
	for i, c := range compiletest.Synthetic(n).All() {
		if c.RequiresScopes == nil {
			c.RequiresScopes = []string{}
		}
		b, err := json.Marshal(c)
		require.NoError(t, err)
		require.True(t, checkSame(t, c.ID, b))
		if i%10 == 0 {
			b, err = json.MarshalIndent(c, "", "\t")
			require.NoError(t, err)
			require.True(t, checkSame(t, c.ID+" indented", b))
		}
	}
}

func FuzzParseJSON(f *testing.F) {
	for _, tt := range jsonCases {
		f.Add([]byte(tt.doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSame(t, "fuzz", data)
	})
}

// TestParseJSONFallbackProblems checks that JSON the JSON parser leaves to yaml.v3 still
// gets yaml.v3's problems from Parse.
func TestParseJSONFallbackProblems(t *testing.T) {
	var probs diag.Set
	n := yamlnode.Parse("f.json", []byte(`{"a": "\ud83d\ude00"}`), &probs)
	require.Nil(t, n)
	require.ErrorContains(t, probs.ErrOrNil(), "f.json: syntax error: found invalid Unicode character escape code")
}

func BenchmarkParseJSONManifest(b *testing.B) {
	c := compiletest.Synthetic(1).All()[0]
	if c.RequiresScopes == nil {
		c.RequiresScopes = []string{}
	}
	data, err := json.Marshal(c)
	require.NoError(b, err)
	b.Run("yaml.v3", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var probs diag.Set
			yamlnode.ParseYAML("f.json", data, &probs)
		}
	})
	b.Run("Parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var probs diag.Set
			yamlnode.Parse("f.json", data, &probs)
		}
	})
}
