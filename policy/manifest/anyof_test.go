package manifest_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
)

const anyOfDoc = `id: decommission-vehicle
state: ga
visibility: extended
skill: {name: Decommission, description: Takes a vehicle out of service., tags: [fleet, destructive]}
requires_scopes: [fleet.read]
requires_any_of:
  - [fleet.admin]
  - [fleet.dispatch, fleet.shift_lead]
tenants: "*"
handler: h
`

func loadAnyOf(t *testing.T, doc string) (*manifest.Registry, error) {
	t.Helper()
	return manifest.Load([]manifest.Dir{{FS: fstest.MapFS{"a.yaml": {Data: []byte(doc)}}, Name: "capabilities"}}, manifest.Options{})
}

func TestRequiresAnyOf(t *testing.T) {
	reg, err := loadAnyOf(t, anyOfDoc)
	require.NoError(t, err)
	c, ok := reg.Get("decommission-vehicle")
	require.True(t, ok)
	require.Equal(t, [][]string{{"fleet.admin"}, {"fleet.dispatch", "fleet.shift_lead"}}, c.RequiresAnyOf)
	require.Equal(t, 7, c.Source.AnyOfLine)

	// The scopes a caller's alternatives bring: requires_scopes and every
	// alternative held in full.
	require.Equal(t, []string{"fleet.admin", "fleet.read"}, c.ScopesFor([]string{"fleet.admin", "fleet.read", "other"}))
	require.Equal(t, []string{"fleet.dispatch", "fleet.read", "fleet.shift_lead"}, c.ScopesFor([]string{"fleet.shift_lead", "fleet.dispatch"}))
	require.Equal(t, []string{"fleet.read"}, c.ScopesFor([]string{"fleet.dispatch"}))
	require.Equal(t, [][]string{{"fleet.admin", "fleet.read"}, {"fleet.dispatch", "fleet.read", "fleet.shift_lead"}}, c.ScopeSets())
	plain := manifest.Capability{RequiresScopes: []string{"b", "a", "b"}}
	require.Equal(t, [][]string{{"a", "b"}}, plain.ScopeSets())
}

// Every wrong shape of requires_any_of is one problem at its line, naming
// the element.
func TestRequiresAnyOfProblems(t *testing.T) {
	const alts = "requires_any_of:\n  - [fleet.admin]\n  - [fleet.dispatch, fleet.shift_lead]\n"
	tests := map[string]struct{ to, want string }{
		"not a list":      {"requires_any_of: fleet.admin\n", `capabilities/a.yaml:6: requires_any_of: want a list of alternatives, each a list of scopes (requires_any_of: [[fleet.admin], [fleet.dispatch, fleet.shift_lead]]), got a string`},
		"empty":           {"requires_any_of: []\n", `capabilities/a.yaml:6: requires_any_of: empty list: list at least two alternatives, or leave the field out`},
		"one alternative": {"requires_any_of: [[fleet.admin]]\n", `capabilities/a.yaml:6: requires_any_of: one alternative is no choice: list its scopes under requires_scopes, or add another alternative`},
		"flat list": {"requires_any_of: [fleet.admin, fleet.dispatch]\n", `capabilities/a.yaml:6: requires_any_of[0]: want a list of scopes (an alternative), got a string
capabilities/a.yaml:6: requires_any_of[1]: want a list of scopes (an alternative), got a string`},
		"empty alternative": {"requires_any_of:\n  - []\n  - [fleet.admin]\n", `capabilities/a.yaml:7: requires_any_of[0]: empty alternative: it would grant every caller; list its scopes`},
		"whitespace":        {"requires_any_of:\n  - [fleet.admin]\n  - [fleet.dispatch, \"shift lead\"]\n", `capabilities/a.yaml:8: requires_any_of[1][1]: "shift lead" contains whitespace: list each scope separately`},
		"not a string":      {"requires_any_of:\n  - [fleet.admin]\n  - [fleet.dispatch, 3]\n", `capabilities/a.yaml:8: requires_any_of[1][1]: want a string, got an integer`},
		"repeated":          {"requires_any_of:\n  - [a, b]\n  - [fleet.admin]\n  - [b, a]\n", `capabilities/a.yaml:9: requires_any_of[2]: the same alternative as requires_any_of[0]`},
		"held by all-of":    {"requires_any_of:\n  - [fleet.read]\n  - [fleet.admin]\n", `capabilities/a.yaml:7: requires_any_of[0]: requires_scopes already holds every scope of this alternative, so every entitled caller holds it and the other alternatives add nothing: move the scopes the alternatives share to requires_scopes`},
		"misspelt":          {strings.Replace(alts, "requires_any_of", "requires_anyof", 1), `capabilities/a.yaml:6: requires_anyof: unknown field; did you mean requires_any_of?`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(anyOfDoc, alts, tt.to, 1)
			require.NotEqual(t, anyOfDoc, src)
			reg, err := loadAnyOf(t, src)
			require.Nil(t, reg)
			require.EqualError(t, err, tt.want)
		})
	}
}
