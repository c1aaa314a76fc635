package dispatch

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/capgate/capgate/"

// importsOf is the import paths of the product (non-test) Go files in dir.
func importsOf(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range src.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			out = append(out, p)
		}
	}
	return out
}

// TestDispatchKnowsNoBinding: dispatch answers with values (operation.Result) and writes no
// binding's bytes: neither it nor anything it imports, directly or not, imports the gateway
// (which imports it from above), and dispatch itself does not import net/http.
func TestDispatchKnowsNoBinding(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the module root")
	require.NotContains(t, importsOf(t, "."), "net/http")
	seen := map[string]string{module + "sidecar/dispatch": ""} // package → its importer
	queue := []string{module + "sidecar/dispatch"}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range importsOf(t, filepath.Join(root, strings.TrimPrefix(p, module))) {
			if _, ok := seen[imp]; ok || !strings.HasPrefix(imp, module) {
				continue
			}
			seen[imp] = p
			queue = append(queue, imp)
		}
	}
	require.Contains(t, seen, module+"sidecar/exchange")
	importer, ok := seen[module+"sidecar/gateway"]
	require.False(t, ok, "dispatch reaches the gateway through %s", importer)
}
