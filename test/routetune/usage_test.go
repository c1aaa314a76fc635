package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/router/classifier"
	"github.com/capgate/capgate/sidecar/router/learn"
)

// TestUsageFoldsStayInUsage: the folds a change to the classifier is chosen
// on (usage.go) hold ten examples per skill (five in the last) and read only
// the manifests' examples and the learning curve's usage block, as examples
// (redacted as accepted ones are) and to validate: never a text of its
// evaluation block.
func TestUsageFoldsStayInUsage(t *testing.T) {
	docs, cases := loadData(t)
	usage, eval := classifier.SplitUsage(cases, 0.5)
	manifest := map[string]bool{}
	for _, d := range docs {
		for _, e := range d.Examples {
			manifest[e] = true
		}
	}
	asExample, asCase := map[string]bool{}, map[string]bool{}
	for _, c := range usage {
		asExample[learn.Plain(learn.Redact(c.Text, 0))] = true
		asCase[c.Text] = true
	}
	for e := range manifest {
		asExample[e], asCase[e] = true, true
	}
	// The blocks differ: the test would pass vacuously if they did not.
	for _, c := range eval {
		require.False(t, asCase[c.Text] && !manifest[c.Text], "%q is in both blocks", c.Text)
	}
	folds := usageFolds(docs, cases)
	require.Len(t, folds, 4)
	for _, f := range folds {
		require.Len(t, f.docs, len(docs), f.name)
		want := 10
		if f.name == "five" {
			want = 5
		}
		for _, d := range f.docs {
			require.Len(t, d.Examples, want, "%s: %s", f.name, d.ID)
			for _, e := range d.Examples {
				require.True(t, asExample[e], "%s: %s has %q as an example, not from the usage block", f.name, d.ID, e)
			}
		}
		require.NotEmpty(t, f.val, f.name)
		for _, c := range f.val {
			require.True(t, asCase[c.Text], "%s validates on %q, not from the usage block", f.name, c.Text)
		}
	}
}
