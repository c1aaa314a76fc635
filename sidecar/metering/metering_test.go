package metering_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/quota"
	"github.com/capgate/capgate/sidecar/metering"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tasks/redisstore"
	"github.com/capgate/capgate/test/replicas/redisproc"
)

// counters are the Counter implementations, each on a store of its own:
// memory, one Redis server, and a Redis Cluster (keys hash-tagged).
func counters(t *testing.T) map[string]metering.Counter {
	t.Helper()
	out := map[string]metering.Counter{"memory": metering.NewMemory(nil)}
	srv := redisproc.Start(t)
	st, err := redisstore.Dial(t.Context(), srv.URL(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	out["redis"] = metering.NewRedis(st.Client(), st.KeyPrefix())
	nodes := redisproc.StartCluster(t, 3, 0)
	cl, err := redisstore.Dial(t.Context(), "redis-cluster://"+nodes[0].Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	out["cluster"] = metering.NewRedis(cl.Client(), cl.KeyPrefix())
	return out
}

// TestCounterContract runs one suite against every counter: a budget of 3
// per hour admits 3 and refuses the 4th with a retry delay of at most one
// emission interval (20 minutes) without charging it; a cost above the
// budget never fits; Give returns a charge; Mark is set once.
func TestCounterContract(t *testing.T) {
	for name, c := range counters(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			key := quota.Applied{ID: "plan.t-" + name, Key: []quota.KeyPart{{Name: quota.PartCaller}}}.CounterKey("iss alice")
			for want := int64(2); want >= 0; want-- {
				got, err := c.Take(ctx, key, 3, time.Hour, 1)
				require.NoError(t, err)
				require.True(t, got.Allowed)
				require.Equal(t, want, got.Remaining)
			}
			refused, err := c.Take(ctx, key, 3, time.Hour, 1)
			require.NoError(t, err)
			require.False(t, refused.Allowed)
			require.Greater(t, refused.RetryAfter, time.Duration(0))
			require.LessOrEqual(t, refused.RetryAfter, 20*time.Minute)

			require.NoError(t, c.Give(ctx, key, 3, time.Hour, 1))
			again, err := c.Take(ctx, key, 3, time.Hour, 1)
			require.NoError(t, err)
			require.True(t, again.Allowed, "a charge given back fits again")

			big, err := c.Take(ctx, key+"-big", 3, time.Hour, 4)
			require.NoError(t, err)
			require.False(t, big.Allowed, "a cost above the budget never fits")

			mark := quota.MarkKey("iss alice", "m-"+name)
			first, err := c.Mark(ctx, mark, time.Hour)
			require.NoError(t, err)
			require.True(t, first)
			second, err := c.Mark(ctx, mark, time.Hour)
			require.NoError(t, err)
			require.False(t, second)
			require.NoError(t, c.Unmark(ctx, mark))
			third, err := c.Mark(ctx, mark, time.Hour)
			require.NoError(t, err)
			require.True(t, third)
		})
	}
}

// TestMemoryRefills: the memory counter refills one call per emission
// interval on its clock.
func TestMemoryRefills(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	c := metering.NewMemory(func() time.Time { return now })
	for range 2 {
		got, err := c.Take(t.Context(), "k", 2, time.Minute, 1)
		require.NoError(t, err)
		require.True(t, got.Allowed)
	}
	got, err := c.Take(t.Context(), "k", 2, time.Minute, 1)
	require.NoError(t, err)
	require.False(t, got.Allowed)
	require.Equal(t, 30*time.Second, got.RetryAfter)
	now = now.Add(30 * time.Second)
	got, err = c.Take(t.Context(), "k", 2, time.Minute, 1)
	require.NoError(t, err)
	require.True(t, got.Allowed)
}

func applied(id string, unit quota.Unit, limit, cost int64, mode quota.StoreErrorMode) quota.Applied {
	return quota.Applied{ID: id, Unit: unit, Limit: limit, Window: time.Hour, Cost: cost,
		Key: []quota.KeyPart{{Name: quota.PartCaller}}, OnStoreError: mode}
}

// TestEnforcer: a call over its second quota is refused ResourceExhausted
// naming it, with retry metadata, and is given back to the first; a message
// is charged once; metrics count each result.
func TestEnforcer(t *testing.T) {
	reg := prometheus.NewRegistry()
	now := time.Unix(1_000_000, 0)
	e := metering.NewEnforcer(metering.NewMemory(func() time.Time { return now }), reg, nil, 0)
	wide := applied("plan.wide", quota.Calls, 100, 1, quota.FailOpen)
	units := applied("plan.units", quota.Units, 10, 4, quota.FailClosed)
	call := metering.Call{Issuer: "iss", Subject: "alice", Capability: "c", Quotas: []quota.Applied{units, wide}}

	for i := range 2 {
		states, perr := e.Charge(t.Context(), call)
		require.Nil(t, perr, i)
		require.Len(t, states, 2)
	}
	_, perr := e.Charge(t.Context(), call)
	require.NotNil(t, perr)
	require.Equal(t, protocol.ResourceExhausted, perr.Code)
	require.Equal(t, "plan.units", perr.Metadata[protocol.MetaQuota])
	require.Equal(t, "quota.plan.units", perr.Rule())
	secs, ok := perr.RetryAfter()
	require.True(t, ok)
	require.Equal(t, int64(12*60), secs, "8 of 10 units used; 2 more refill in 2 × 6 minutes")
	require.Contains(t, perr.QuotaHeaders(), [2]string{"retry-after", "720"})

	// plan.wide was charged twice only: the refused call took nothing from it.
	wideOnly := metering.Call{Issuer: "iss", Subject: "alice", Capability: "c", Quotas: []quota.Applied{wide}}
	states, perr := e.Charge(t.Context(), wideOnly)
	require.Nil(t, perr)
	require.Equal(t, int64(100-3), states[0].Remaining)

	// One message, two doors: charged once.
	msg := wideOnly
	msg.MessageID = "m-1"
	states, perr = e.Charge(t.Context(), msg)
	require.Nil(t, perr)
	require.Equal(t, int64(100-4), states[0].Remaining)
	states, perr = e.Charge(t.Context(), msg)
	require.Nil(t, perr)
	require.Nil(t, states, "already charged")

	require.Equal(t, 1.0, metricOf(t, reg, "c", "plan.units", metering.ResultThrottled))
	require.Equal(t, 2.0, metricOf(t, reg, "c", "plan.units", metering.ResultAdmitted))
}

func metricOf(t *testing.T, reg *prometheus.Registry, capability, q, result string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "capgate_quota_calls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["capability"] == capability && labels["quota"] == q && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// failing is a counter whose store never answers.
type failing struct{}

var errDown = errors.New("store down")

func (failing) Take(context.Context, string, int64, time.Duration, int64) (metering.Taken, error) {
	return metering.Taken{}, errDown
}
func (failing) Give(context.Context, string, int64, time.Duration, int64) error { return errDown }
func (failing) Mark(context.Context, string, time.Duration) (bool, error)       { return false, errDown }
func (failing) Unmark(context.Context, string) error                            { return errDown }

// TestEnforcerStoreErrors: a fail-open quota lets the call pass uncounted;
// a fail-closed one refuses it Unavailable (outcome not_run).
func TestEnforcerStoreErrors(t *testing.T) {
	e := metering.NewEnforcer(failing{}, prometheus.NewRegistry(), nil, 0)
	open := metering.Call{Subject: "a", Capability: "c", MessageID: "m", Quotas: []quota.Applied{applied("rate.c", quota.Calls, 5, 1, quota.FailOpen)}}
	states, perr := e.Charge(t.Context(), open)
	require.Nil(t, perr)
	require.Empty(t, states)
	closed := open
	closed.Quotas = append(closed.Quotas, applied("plan.units", quota.Units, 5, 1, quota.FailClosed))
	_, perr = e.Charge(t.Context(), closed)
	require.NotNil(t, perr)
	require.Equal(t, protocol.Unavailable, perr.Code)
	require.Equal(t, protocol.OutcomeNotRun, perr.Metadata[protocol.MetaOutcome])
	require.Equal(t, metering.RuleStoreError, perr.Rule())
}
