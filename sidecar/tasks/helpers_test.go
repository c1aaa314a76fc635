package tasks

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clockOffsets are storetest.Skews, for this package's own expiry tests
// (storetest imports tasks, so tasks' internal tests cannot import it);
// TestSkewsAgree (package tasks_test) holds the two equal.
var clockOffsets = []struct {
	name   string
	offset time.Duration
}{
	{"clock now", 0},
	{"clock a year behind", -365 * 24 * time.Hour},
	{"clock a year ahead", 365 * 24 * time.Hour},
}

// requireBinding compares bindings, times by instant.
// concurrently runs f(0) … f(n-1) at once and waits for all of them.
func concurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

func requireBinding(t *testing.T, want, got Binding) {
	t.Helper()
	require.True(t, want.CreatedAt.Equal(got.CreatedAt), "created %s, want %s", got.CreatedAt, want.CreatedAt)
	require.True(t, want.ExpiresAt.Equal(got.ExpiresAt), "expires %s, want %s", got.ExpiresAt, want.ExpiresAt)
	want.CreatedAt, got.CreatedAt = time.Time{}, time.Time{}
	want.ExpiresAt, got.ExpiresAt = time.Time{}, time.Time{}
	if len(want.Candidates) == 0 {
		want.Candidates = nil
	}
	if len(got.Candidates) == 0 {
		got.Candidates = nil
	}
	require.Equal(t, want, got)
}

func taskIDs(bs []Binding) []string {
	var ids []string
	for _, b := range bs {
		ids = append(ids, b.TaskID)
	}
	return ids
}

// clock is a settable clock for WithClock. The conformance suite starts it
// at the store's clock (storetest); these tests at the current time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now().Truncate(time.Millisecond)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
