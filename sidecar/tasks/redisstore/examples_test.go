package redisstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/storetest"
	"github.com/capgate/capgate/test/replicas/redisproc"
)

// TestRedisExamples runs the examples' conformance suite on Redis.
func TestRedisExamples(t *testing.T) {
	srv := redisproc.Start(t)
	storetest.RunExamples(t, func(t *testing.T, opts ...tasks.Option) tasks.Examples { return openTestRedis(t, srv, opts...) })
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
