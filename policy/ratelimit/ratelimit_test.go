package ratelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/quota"
)

func TestMetadataSlots(t *testing.T) {
	applied := []quota.Applied{
		{ID: "plan.free", Unit: quota.Calls, Limit: 100, Window: time.Hour, Cost: 1,
			Key: []quota.KeyPart{{Name: quota.PartCaller}, {Name: quota.PartCostClass, Value: "high"}}},
		{ID: "plan.cheap", Unit: quota.Units, Limit: 10, Window: time.Hour, Cost: 0,
			Key: []quota.KeyPart{{Name: quota.PartTenant, Value: "acme"}}},
		{ID: "plan.acme", Unit: quota.Units, Limit: 10000, Window: 24 * time.Hour, Cost: 5,
			Key: []quota.KeyPart{{Name: quota.PartTenant, Value: "acme"}}},
	}
	md, err := Metadata(applied, quota.Caller("https://idp", "partner-1"))
	require.NoError(t, err)
	require.Len(t, md, 2, "a quota the call costs nothing under takes no slot")
	s0 := md[SlotKey(0)].GetStructValue().AsMap()
	require.Equal(t, map[string]any{"id": "plan.free", "hits": "1", "caller": "https://idp partner-1", "cost_class": "high"}, s0)
	s1 := md[SlotKey(1)].GetStructValue().AsMap()
	require.Equal(t, map[string]any{"id": "plan.acme", "hits": "5", "tenant": "acme"}, s1)

	many := make([]quota.Applied, Slots+1)
	for i := range many {
		many[i] = applied[0]
	}
	_, err = Metadata(many, "c")
	require.ErrorContains(t, err, "carry 4")
}

func TestLimitsFromPlans(t *testing.T) {
	plans := []compile.Plan{
		{ID: "free", Unit: "calls", Limit: 100, WindowSeconds: 3600, Key: []string{quota.PartCaller}},
		{ID: "acme", Unit: "units", Limit: 10000, WindowSeconds: 86400, Key: []string{quota.PartTenant}},
	}
	caps := []Capability{{ID: "reconcile-invoice", Rate: quota.Rate{Calls: 10, Per: time.Minute}}, {ID: "other"}}
	ls, err := Limits(plans, caps)
	require.NoError(t, err)
	require.Equal(t, []Limit{
		{Quota: "plan.free", Parts: []string{quota.PartCaller}, Window: time.Hour, Limit: 100},
		{Quota: "plan.acme", Parts: []string{quota.PartTenant}, Window: 24 * time.Hour, Limit: 10000},
		{Quota: "rate.reconcile-invoice", Parts: CapabilityRateKey(), Window: time.Minute, Limit: 10},
	}, ls)
	_, err = Config(ls)
	require.NoError(t, err)
}
