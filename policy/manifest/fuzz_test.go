package manifest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
)

// FuzzParseManifest feeds arbitrary bytes to the parser: it may reject them,
// but must never panic, and must never accept a manifest that breaks the
// rules a registry relies on.
func FuzzParseManifest(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*/*/*.*")
	require.NoError(f, err)
	more, err := filepath.Glob("testdata/valid/*.*")
	require.NoError(f, err)
	for _, p := range append(seeds, more...) {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte("*a"))
	f.Add([]byte("&a [*a, *a]"))
	f.Add([]byte("{id: a, limits: {x: &a [*a]}}"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte{0xff, 0xfe})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := manifest.Parse("fuzz.yaml", data)
		if err != nil {
			require.Nil(t, c)
			return
		}
		require.NotNil(t, c)
		require.Regexp(t, manifest.IDPattern, c.ID)
		require.NotEmpty(t, c.Skill.Name)
		require.True(t, c.Tenants.All || len(c.Tenants.List) > 0)
		if c.State == manifest.StateRemoved {
			require.NotEmpty(t, c.ReplacedBy)
		}
	})
}
