package imports

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/capgate/capgate/"

// TestPolicyImportsNoSidecar: nothing under policy/ imports anything under sidecar/, directly
// or through another package of the module (product files; tests aside). policy/ is the lower
// layer — manifests, compile, the config file's shape — and sidecar/ the runtime that serves
// it; the settings the runtime owns are checked by the runtime (sidecar/settings), not by
// policy/config importing it (issue #33).
func TestPolicyImportsNoSidecar(t *testing.T) {
	imports := productImports(t)
	roots := 0
	for pkg := range imports {
		if !strings.HasPrefix(pkg, module+"policy/") {
			continue
		}
		roots++
		// Breadth first, remembering who imported what, to name the path.
		via := map[string]string{pkg: ""}
		queue := []string{pkg}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, imp := range imports[p] {
				if _, ok := via[imp]; ok {
					continue
				}
				via[imp] = p
				if strings.HasPrefix(imp, module+"sidecar/") {
					path := imp
					for q := p; q != ""; q = via[q] {
						path = q + " → " + path
					}
					t.Errorf("policy/ imports sidecar/: %s", path)
				}
				queue = append(queue, imp)
			}
		}
	}
	require.Greater(t, roots, 10, "the policy packages were found")
}

// productImports maps each package of the module to the module packages its product files
// import (tests aside).
func productImports(t *testing.T) map[string][]string {
	fset := token.NewFileSet()
	imports := map[string][]string{} // package → the module packages its product files import
	err := filepath.WalkDir(filepath.Join("..", ".."), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && d.Name() != "..")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(filepath.Join("..", ".."), filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := module + filepath.ToSlash(rel)
		if _, ok := imports[pkg]; !ok {
			imports[pkg] = nil
		}
		for _, imp := range f.Imports {
			ip, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			if strings.HasPrefix(ip, module) {
				imports[pkg] = append(imports[pkg], ip)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return imports
}

// TestBindingsStandAlone: each wire binding's package (jsonrpcwire, httpjsonwire, grpcwire)
// holds its reading and its writing and imports no other binding; what the two JSON bindings
// share (jsonmodel, sse) imports no binding; and protocol — the model and the operation table —
// imports none of the packages that read or write it. Only wire, which picks a request's
// binding for both doors, imports them all (issue #33).
func TestBindingsStandAlone(t *testing.T) {
	imports := productImports(t)
	const pkg = module + "sidecar/protocol"
	bindings := []string{pkg + "/jsonrpcwire", pkg + "/httpjsonwire", pkg + "/grpcwire"}
	codecs := append([]string{pkg + "/jsonmodel", pkg + "/sse", pkg + "/wire"}, bindings...)
	for _, p := range codecs {
		_, ok := imports[p]
		require.True(t, ok, "%s is found", p)
	}
	for _, p := range append([]string{pkg, pkg + "/jsonmodel", pkg + "/sse"}, bindings...) {
		shared := slices.Contains(bindings, p) // a binding may import what the JSON bindings share
		for _, imp := range imports[p] {
			if slices.Contains(codecs, imp) && (!shared || (imp != pkg+"/jsonmodel" && imp != pkg+"/sse")) {
				t.Errorf("%s imports %s", p, imp)
			}
		}
	}
}
