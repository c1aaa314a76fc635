package metering

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countingCounter counts the takes that reach the shared counter.
type countingCounter struct {
	Counter
	takes atomic.Int64
}

func (c *countingCounter) Take(ctx context.Context, key string, limit int64, window time.Duration, cost int64) (Taken, error) {
	c.takes.Add(1)
	return c.Counter.Take(ctx, key, limit, window, cost)
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestLeasedSlowCallerIsExact(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	shared := &countingCounter{Counter: NewMemory(clk.now)}
	ref := NewMemory(clk.now) // the same calls without leases
	l := NewLeased(shared, clk.now)
	ctx := context.Background()
	// One call per lease period: every call is one take of exactly its cost.
	for i := range 10 {
		got, err := l.Take(ctx, "k", 1000, time.Hour, 1)
		require.NoError(t, err)
		require.True(t, got.Allowed)
		_, err = ref.Take(ctx, "k", 1000, time.Hour, 1)
		require.NoError(t, err)
		require.EqualValues(t, i+1, shared.takes.Load())
		clk.add(2 * time.Second)
	}
	rem, err := shared.Take(ctx, "k", 1000, time.Hour, 0)
	require.NoError(t, err)
	want, err := ref.Take(ctx, "k", 1000, time.Hour, 0)
	require.NoError(t, err)
	require.Equal(t, want.Remaining, rem.Remaining, "nothing is held ahead for a slow caller")
}

func TestLeasedBusyCallerTakesAhead(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	shared := &countingCounter{Counter: NewMemory(clk.now)}
	ref := NewMemory(clk.now) // the same calls without leases
	l := NewLeased(shared, clk.now)
	ctx := context.Background()
	const limit = 1_000_000
	take := func() {
		t.Helper()
		got, err := l.Take(ctx, "k", limit, 24*time.Hour, 1)
		require.NoError(t, err)
		require.True(t, got.Allowed)
		_, err = ref.Take(ctx, "k", limit, 24*time.Hour, 1)
		require.NoError(t, err)
	}
	// The first period is exact; the next ones take ahead what it used.
	for range 100 {
		take()
	}
	require.EqualValues(t, 100, shared.takes.Load())
	clk.add(time.Second)
	for range 100 {
		take()
	}
	require.LessOrEqual(t, shared.takes.Load(), int64(100+2), "a busy caller costs about one round trip per lease")

	// Admitted never exceeds what the shared counter charged, and a
	// lease's unused units go back when it expires.
	clk.add(time.Second)
	take() // a new period: the rest of the old lease is given back
	l.mu.Lock()
	held := l.keys["k"].units
	l.mu.Unlock()
	rem, err := shared.Take(ctx, "k", limit, 24*time.Hour, 0)
	require.NoError(t, err)
	want, err := ref.Take(ctx, "k", limit, 24*time.Hour, 0)
	require.NoError(t, err)
	require.Positive(t, held, "a busy caller holds a lease")
	require.Equal(t, want.Remaining-held, rem.Remaining, "charged = admitted + held: nothing lost")
}

// TestLeasedNeverExceedsTheLimit: two replicas leasing from one counter,
// many goroutines, a small budget: the total admitted is the limit (within
// one lease period, the refill is nil at this window), never more.
func TestLeasedNeverExceedsTheLimit(t *testing.T) {
	shared := NewMemory(nil)
	replicas := []*Leased{NewLeased(shared, nil), NewLeased(shared, nil)}
	const limit = 500
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				got, err := replicas[w%2].Take(context.Background(), "k", limit, 24*time.Hour, 1)
				if err == nil && got.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, admitted.Load(), int64(limit+1), "at most the refill of the test's duration over the limit")
	require.GreaterOrEqual(t, admitted.Load(), int64(limit-2*maxLeaseUnits), "refused early by at most what the leases hold")
}

func TestLeasedRefusalKeepsNothing(t *testing.T) {
	shared := NewMemory(nil)
	l := NewLeased(shared, nil)
	ctx := context.Background()
	for range 3 {
		got, err := l.Take(ctx, "k", 3, time.Hour, 1)
		require.NoError(t, err)
		require.True(t, got.Allowed)
	}
	got, err := l.Take(ctx, "k", 3, time.Hour, 1)
	require.NoError(t, err)
	require.False(t, got.Allowed)
	require.Positive(t, got.RetryAfter)
}
