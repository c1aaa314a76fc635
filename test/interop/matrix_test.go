package interop

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoRoot is the module root, two levels above this package.
const repoRoot = "../.."

// TestClientMatrix keeps docs/interop.md's client matrix current: each pinned client (go.mod,
// js/package.json) has rows, and every row's version is the pinned one; every test a row names
// exists; a row that names no test says the client is not run here or names the make target
// that runs it.
func TestClientMatrix(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "interop.md"))
	require.NoError(t, err)
	rows := matrixRows(t, string(doc))

	pins := []struct{ client, version string }{
		{"a2a-go v2", goModVersion(t, "github.com/a2aproject/a2a-go/v2")},
		{"a2a-go", goModVersion(t, "github.com/a2aproject/a2a-go")},
		{"@a2a-js/sdk", jsVersion(t, "@a2a-js/sdk")},
		{"@a2a-js/sdk", strings.TrimPrefix(jsVersion(t, "a2a-js-sdk-03"), "npm:@a2a-js/sdk@")},
	}
	tests := testFuncs(t)
	for _, p := range pins {
		require.True(t, slices.ContainsFunc(rows, func(r []string) bool { return clientOf(r) == p.client && r[1] == p.version }),
			"no row for %s at its pinned version %s", p.client, p.version)
	}
	for _, r := range rows {
		client, version, tcell := r[0], r[1], r[4]
		if slices.ContainsFunc(pins, func(p struct{ client, version string }) bool { return p.client == clientOf(r) }) {
			require.True(t, slices.ContainsFunc(pins, func(p struct{ client, version string }) bool {
				return p.client == clientOf(r) && p.version == version
			}), "row %q: %s is not a pinned version", client, version)
		}
		names := regexp.MustCompile(`\bTest[A-Z]\w*`).FindAllString(tcell, -1)
		if len(names) == 0 {
			require.True(t, version == "not run here" || strings.Contains(tcell, "make "), "row %q names no test", client)
			continue
		}
		for _, n := range names {
			require.True(t, tests[n], "row %q names %s, which no test file defines", client, n)
		}
	}
}

// clientOf is a row's client without its qualifier ("a2a-go v2, its 0.3 layer" is a2a-go v2).
func clientOf(row []string) string { return strings.TrimSpace(strings.SplitN(row[0], ",", 2)[0]) }

// matrixRows are the body rows of the table under "## Client matrix", each as its five cells
// with backquotes removed.
func matrixRows(t *testing.T, doc string) [][]string {
	t.Helper()
	_, sec, ok := strings.Cut(doc, "\n## Client matrix\n")
	require.True(t, ok, "docs/interop.md has no client matrix")
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	var rows [][]string
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| client |") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		require.Len(t, cells, 5, "%s", line)
		for i := range cells {
			cells[i] = strings.TrimSpace(strings.ReplaceAll(cells[i], "`", ""))
		}
		rows = append(rows, cells)
	}
	require.NotEmpty(t, rows)
	return rows
}

func goModVersion(t *testing.T, module string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+(\S+)`).FindStringSubmatch(string(b))
	require.NotNil(t, m, "go.mod requires no %s", module)
	return m[1]
}

func jsVersion(t *testing.T, pkg string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(jsDir, "package.json"))
	require.NoError(t, err)
	var p struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	require.NoError(t, json.Unmarshal(b, &p))
	v, ok := p.Dependencies[pkg]
	require.True(t, ok, "package.json has no %s", pkg)
	return v
}

// testFuncs are the names of the test functions in the module's test files.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	require.NoError(t, err)
	return out
}
