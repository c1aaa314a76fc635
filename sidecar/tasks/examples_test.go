package tasks

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/replicas/redisproc"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestExamples: on memory and Redis, a text counts once more when answered
// again, each capability keeps at most its bound (the least recently seen
// go), a candidate not seen for ttl is gone, and dropped texts are forgotten.
func TestExamples(t *testing.T) {
	srv := redisproc.Start(t)
	stores := map[string]func(now func() time.Time) Examples{
		"memory": func(now func() time.Time) Examples { return NewMemory(0, WithClock(now)) },
		"redis":  func(now func() time.Time) Examples { return openTestRedis(t, srv, WithClock(now)) },
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now()}
			x := open(clock.now)
			ctx := t.Context()
			const ttl = time.Hour
			texts := func(cap string) map[string]int {
				got, err := x.ExamplesOf(ctx, cap, ttl)
				require.NoError(t, err)
				out := map[string]int{}
				for _, e := range got {
					require.Equal(t, cap, e.Capability)
					require.False(t, e.Last.Before(e.First))
					out[e.Text] = e.Count
				}
				return out
			}
			require.Empty(t, texts("book"))
			require.NoError(t, x.AddExample(ctx, "book", "i need to move my flight", ttl, 3))
			clock.add(time.Minute)
			require.NoError(t, x.AddExample(ctx, "book", "i need to move my flight", ttl, 3))
			require.NoError(t, x.AddExample(ctx, "cancel", "drop my booking", ttl, 3))
			require.Equal(t, map[string]int{"i need to move my flight": 2}, texts("book"))
			require.Equal(t, map[string]int{"drop my booking": 1}, texts("cancel"))

			// The bound: the least recently seen text goes.
			clock.add(time.Minute)
			require.NoError(t, x.AddExample(ctx, "book", "change my seat", ttl, 3))
			clock.add(time.Minute)
			require.NoError(t, x.AddExample(ctx, "book", "rebook me", ttl, 3))
			clock.add(time.Minute)
			require.NoError(t, x.AddExample(ctx, "book", "i need to move my flight", ttl, 3))
			clock.add(time.Minute)
			require.NoError(t, x.AddExample(ctx, "book", "another date please", ttl, 3))
			require.Equal(t, map[string]int{"rebook me": 1, "i need to move my flight": 3, "another date please": 1}, texts("book"))

			require.NoError(t, x.DropExamples(ctx, "book", []string{"rebook me", "not there"}))
			require.Equal(t, map[string]int{"i need to move my flight": 3, "another date please": 1}, texts("book"))

			// Past the TTL nothing is listed.
			clock.add(ttl)
			require.Empty(t, texts("book"))
			require.Empty(t, texts("cancel"))
		})
	}
}

// TestRedisExamplesExpire: the Redis keys carry a relative TTL, renewed by
// each answer, so that candidates nobody reviews leave Redis by themselves.
func TestRedisExamplesExpire(t *testing.T) {
	srv := redisproc.Start(t)
	r := openTestRedis(t, srv)
	require.NoError(t, r.AddExample(t.Context(), "book", "move my flight", 10*time.Minute, 5))
	for _, k := range r.keys.exampleKeys("book") {
		ttl, err := r.rdb.PTTL(t.Context(), k).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, 9*time.Minute, k)
		require.LessOrEqual(t, ttl, 10*time.Minute, k)
	}
}
