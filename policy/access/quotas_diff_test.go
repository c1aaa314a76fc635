package access_test

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/access"
)

// financeWithQuotas writes the finance example with quotas (replacing any
// it has) into a temporary directory and returns its config.
func financeWithQuotas(t *testing.T, quotas string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "manifests", "finance"))))
	cfg := filepath.Join(dir, "capgate.yaml")
	b, err := os.ReadFile(cfg)
	require.NoError(t, err)
	b = regexp.MustCompile(`(?ms)^quotas:\n(?:[ #].*\n|\n)*`).ReplaceAll(b, nil)
	require.NoError(t, os.WriteFile(cfg, append(b, []byte(quotas)...), 0o600))
	// The test's quotas only: no capability's own quota either.
	caps, err := filepath.Glob(filepath.Join(dir, "capabilities", "*.yaml"))
	require.NoError(t, err)
	for _, c := range caps {
		m, err := os.ReadFile(c)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(c, regexp.MustCompile(`(?m)^quota:.*\n`).ReplaceAll(m, nil), 0o600))
	}
	return cfg
}

const quotasBase = `quotas:
  cost_classes: {low: 1, medium: 5, high: 20}
  plans:
    - id: free
      grant: {scopes: [recon.run]}
      budget: {calls: 100, per: 1h}
      cost_classes: [medium, high]
    - id: acme
      grant: {tenants: [acme]}
      budget: {units: 10000, per: 24h}
      key: [tenant]
`

// TestMatrixShowsPlansPerClass: each plan's callers are a class, and the
// quotas of a class are those the policy applies to the capabilities it
// may run, with why.
func TestMatrixShowsPlansPerClass(t *testing.T) {
	s := loadPath(t, "quotas", financeWithQuotas(t, quotasBase))
	m := build(t, s, access.Derive(s.d.Snapshot))
	byName := map[string]int{}
	for i, c := range m.Classes {
		byName[c.Name] = i
	}
	require.Contains(t, byName, "plan:free")
	require.Contains(t, byName, "plan:acme")
	require.Equal(t, "acme", m.Classes[byName["plan:acme"]].Caller.Tenant)

	acme := m.ClassQuotas(byName["plan:acme"])
	require.Len(t, acme, 2)
	require.Equal(t, "plan.acme", acme[0].Quota.ID)
	require.Equal(t, "plan acme grants it to tenant in [acme]", access.QuotaWhy(acme[0].Quota, m.Plans))
	require.Less(t, acme[0].MinCost, acme[0].MaxCost, "unit costs follow the capabilities' cost classes")
	require.Equal(t, "plan.free", acme[1].Quota.ID)
	require.Equal(t, []string{"reconcile-invoice"}, acme[1].Capabilities, "free counts medium and high cost classes only")
	require.Empty(t, m.ClassQuotas(byName["anonymous"]))

	text := render(t, func(w ioWriter) error { return access.WriteText(w, m) })
	require.Contains(t, string(text), "plan.free: 100 calls per 1h per caller; costs 1; store error: open")
	html := render(t, func(w ioWriter) error { return access.WriteHTML(w, m) })
	require.Contains(t, string(html), "Quotas per caller class")
	js := render(t, func(w ioWriter) error { return access.WriteJSON(w, m) })
	require.Contains(t, string(js), `"window_seconds": 3600`)
}

// TestDiffFlagsALoosenedQuota: a quota raised, switched to fail open or
// gone is a risk of the diff (Risky), named with both sides; a tightened
// one is not.
func TestDiffFlagsALoosenedQuota(t *testing.T) {
	base := loadPath(t, "quotas", financeWithQuotas(t, quotasBase))
	tests := []struct {
		name, from, to string
		effect         string // "" : not a risk
	}{
		{"raised", "budget: {calls: 100, per: 1h}", "budget: {calls: 100, per: 30m}", "the quota was raised"},
		{"fail open", "key: [tenant]", "key: [tenant]\n      on_store_error: open", "a store outage now admits calls uncounted"},
		{"gone", "cost_classes: [medium, high]", "cost_classes: [high]", "the quota no longer applies"},
		{"cheaper", "medium: 5", "medium: 2", "a call costs less"},
		{"tightened", "budget: {calls: 100, per: 1h}", "budget: {calls: 50, per: 1h}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, quotasBase, tt.from)
			head := loadPath(t, "quotas-"+tt.name, financeWithQuotas(t, replaceOnce(quotasBase, tt.from, tt.to)))
			_, _, d := diff(t, base, head)
			require.Empty(t, d.Gained)
			if tt.effect == "" {
				require.False(t, d.Risky(), "%v", d.Guards)
				return
			}
			require.True(t, d.Risky())
			found := false
			for _, g := range d.Guards {
				found = found || (g.Kind == access.GuardQuota && g.Effect == tt.effect && g.Capability == "reconcile-invoice")
			}
			require.True(t, found, "%v", d.Guards)
		})
	}
}

type ioWriter = io.Writer

func replaceOnce(s, old, new string) string { return strings.Replace(s, old, new, 1) }
