package compile

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
)

// TestRoutingExamplesRoundTrip: routing.learn, routing.examples_file and the
// examples read from it travel in a bundle's registry (a bundle-fed sidecar
// has no manifests folder to read them from).
func TestRoutingExamplesRoundTrip(t *testing.T) {
	off := false
	m := &manifest.Capability{ID: "book", State: manifest.StateGA, Visibility: manifest.VisibilityPublic,
		Skill: manifest.Skill{Name: "Book", Description: "Books.", Tags: []string{}}, Tenants: manifest.Tenants{All: true}, Handler: "h",
		Routing:         manifest.Routing{Learn: &off, ExamplesFile: "book.examples.txt"},
		RoutingExamples: []string{"i need to move my flight", "rebook me"}}
	c, err := registryEntry(m.ID, entryOf(t, m))
	require.NoError(t, err)
	require.Equal(t, m.Routing.ExamplesFile, c.Routing.ExamplesFile)
	require.Equal(t, m.Routing.Learn, c.Routing.Learn)
	require.Equal(t, m.RoutingExamples, c.RoutingExamples)
	require.Empty(t, c.Skill.Examples)
}
