package compile

import (
	"bytes"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/manifest"
)

// anyOfCaps is the compile fixture with requires_any_of on two
// capabilities (one with its alternatives out of order, to be sorted).
func anyOfCaps() []manifest.Capability {
	caps := compiletest.Capabilities()
	for i := range caps {
		switch caps[i].ID {
		case "audit-ledger":
			caps[i].RequiresAnyOf = [][]string{{"audit.admin"}, {"audit.read", "audit.lead"}}
		case "export-ledger":
			caps[i].RequiresAnyOf = [][]string{{"export.bulk"}, {"export.one"}}
		}
	}
	return caps
}

// requires_any_of reaches the policy as a fact of the capability and of
// its profile (each alternative sorted), is part of the revision, is
// stored the same by Store and Data, and survives a bundle; capabilities
// without it keep the profile keys they had.
func TestRequiresAnyOfCompiles(t *testing.T) {
	plain, err := Build(compiletest.Registry(), compiletest.Auth(), nil)
	require.NoError(t, err)
	s, err := Build(manifest.NewRegistry(anyOfCaps()), compiletest.Auth(), nil)
	require.NoError(t, err)
	require.NotEqual(t, plain.Revision, s.Revision, "the alternatives are part of the revision")

	data, err := s.Data()
	require.NoError(t, err)
	caps := data[keyCapabilities].(map[string]any)
	audit := caps["audit-ledger"].(map[string]any)
	require.Equal(t, []any{[]any{"audit.admin"}, []any{"audit.lead", "audit.read"}}, audit["requires_any_of"])
	profiles := data[keyProfiles].(map[string]any)
	require.Equal(t, audit["requires_any_of"], profiles[audit["profile"].(string)].(map[string]any)["requires_any_of"])
	_, has := caps["lookup-invoice"].(map[string]any)["requires_any_of"]
	require.False(t, has, "no fact when there are no alternatives")

	plainData, err := plain.Data()
	require.NoError(t, err)
	for _, id := range []string{"lookup-invoice", "reconcile-invoice", "forecast-cashflow"} {
		require.Equal(t, plainData[keyCapabilities].(map[string]any)[id].(map[string]any)["profile"], caps[id].(map[string]any)["profile"], id)
	}
	require.NotEqual(t, plainData[keyCapabilities].(map[string]any)["audit-ledger"].(map[string]any)["profile"], audit["profile"])

	want, err := ast.InterfaceToValue(data)
	require.NoError(t, err)
	st, err := s.Store()
	require.NoError(t, err)
	got, err := storage.ReadOne(t.Context(), st, storage.MustParsePath("/"+Root))
	require.NoError(t, err)
	require.Equal(t, 0, ast.Compare(want, got), "store %v\nwant %v", got, want)

	var pr profiler
	for _, c := range s.Registry.All() {
		key, p := pr.of(&c)
		wantKey, want := profileOf(&c)
		require.Equal(t, wantKey, key, c.ID)
		require.Equal(t, want, p, c.ID)
	}

	var buf bytes.Buffer
	require.NoError(t, WriteBundle(&buf, s, BundleOptions{}))
	back, err := ReadBundle(&buf, VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, s.Revision, back.Revision)
	c, ok := back.Registry.Get("audit-ledger")
	require.True(t, ok)
	require.Equal(t, [][]string{{"audit.admin"}, {"audit.read", "audit.lead"}}, c.RequiresAnyOf)
}
