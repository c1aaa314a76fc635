// Package imports holds rules about what product code may import.
package imports

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// productDirs are the folders of product code, relative to this package.
var productDirs = []string{"../../cmd", "../../policy", "../../sidecar"}

// TestNoUnsafeInProduct: no product file (tests aside) imports unsafe. The
// few tenths of a microsecond it saved did not pay for a reader having to
// prove that nothing writes through a string's bytes (issue #23).
func TestNoUnsafeInProduct(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	for _, dir := range productDirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			files++
			for _, imp := range f.Imports {
				p, err := strconv.Unquote(imp.Path.Value)
				require.NoError(t, err)
				require.NotEqual(t, "unsafe", p, "%s imports unsafe", fset.Position(imp.Pos()))
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Greater(t, files, 100, "the product folders were found")
}
