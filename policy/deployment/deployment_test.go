package deployment_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/policy/diag"
)

func TestLoadEmbeddedDefault(t *testing.T) {
	d, err := deployment.Load("")
	require.NoError(t, err)
	require.Equal(t, "Finance Agent", d.Config.Agent.Name)
	_, ok := d.Registry().Get("reconcile-invoice")
	require.True(t, ok)
	require.Len(t, d.Snapshot.Revision, 32)
	require.Equal(t, "", d.BasePath(), "agent.url has no path: JSON-RPC at the root")
}

// copyFinance copies the finance example to a temp dir and returns the config path.
func copyFinance(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("..", "..", "manifests", "finance")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return filepath.Join(dst, "capgate.yaml")
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(b), old)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
}

func TestBasePathFromAgentURL(t *testing.T) {
	cfgPath := copyFinance(t)
	edit(t, cfgPath, "url: http://127.0.0.1:8080", "url: http://127.0.0.1:8080/a2a/")
	d, err := deployment.Load(cfgPath)
	require.NoError(t, err)
	require.Equal(t, "/a2a", d.BasePath())
}

func TestDenyModulesFromPolicyDirs(t *testing.T) {
	cfgPath := copyFinance(t)
	dir := filepath.Join(filepath.Dir(cfgPath), "policies")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sec.rego"), []byte(`package capgate.deny.sec

deny contains {"capability": "lookup-invoice", "reason": "maintenance"} if input.caller.subject == "mallory"
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sec_test.rego"), []byte("package capgate.deny.sec_test\n"), 0o644))
	edit(t, cfgPath, "policy_dirs: []", "policy_dirs: [./policies]")

	d, err := deployment.Load(cfgPath)
	require.NoError(t, err)
	require.Contains(t, d.Snapshot.Modules, "extra/policies/sec.rego", "modules are keyed under extra/")
	for k := range d.Snapshot.Modules {
		require.False(t, strings.HasSuffix(k, "_test.rego"), "tests are not loaded as policy: %s", k)
	}
}

func TestWideningModuleRefused(t *testing.T) {
	cfgPath := copyFinance(t)
	dir := filepath.Join(filepath.Dir(cfgPath), "policies")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "widen.rego"), []byte("package capgate.authz\n\nvisible contains \"purge-invoice-cache\"\n"), 0o644))
	edit(t, cfgPath, "policy_dirs: []", "policy_dirs: [./policies]")

	_, err := deployment.Load(cfgPath)
	var set *diag.Set
	require.True(t, errors.As(err, &set), "%v", err)
	require.Contains(t, err.Error(), "policies/widen.rego")
	require.Contains(t, err.Error(), "capgate.deny")
}

func TestAllProblemsTogether(t *testing.T) {
	cfgPath := copyFinance(t)
	capDir := filepath.Join(filepath.Dir(cfgPath), "capabilities")
	edit(t, filepath.Join(capDir, "lookup-invoice.yaml"), "state: ga", "state: beta")
	edit(t, filepath.Join(capDir, "reconcile-invoice.yaml"), "visibility: extended", "visibility: secret")
	_, err := deployment.Load(cfgPath)
	var set *diag.Set
	require.True(t, errors.As(err, &set), "%v", err)
	require.GreaterOrEqual(t, len(set.Problems), 2)
	require.Contains(t, err.Error(), `"beta" is not one of preview, ga, deprecated, removed`)
	require.Contains(t, err.Error(), `"secret"`)
}

func TestFromConfigKeepsWarnings(t *testing.T) {
	cfgPath := copyFinance(t)
	edit(t, cfgPath, "https://example.com/ext/trace/v1", "https://example.com/ext/trace")
	cfg, err := config.Load(cfgPath)
	require.NoError(t, err)
	d, err := deployment.FromConfig(cfg)
	require.NoError(t, err)
	require.Len(t, d.Warnings, 1)
	require.Contains(t, d.Warnings[0], "version segment")
}

// TestQuotaPlansAgainstTheRegistry: a plan restricted to a capability the registry does not hold
// is an error at its line, with the id it most likely misspells; a capability whose cost_class
// quotas.cost_classes does not price is a warning naming its manifest.
func TestQuotaPlansAgainstTheRegistry(t *testing.T) {
	cfgPath := copyFinance(t)
	edit(t, cfgPath, "      grant: {scopes: [plan.free]}\n      budget: {units: 40, per: 24h}",
		"      grant: {scopes: [plan.free]}\n      budget: {units: 40, per: 24h}\n      capabilities: [reconcile-invoic]")
	_, err := deployment.Load(cfgPath)
	require.Error(t, err)
	require.Regexp(t, `capgate\.yaml:\d+: quotas\.plans\[0\]\.capabilities\[0\]: "reconcile-invoic" is not a capability of the registry; did you mean reconcile-invoice\?`, err.Error())

	cfgPath = copyFinance(t)
	edit(t, cfgPath, "cost_classes: {low: 1, medium: 5, high: 20}", "cost_classes: {low: 1, medium: 5}")
	d, err := deployment.Load(cfgPath)
	require.NoError(t, err)
	require.Len(t, d.Warnings, 1)
	require.Contains(t, d.Warnings[0], `forecast-cashflow.yaml`)
	require.Contains(t, d.Warnings[0], `"high" is not in quotas.cost_classes`)
}
