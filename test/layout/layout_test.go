// Package layout holds the test of the module's one rule for programs: cmd/ holds what ships,
// test/<name> holds suites and the programs that drive them (README.md, "Layout").
package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// shipped are the programs that ship: the one binary.
var shipped = []string{"cmd/capgate"}

// TestProgramsLiveWhereTheRuleSays: every package main of the module is a shipped program under
// cmd/, or a direct child of test/ whose doc comment ("Command <name> ...") says what it drives;
// nothing under sidecar/, policy/, envoy/, rego/ or manifests/ is a program.
func TestProgramsLiveWhereTheRuleSays(t *testing.T) {
	root := filepath.Join("..", "..")
	_, err := os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the module root is two folders up")
	programs := map[string]string{} // folder → doc comment
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			if p != root {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Name.Name != "main" {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if f.Doc != nil {
			programs[rel] += f.Doc.Text()
		} else if _, ok := programs[rel]; !ok {
			programs[rel] = ""
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, programs)
	for _, s := range shipped {
		require.Contains(t, programs, s, "the shipped binary is a program")
	}
	for dir, doc := range programs {
		if slices.Contains(shipped, dir) {
			continue
		}
		parent, name := path.Split(dir)
		require.Equal(t, "test/", parent, "%s is a program outside cmd/ and test/: cmd/ holds what ships, test/<name> the programs that drive suites", dir)
		require.True(t, strings.HasPrefix(doc, "Command "+name+" "),
			"%s needs a doc comment \"// Command %s ...\" saying what it drives; it has %q", dir, name, doc)
		require.Greater(t, len(strings.Fields(doc)), 8, "%s: the doc comment says what the program drives", dir)
	}
}
