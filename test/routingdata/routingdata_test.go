package routingdata

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDirIsBesideTheModule: the data folder is ../shared/data/routing from the module root,
// wherever in the module a test runs.
func TestDirIsBesideTheModule(t *testing.T) {
	dir, err := Dir()
	require.NoError(t, err)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(filepath.Dir(root), "shared", "data", "routing"), dir)
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	_, _, err := Read(dir)
	require.ErrorIs(t, err, fs.ErrNotExist, "absent data are told apart from broken data")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifests.json"), []byte(`[]`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dev.jsonl"), []byte("{\"text\":\"hi\",\"expect\":null}\n{\"text\":\"pay\",\"expect\":\"pay_bill\"}\n"), 0o644))
	m, cases, err := Read(dir)
	require.NoError(t, err)
	require.Equal(t, `[]`, string(m))
	require.Len(t, cases, 2)
	require.Nil(t, cases[0].Expect)
	require.Equal(t, "pay_bill", *cases[1].Expect)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dev.jsonl"), []byte("{\n"), 0o644))
	_, _, err = Read(dir)
	require.ErrorContains(t, err, "dev.jsonl:1")
	require.NotErrorIs(t, err, fs.ErrNotExist)
}

// TestLoad: beside this repository the data load (on CI they must be there; elsewhere, absent,
// the test is skipped as the accuracy tests are).
func TestLoad(t *testing.T) {
	m, cases := Load(t)
	require.NotEmpty(t, m)
	require.NotEmpty(t, cases)
}
