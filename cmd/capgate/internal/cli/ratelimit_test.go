package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/policy/ratelimit"
)

// financeQuotas copies the finance example with the given quotas section
// (replacing any it has) and a rate on reconcile-invoice when rate is set.
func financeQuotas(t *testing.T, quotas, rate string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "..", "..", "manifests", "finance"))))
	cfg := filepath.Join(dir, "capgate.yaml")
	b, err := os.ReadFile(cfg)
	require.NoError(t, err)
	b = regexp.MustCompile(`(?ms)^quotas:\n(?:[ #].*\n|\n)*`).ReplaceAll(b, nil)
	require.NoError(t, os.WriteFile(cfg, append(b, []byte(quotas)...), 0o600))
	if rate != "" {
		m := filepath.Join(dir, "capabilities", "reconcile-invoice.yaml")
		mb, err := os.ReadFile(m)
		require.NoError(t, err)
		mb = regexp.MustCompile(`(?m)^quota:.*\n(?:[ #].*\n)*`).ReplaceAll(mb, nil)
		require.NoError(t, os.WriteFile(m, append(mb, []byte(rate)...), 0o600))
	}
	return cfg
}

func TestRateLimitConfig(t *testing.T) {
	cfg := financeQuotas(t, `quotas:
  cost_classes: {medium: 5}
  plans:
    - id: free
      grant: {scopes: [recon.run]}
      budget: {calls: 100, per: 1h}
    - id: acme
      grant: {tenants: [acme]}
      budget: {units: 10000, per: 24h}
      key: [tenant]
`, "quota: {rate: {calls: 10, per: 1m}}\n")
	out := filepath.Join(t.TempDir(), "capgate.yaml")
	r := run(t, "ratelimit-config", "--config", cfg, "--out", out)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "domain capgate, 3 quotas")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	got, err := ratelimit.Parse(data)
	require.NoError(t, err, "what is written is what the service loads")
	var ids []string
	for _, d := range got.GetDescriptors() {
		ids = append(ids, d.GetValue())
	}
	require.Equal(t, []string{"plan.acme", "plan.free", "rate.reconcile-invoice"}, ids)

	// A window the service has no unit for is refused with the plan named.
	bad := financeQuotas(t, "quotas:\n  plans:\n    - id: slow\n      budget: {calls: 5, per: 10m}\n", "")
	r = run(t, "ratelimit-config", "--config", bad)
	require.Equal(t, cli.ExitCheck, r.code)
	require.Contains(t, r.stderr, `quota "plan.slow": window 10m0s`)

	// No quotas: nothing to generate, said so.
	r = run(t, "ratelimit-config", "--config", financeQuotas(t, "", ""))
	require.Equal(t, cli.ExitCheck, r.code)
	require.Contains(t, r.stderr, "declares no quotas")
}

// TestAccessReplaySaysQuotaRefusalsAreNotReproduced: an event a quota
// refused (metering's rule quota.<id>) is counted apart and said to be
// unreproducible, not replayed as if counters were known.
func TestAccessReplaySaysQuotaRefusalsAreNotReproduced(t *testing.T) {
	ev := func(id, rule string, allow bool) string {
		res := `"allow":true,"result":"allow"`
		if !allow {
			res = `"allow":false,"result":"deny","code":"RESOURCE_EXHAUSTED","rule":"` + rule + `"`
		}
		return `{"decision_id":"` + id + `","timestamp":"2026-12-04T10:00:00Z","path":"capgate/authz/decision",` +
			`"input":{"authenticated":true,"principal":"partner-1","tenant":"acme","scopes":["recon.run"],"operation":"SendMessage","capability":"reconcile-invoice","layer":"classifier"},` +
			`"result":{` + res + `,"entitled":true,"rules":[{"reason":"scope.held","effect":"grant"}]}}` + "\n"
	}
	log := filepath.Join(t.TempDir(), "decisions.log")
	require.NoError(t, os.WriteFile(log, []byte(ev("d1", "", true)+ev("d2", "quota.plan.free", false)+ev("d3", "quota.store_error", false)), 0o600))
	head := filepath.Join("..", "..", "..", "..", "manifests", "finance", "capgate.yaml")
	r := run(t, "access", "replay", "--head", head, "--decisions", log)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "2 events were refused by a quota: not reproduced")
	r = run(t, "access", "replay", "--head", head, "--decisions", log, "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"quota_refusals_not_reproduced": 2`)
}
