// Package yamlnode reads YAML (and JSON) documents as yaml.v3 nodes for loaders that report every problem with its line.
package yamlnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/diag"
)

// Limits on what Value expands, so that aliases cannot turn a small
// document into an exponentially large value.
const (
	MaxDepth = 100    // nesting of mappings and lists
	MaxNodes = 100000 // nodes visited, counting every alias expansion
)

// Tags of the YAML core schema.
const (
	TagStr       = "!!str"
	TagInt       = "!!int"
	TagFloat     = "!!float"
	TagBool      = "!!bool"
	TagNull      = "!!null"
	TagTimestamp = "!!timestamp"
	TagBinary    = "!!binary"
)

var lineErr = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Parse reads exactly one document from data and returns its root node
// (never a DocumentNode). Problems (syntax errors, an empty file, a second
// document) are added to probs under file; the root is nil when there is
// nothing usable. A JSON object or array is read by a faster JSON parser
// into the same tree yaml.v3 builds (see parseJSON).
func Parse(file string, data []byte, probs *diag.Set) (root *yaml.Node) {
	defer func() {
		// The parser is third-party code: a panic on hostile input must
		// become a problem, never a crash of the process loading it.
		if r := recover(); r != nil {
			probs.Add(file, 0, "", "syntax error: parser failed: %v", r)
			root = nil
		}
	}()
	if root, ok := parseJSON(data); ok {
		return root
	}
	return parseYAML(file, data, probs)
}

// parseYAML is Parse with yaml.v3 alone, for every document.
func parseYAML(file string, data []byte, probs *diag.Set) (root *yaml.Node) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			probs.Add(file, 0, "", "empty file: want one document")
			return nil
		}
		addSyntax(file, data, err, probs)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		probs.Add(file, 0, "", "empty file: want one document")
		return nil
	}
	root = doc.Content[0]
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		line := next.Line
		if next.Kind == yaml.DocumentNode && len(next.Content) > 0 {
			line = next.Content[0].Line
		}
		probs.Add(file, line, "", "more than one document: put one document in each file")
	case errors.Is(err, io.EOF):
	default:
		addSyntax(file, data, err, probs)
	}
	return root
}

func addSyntax(file string, data []byte, err error, probs *diag.Set) {
	msg := err.Error()
	m := lineErr.FindStringSubmatch(msg)
	if m == nil {
		probs.Add(file, 0, "", "syntax error: %s", strings.TrimPrefix(msg, "yaml: "))
		return
	}
	line, _ := strconv.Atoi(m[1])
	text := m[2]
	// yaml.v3 reports the line where the enclosing block began; the line
	// the parser stopped at is the first one whose prefix no longer parses.
	stop := stopLine(data, line)
	if indentation(text) {
		hint := "likely an indentation problem: keys of one mapping and items of one list must line up, and tabs cannot indent"
		if stop != line {
			probs.Add(file, stop, "", "syntax error: %s (in the block from line %d); %s", text, line, hint)
		} else {
			probs.Add(file, stop, "", "syntax error: %s; %s", text, hint)
		}
		return
	}
	if stop != line {
		probs.Add(file, stop, "", "syntax error: %s (in the block from line %d)", text, line)
		return
	}
	probs.Add(file, line, "", "syntax error: %s", text)
}

// maxStopScan bounds how many lines past the reported one stopLine tries.
const maxStopScan = 2000

// stopLine finds the first line, from the reported one on, such that the
// document cut after it fails with an error other than an early end (a cut
// inside a quoted string or flow collection): the line the parser stopped
// at. It is the reported line when no cut tells more.
func stopLine(data []byte, reported int) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	for k := reported; k <= len(lines) && k < reported+maxStopScan; k++ {
		var n yaml.Node
		err := yaml.Unmarshal(bytes.Join(lines[:k], nil), &n)
		if err != nil && !earlyEnd(err.Error()) {
			return k
		}
	}
	return reported
}

func earlyEnd(msg string) bool {
	return strings.Contains(msg, "end of stream") || strings.Contains(msg, "did not find expected ',' or")
}

// indentation reports whether a yaml.v3 syntax error is most often caused
// by a line indented too much, too little, or with a tab.
func indentation(msg string) bool {
	for _, s := range []string{
		"did not find expected key",
		"mapping values are not allowed in this context",
		"did not find expected '-' indicator",
		"tab character",
		"found character that cannot start any token",
		"block sequence entries are not allowed",
		"did not find expected <document start>",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Resolve follows an alias to the node it names.
func Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < MaxDepth; i++ {
		n = n.Alias
	}
	return n
}

// KindName names what a node holds, for "want X, got Y" messages.
func KindName(n *yaml.Node) string {
	n = Resolve(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case TagStr:
			return "a string"
		case TagInt:
			return "an integer"
		case TagFloat:
			return "a number"
		case TagBool:
			return "a boolean"
		case TagNull:
			return "null"
		case TagTimestamp:
			return "a timestamp"
		case TagBinary:
			return "binary data"
		}
		return "a " + n.ShortTag() + " value"
	case yaml.AliasNode:
		return "an alias"
	}
	return "an unknown node"
}

// IsString reports whether n is a plain string scalar.
func IsString(n *yaml.Node) bool {
	n = Resolve(n)
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == TagStr
}

// IsNull reports whether n is absent or null.
func IsNull(n *yaml.Node) bool {
	n = Resolve(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == TagNull)
}

// Pair is one key and value of a mapping.
type Pair struct {
	Key   string
	KeyN  *yaml.Node
	Value *yaml.Node
}

// Pairs lists the entries of a mapping node. Non-string keys and duplicate
// keys are reported under path (the path of the mapping itself) and left out.
func Pairs(file string, n *yaml.Node, path string, probs *diag.Set) []Pair {
	n = Resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	seen := make(map[string]int, len(n.Content)/2)
	out := make([]Pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == TagNull {
			probs.Add(file, k.Line, path, "keys must be strings, got %s", KindName(k))
			continue
		}
		field := Join(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			probs.Add(file, k.Line, field, "duplicate key (first defined at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, Pair{Key: k.Value, KeyN: k, Value: v})
	}
	return out
}

// Join appends a key to a field path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Index appends a list index to a field path.
func Index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// Value converts a node into JSON-compatible Go values: map[string]any,
// []any, string, int64, float64, bool and nil. Problems (non-string keys,
// duplicate keys, non-finite numbers, nesting beyond MaxDepth) are reported
// under path; the bool is false when any was found.
func Value(file string, n *yaml.Node, path string, probs *diag.Set) (any, bool) {
	budget := MaxNodes
	return value(file, n, path, probs, 0, &budget)
}

func value(file string, n *yaml.Node, path string, probs *diag.Set, depth int, budget *int) (any, bool) {
	if depth > MaxDepth {
		probs.Add(file, n.Line, path, "nested more than %d levels deep", MaxDepth)
		return nil, false
	}
	if *budget--; *budget < 0 {
		if *budget == -1 {
			probs.Add(file, n.Line, path, "more than %d values (counting alias expansions)", MaxNodes)
		}
		return nil, false
	}
	n = Resolve(n)
	if n == nil {
		return nil, true
	}
	switch n.Kind {
	case yaml.MappingNode:
		before := len(probs.Problems)
		m := make(map[string]any, len(n.Content)/2)
		ok := true
		for _, p := range Pairs(file, n, path, probs) {
			v, vok := value(file, p.Value, Join(path, p.Key), probs, depth+1, budget)
			ok = ok && vok
			m[p.Key] = v
		}
		return m, ok && len(probs.Problems) == before
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		ok := true
		for i, c := range n.Content {
			v, vok := value(file, c, Index(path, i), probs, depth+1, budget)
			ok = ok && vok
			s = append(s, v)
		}
		return s, ok
	case yaml.ScalarNode:
		return scalar(file, n, path, probs)
	}
	probs.Add(file, n.Line, path, "unsupported YAML node")
	return nil, false
}

func scalar(file string, n *yaml.Node, path string, probs *diag.Set) (any, bool) {
	switch n.ShortTag() {
	case TagNull:
		return nil, true
	case TagBool:
		var b bool
		if err := n.Decode(&b); err != nil {
			probs.Add(file, n.Line, path, "%q is not a boolean", n.Value)
			return nil, false
		}
		return b, true
	case TagInt:
		var i int64
		if err := n.Decode(&i); err == nil {
			return i, true
		}
		fallthrough
	case TagFloat:
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			probs.Add(file, n.Line, path, "%q is not a finite number", n.Value)
			return nil, false
		}
		return f, true
	}
	// Strings, timestamps, binary and custom tags keep their text.
	return n.Value, true
}

// UnknownField is the message for a mapping key that is not among known:
// the known key it most likely misspells (diag.Suggest: case, '_' or '-',
// or a small edit distance) when there is one ("did you mean ...?"), else
// the list of known keys.
func UnknownField(key string, known []string) string {
	if k, ok := diag.Suggest(key, known); ok {
		return "unknown field; did you mean " + k + "?"
	}
	return "unknown field; known fields are " + strings.Join(known, ", ")
}
