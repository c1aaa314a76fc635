package classifier

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	pm "github.com/capgate/capgate/policy/manifest"
)

// financeIndex indexes the finance example's seven capabilities, as the
// router does.
func financeIndex(tb testing.TB) *Index {
	tb.Helper()
	reg, err := pm.Load([]pm.Dir{{FS: os.DirFS("../../../manifests/finance/capabilities"), Name: "capabilities"}}, pm.Options{})
	require.NoError(tb, err)
	all := reg.All()
	docs := make([]Doc, len(all))
	for i, c := range all {
		docs[i] = Doc{ID: c.ID, Name: c.Skill.Name, Description: c.Skill.Description, Tags: c.Skill.Tags, Examples: c.Skill.Examples}
	}
	return New(docs)
}

// financePublic returns the positions of the finance example's capabilities
// an authenticated caller without scopes may route to.
func financePublic(tb testing.TB, ix *Index) []int {
	tb.Helper()
	var out []int
	for _, id := range []string{"extract-invoice-fields", "lookup-invoice", "lookup-invoice-v1"} {
		i, ok := ix.Lookup(id)
		require.True(tb, ok, id)
		out = append(out, i)
	}
	return out
}

// The finance example's three public skills (an authenticated caller
// without scopes): small talk and vague requests clarify, invoice requests
// route.
func TestFinancePublicSkills(t *testing.T) {
	ix := financeIndex(t)
	pub := financePublic(t, ix)
	for _, text := range []string{"hello there", "help me with this", "hello", "what can you do", "reconcile invoice INV-3 against its PO",
		"what's the weather in Paris", "what's the weather", "what is the weather like today", "who won the game last night"} {
		res := ix.Classify(text, pub)
		require.Less(t, res.Confidence, 0.6, "%q → %s %.3f", text, res.Best, res.Confidence)
	}
	for text, want := range map[string]string{
		"look up invoice INV-1":                "lookup-invoice",
		"extract the fields from this invoice": "extract-invoice-fields",
		"has invoice INV-77 been paid":         "lookup-invoice",
	} {
		res := ix.Classify(text, pub)
		require.Equal(t, want, res.Best, text)
		require.GreaterOrEqual(t, res.Confidence, 0.6, "%q %.3f", text, res.Confidence)
	}
}
