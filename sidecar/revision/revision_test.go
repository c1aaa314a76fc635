package revision_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/revision"
)

func TestBuild(t *testing.T) {
	d, err := deployment.Load("") // the embedded finance example
	require.NoError(t, err)

	full, err := revision.Build(t.Context(), d, revision.Options{})
	require.NoError(t, err)
	require.NotNil(t, full.Router, "the gateway routes with the index")
	require.Equal(t, d.Config.Router.Threshold, full.Router.Threshold())
	require.NotEmpty(t, full.PublicCard)
	require.Regexp(t, `^"[0-9a-f]{32}"$`, full.PublicETag)
	require.Equal(t, d.Snapshot.Revision, full.ID())

	authzOnly, err := revision.Build(t.Context(), d, revision.Options{NoGateway: true})
	require.NoError(t, err)
	require.Nil(t, authzOnly.Router, "an ext_authz-only revision carries no routing index")
	require.Nil(t, authzOnly.Model)
	require.Empty(t, authzOnly.PublicCard, "only the gateway serves the public card")
	require.Empty(t, authzOnly.PublicETag)
	require.Equal(t, full.ExtendedCard, authzOnly.ExtendedCard)
	require.Equal(t, full.Extensions, authzOnly.Extensions)
	require.Equal(t, full.ID(), authzOnly.ID())
	require.Equal(t, "", full.BasePath, "agent.url has no path")

	// Both doors read the base path from the revision: it is agent.url's
	// path, read once, without its trailing slash.
	d.Config.Agent.URL = "https://agent.example/team%2Fa/a2a/"
	for _, o := range []revision.Options{{}, {NoGateway: true}} {
		r, err := revision.Build(t.Context(), d, o)
		require.NoError(t, err)
		require.Equal(t, "/team%2Fa/a2a", r.BasePath)
		require.Equal(t, d.BasePath(), r.BasePath)
	}
}

// TestCardsModifiedSurvivesAnUnchangedReload: the cards' Last-Modified is the build time of the
// revision that changed them; a reload that rebuilds the same revision keeps it, and a changed
// revision takes its own.
func TestCardsModifiedSurvivesAnUnchangedReload(t *testing.T) {
	d, err := deployment.Load("")
	require.NoError(t, err)
	first, err := revision.Build(t.Context(), d, revision.Options{})
	require.NoError(t, err)
	first.CardsModified = first.CardsModified.Add(-time.Hour) // as if built an hour ago
	h := revision.NewHolder(first)

	same, err := revision.Build(t.Context(), d, revision.Options{})
	require.NoError(t, err)
	h.Store(same)
	require.Equal(t, first.CardsModified, h.Load().CardsModified, "nothing changed: the cards keep their date")

	changed, err := deployment.Load("")
	require.NoError(t, err)
	changed.Config.Agent.Name += " (renamed)" // the public card changes
	next, err := revision.Build(t.Context(), changed, revision.Options{})
	require.NoError(t, err)
	require.NotEqual(t, first.PublicETag, next.PublicETag)
	h.Store(next)
	require.True(t, h.Load().CardsModified.After(first.CardsModified), "a changed card has a new date")
}
