// Package golden compares test output with golden files, and rewrites them
// from the current output when the test binary runs with -update.
//
//	go test ./policy/compile -update   # then review the diff of testdata/
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files from the current output")

// Update reports whether the test binary runs with -update.
func Update() bool { return *update }

// Equal requires got to equal the golden file at path byte for byte; under
// -update it writes got to path first.
func Equal(t testing.TB, path string, got []byte) {
	t.Helper()
	require.Equal(t, string(read(t, path, got)), string(got))
}

// JSONEq requires got to be the JSON document of the golden file at path
// (compared as JSON); under -update it writes got to path first.
func JSONEq(t testing.TB, path string, got []byte) {
	t.Helper()
	require.JSONEq(t, string(read(t, path, got)), string(got))
}

func read(t testing.TB, path string, got []byte) []byte {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file %s; run the test with -update and review the diff", path)
	return want
}
