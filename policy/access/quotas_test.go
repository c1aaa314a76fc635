package access

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/quota"
)

func TestQuotaLineAndWhy(t *testing.T) {
	free := quota.Applied{ID: "plan.free", Plan: "free", Unit: quota.Calls, Limit: 100, Window: time.Hour, Cost: 1,
		Key: []quota.KeyPart{{Name: quota.PartCaller}, {Name: quota.PartCostClass, Value: "high"}}, OnStoreError: quota.FailOpen}
	require.Equal(t, "plan.free: 100 calls per 1h per caller, cost_class high; costs 1; store error: open", QuotaLine(free))
	plans := []compile.Plan{{ID: "free", Grant: compile.Grant{Scopes: []string{"partner.free"}}, CostClasses: []string{"high"}}}
	require.Equal(t, "plan free grants it to scopes [partner.free]; on cost_class in [high]", QuotaWhy(free, plans))
	require.Equal(t, "plan free", QuotaWhy(free, nil), "a plan the config no longer has is named, not invented")
	require.Contains(t, QuotaWhy(quota.Applied{ID: "rate.reconcile-invoice"}, plans), "own rate")
	require.Contains(t, QuotaWhy(quota.Applied{ID: "deny.m.x"}, plans), "deny module")
	anyone := []compile.Plan{{ID: "free"}}
	require.Equal(t, "plan free grants it to every caller", QuotaWhy(free, anyone))

	for d, want := range map[time.Duration]string{time.Hour: "1h", 24 * time.Hour: "24h", time.Minute: "1m", 30 * time.Second: "30s", 90 * time.Second: "1m30s"} {
		require.Equal(t, want, window(d))
	}
}
