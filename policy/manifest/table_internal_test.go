package manifest

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFieldTables: each table's doc numbers are its rows' places (0..n-1, once each), its names
// are unique, and every field of the struct it decodes into has a row: a field added to
// Capability, Skill or Routing without its row fails here (enforced_limits is a row with no
// field of its own: it is merged into limits). A field derived while loading rather than written
// in the manifest (routing_examples: the lines of routing.examples_file) is listed in derived.
func TestFieldTables(t *testing.T) {
	derived := []string{"routing_examples"}
	check := func(t *testing.T, typ reflect.Type, names []string, docs []int, known []string) {
		t.Helper()
		require.ElementsMatch(t, names, slices.Compact(slices.Sorted(slices.Values(names))), "a name twice")
		sorted := slices.Sorted(slices.Values(docs))
		for i, d := range sorted {
			require.Equal(t, i, d, "doc numbers must be 0..%d, each once: %v", len(docs)-1, docs)
		}
		require.ElementsMatch(t, names, known)
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || slices.Contains(derived, name) {
				continue
			}
			require.Contains(t, names, name, "%s.%s has no row in its field table", typ.Name(), f.Name)
		}
	}
	rows := func(n int, at func(i int) (string, int)) ([]string, []int) {
		var names []string
		var docs []int
		for i := range n {
			name, doc := at(i)
			names, docs = append(names, name), append(docs, doc)
		}
		return names, docs
	}
	n, d := rows(len(topTable), func(i int) (string, int) { return topTable[i].name, topTable[i].doc })
	check(t, reflect.TypeFor[Capability](), n, d, topFields)
	n, d = rows(len(skillTable), func(i int) (string, int) { return skillTable[i].name, skillTable[i].doc })
	check(t, reflect.TypeFor[Skill](), n, d, skillFields)
	n, d = rows(len(routingTable), func(i int) (string, int) { return routingTable[i].name, routingTable[i].doc })
	check(t, reflect.TypeFor[Routing](), n, d, routingFields)
}
