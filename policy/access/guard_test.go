package access_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/access"
)

// financeWith copies the finance example and applies edits to its
// manifests (file → old/new pairs, each matching exactly once).
func financeWith(t *testing.T, edits map[string][][2]string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "manifests", "finance"))))
	for file, pairs := range edits {
		p := filepath.Join(dir, "capabilities", file)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		s := string(b)
		for _, e := range pairs {
			require.Equal(t, 1, strings.Count(s, e[0]), "%s: want exactly one %q", file, e[0])
			s = strings.Replace(s, e[0], e[1], 1)
		}
		require.NoError(t, os.WriteFile(p, []byte(s), 0o600))
	}
	return filepath.Join(dir, "capgate.yaml")
}

// A change that gains nobody access but lets a skill run with less care
// (its routing guard downgraded, its destructive tag removed, a limit
// raised or dropped) is a risk with its cause, ranked like gains: a
// destructive skill's first, routing before tags before limits.
func TestDiffRanksLoosenedGuards(t *testing.T) {
	base := loadPath(t, "finance", filepath.Join("..", "..", "manifests", "finance", "capgate.yaml"))
	head := loadPath(t, "loosened", financeWith(t, map[string][][2]string{
		"purge-invoice-cache.yaml": {
			{"routing: {mode: explicit}", "routing: {mode: auto}"},
			{"tags: [operations, invoices, cache, destructive]", "tags: [operations, invoices, cache]"},
		},
		"apply-remittance.yaml": {{"enforced_limits: {max_body_bytes: 65536, max_parts: 4}", "enforced_limits: {max_body_bytes: 1048576}"}},
	}))
	_, _, d := diff(t, base, head)
	require.Empty(t, d.Gained)
	require.Empty(t, d.Lost)
	require.True(t, d.Risky())

	var got []string
	for _, g := range d.Guards {
		got = append(got, g.String())
	}
	require.Equal(t, []string{
		"purge-invoice-cache: routing explicit → auto (the router may now pick it alone; runs, internal, some callers)",
		"purge-invoice-cache: skill.tags [operations invoices cache destructive] → [operations invoices cache] (reviews, expectations and routing no longer treat it as destructive; runs, internal, some callers)",
		"apply-remittance: limits.max_body_bytes 65536 → 1048576 (the limit was raised; runs, extended, some callers)",
		"apply-remittance: limits.max_parts 4 → (none) (the limit is gone; runs, extended, some callers)",
	}, got)
	require.True(t, d.Guards[0].Destructive)
	require.Equal(t, access.GuardRouting, d.Guards[0].Kind)
	require.Contains(t, d.Guards[0].Callers, "scopes:ops.admin", "who now runs it with less care")
	require.NotContains(t, d.Guards[0].Callers, "anonymous")
	require.False(t, d.Guards[2].Destructive)

	var text, md, js bytes.Buffer
	require.NoError(t, access.WriteDiffText(&text, d))
	require.NoError(t, access.WriteDiffMarkdown(&md, d))
	require.NoError(t, access.WriteDiffJSON(&js, d))
	require.Contains(t, text.String(), "0 gained, 0 lost, 4 guards loosened, 2 capabilities")
	require.Contains(t, text.String(), "loosened guards (how a skill runs), riskiest first:\n  purge-invoice-cache: routing explicit → auto")
	require.Contains(t, md.String(), "**4 guards loosened**")
	require.Contains(t, md.String(), "| `purge-invoice-cache` | `routing explicit → auto` | the router may now pick it alone |")
	require.Contains(t, js.String(), `"kind": "routing"`)
	require.Contains(t, js.String(), `"destructive": true`)
}

// Tightening a guard, or a routing mode that was auto anyway, is no risk.
func TestDiffTightenedGuardsAreNoRisk(t *testing.T) {
	base := loadPath(t, "finance", filepath.Join("..", "..", "manifests", "finance", "capgate.yaml"))
	head := loadPath(t, "tightened", financeWith(t, map[string][][2]string{
		"apply-remittance.yaml":    {{"enforced_limits: {max_body_bytes: 65536, max_parts: 4}", "enforced_limits: {max_body_bytes: 1024, max_parts: 4, max_file_bytes: 10}\nrouting: {mode: confirm}"}},
		"purge-invoice-cache.yaml": {{"routing: {mode: explicit}", "routing: {mode: explicit, min_confidence: 0.9}"}},
	}))
	_, _, d := diff(t, base, head)
	require.Empty(t, d.Guards)
	require.False(t, d.Risky())
	require.Len(t, d.Capabilities, 2, "the changes are still listed")

	// explicit → confirm is a downgrade too, named for what it allows.
	head = loadPath(t, "confirm", financeWith(t, map[string][][2]string{
		"purge-invoice-cache.yaml": {{"routing: {mode: explicit}", "routing: {mode: confirm}"}},
	}))
	_, _, d = diff(t, base, head)
	require.Len(t, d.Guards, 1)
	require.Equal(t, "purge-invoice-cache: routing explicit → confirm (the router may now propose it to the caller; runs, internal, some callers)", d.Guards[0].String())
}
