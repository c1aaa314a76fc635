package quota_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/quota"
)

func applied(id string, parts ...quota.KeyPart) quota.Applied {
	return quota.Applied{ID: id, Unit: quota.Calls, Limit: 10, Window: time.Minute, Cost: 1, Key: parts, OnStoreError: quota.FailOpen}
}

var tagRE = regexp.MustCompile(`^q\{([0-9a-f]{16})\}`)

func tag(t *testing.T, key string) string {
	t.Helper()
	m := tagRE.FindStringSubmatch(key)
	require.NotNil(t, m, key)
	return m[1]
}

// TestCounterKey: keys differ by quota, caller, part values, limit and
// window; every counter of one caller shares its hash tag (one Redis
// Cluster slot); a quota without a caller part is tagged by its tenant.
func TestCounterKey(t *testing.T) {
	caller := quota.Caller("https://issuer.example", "alice")
	other := quota.Caller("https://issuer.example", "bob")
	perCaller := applied("plan.free", quota.KeyPart{Name: quota.PartCaller})
	perCap := applied("rate.lookup", quota.KeyPart{Name: quota.PartCaller}, quota.KeyPart{Name: quota.PartCapability, Value: "lookup"})
	perCap2 := applied("rate.lookup", quota.KeyPart{Name: quota.PartCaller}, quota.KeyPart{Name: quota.PartCapability, Value: "lookup2"})
	wider := perCaller
	wider.Limit = 11
	longer := perCaller
	longer.Window = time.Hour
	keys := map[string]string{}
	for name, k := range map[string]string{
		"perCaller": perCaller.CounterKey(caller), "other": perCaller.CounterKey(other),
		"perCap": perCap.CounterKey(caller), "perCap2": perCap2.CounterKey(caller),
		"wider": wider.CounterKey(caller), "longer": longer.CounterKey(caller),
	} {
		prev, dup := keys[k]
		require.False(t, dup, "%s and %s share %s", name, prev, k)
		keys[k] = name
	}
	require.Equal(t, tag(t, perCaller.CounterKey(caller)), tag(t, perCap.CounterKey(caller)))
	require.NotEqual(t, tag(t, perCaller.CounterKey(caller)), tag(t, perCaller.CounterKey(other)))

	tenant := applied("plan.acme", quota.KeyPart{Name: quota.PartTenant, Value: "acme"})
	require.Equal(t, tenant.CounterKey(caller), tenant.CounterKey(other), "a tenant budget is shared by its callers")
	require.Equal(t, perCaller.CounterKey(caller), perCaller.CounterKey(caller), "stable")
}

func TestAppliedValidate(t *testing.T) {
	good := applied("plan.free", quota.KeyPart{Name: quota.PartCaller})
	require.NoError(t, good.Validate())
	for name, mutate := range map[string]func(*quota.Applied){
		"no id":        func(a *quota.Applied) { a.ID = "" },
		"unit":         func(a *quota.Applied) { a.Unit = "tokens" },
		"limit":        func(a *quota.Applied) { a.Limit = 0 },
		"window":       func(a *quota.Applied) { a.Window = time.Millisecond },
		"cost":         func(a *quota.Applied) { a.Cost = -1 },
		"mode":         func(a *quota.Applied) { a.OnStoreError = "maybe" },
		"no key":       func(a *quota.Applied) { a.Key = nil },
		"unknown part": func(a *quota.Applied) { a.Key = []quota.KeyPart{{Name: "subject"}} },
		"repeated":     func(a *quota.Applied) { a.Key = []quota.KeyPart{{Name: "caller"}, {Name: "caller"}} },
	} {
		a := good
		a.Key = append([]quota.KeyPart(nil), good.Key...)
		mutate(&a)
		require.Error(t, a.Validate(), name)
	}
}

func TestBudgetUnit(t *testing.T) {
	require.Equal(t, quota.Calls, quota.Budget{Calls: 5, Per: time.Hour}.Unit())
	require.Equal(t, quota.Units, quota.Budget{Units: 5, Per: time.Hour}.Unit())
	require.Equal(t, quota.Unit(""), quota.Budget{Calls: 5, Units: 5}.Unit())
	require.Equal(t, quota.Unit(""), quota.Budget{}.Unit())
	require.Equal(t, quota.FailClosed, quota.DefaultOnStoreError(quota.Units))
	require.Equal(t, quota.FailOpen, quota.DefaultOnStoreError(quota.Calls))
}
