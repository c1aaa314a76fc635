package compile

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/policy/quota"
)

// Quotas compile into data.capgate: the plans under settings.quotas with
// their defaults resolved (windows in seconds, key parts in documentation
// order), a capability's quota as its fact; both are part of the revision,
// stored the same by Store and Data, and survive a bundle. Without quotas
// the data, and so the revision, are what they were.
func TestQuotasCompile(t *testing.T) {
	plain, err := Build(compiletest.Registry(), compiletest.Auth(), nil)
	require.NoError(t, err)
	none, err := Build(compiletest.Registry(), compiletest.Auth(), nil, WithQuotas(quota.Config{}))
	require.NoError(t, err)
	require.Equal(t, plain.Revision, none.Revision, "no quotas: the revision is unchanged")

	caps := compiletest.Capabilities()
	for i := range caps {
		if caps[i].ID == "reconcile-invoice" {
			caps[i].Quota = quota.Capability{Units: 8, Rate: quota.Rate{Calls: 30, Per: time.Minute}}
		}
	}
	cfg := quota.Config{
		CostClasses: map[string]int64{"medium": 5},
		Plans: []quota.Plan{{ID: "free", Grant: quota.Grant{Scopes: []string{"plan.free"}},
			Budget: quota.Budget{Units: 40, Per: 24 * time.Hour}, Key: []string{quota.PartCapability, quota.PartCaller}}},
	}
	s, err := Build(manifest.NewRegistry(caps), compiletest.Auth(), nil, WithQuotas(cfg))
	require.NoError(t, err)
	require.NotEqual(t, plain.Revision, s.Revision)

	data, err := s.Data()
	require.NoError(t, err)
	settings := data[keySettings].(map[string]any)["quotas"].(map[string]any)
	plan := settings["plans"].([]any)[0].(map[string]any)
	require.Equal(t, "units", plan["unit"])
	require.Equal(t, "closed", plan["on_store_error"], "unit budgets fail closed by default")
	require.Equal(t, []any{"caller", "capability"}, plan["key"])
	require.Equal(t, json.Number("86400"), plan["window_seconds"])
	recon := data[keyCapabilities].(map[string]any)["reconcile-invoice"].(map[string]any)
	require.Contains(t, recon, "quota")

	want, err := ast.InterfaceToValue(data)
	require.NoError(t, err)
	st, err := s.Store()
	require.NoError(t, err)
	got, err := storage.ReadOne(t.Context(), st, storage.MustParsePath("/"+Root))
	require.NoError(t, err)
	require.Equal(t, 0, ast.Compare(want, got), "store %v\nwant %v", got, want)

	var buf bytes.Buffer
	require.NoError(t, WriteBundle(&buf, s, BundleOptions{}))
	back, err := ReadBundle(&buf, VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, s.Revision, back.Revision)
	c, ok := back.Registry.Get("reconcile-invoice")
	require.True(t, ok)
	require.Equal(t, quota.Capability{Units: 8, Rate: quota.Rate{Calls: 30, Per: time.Minute}}, c.Quota)
	require.Equal(t, s.Settings.Quotas, back.Settings.Quotas)
}
