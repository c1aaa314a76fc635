package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/storetest"
	"github.com/capgate/capgate/test/replicas/redisproc"
)

// The conformance suite (storetest.Run) on Redis as one server, a Cluster
// and a Sentinel set, each on real redis-server processes.

func TestRedis(t *testing.T) {
	srv := redisproc.Start(t)
	storetest.Run(t, func(t *testing.T, opts ...tasks.Option) tasks.Store { return openTestRedis(t, srv, opts...) })
}

// TestRedisCluster runs the store conformance suite on a real 3-master
// Cluster with one replica per master (writes wait for it, the default),
// and checks the test's slot function against CLUSTER KEYSLOT.
func TestRedisCluster(t *testing.T) {
	nodes := redisproc.StartCluster(t, 3, 1)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	url := "redis-cluster://" + strings.Join(addrs[:3], ",")

	raw := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = raw.Close() })
	for _, key := range slotProbeKeys() {
		got, err := raw.ClusterKeySlot(t.Context(), key).Result()
		require.NoError(t, err)
		require.Equal(t, int64(slot(key)), got, key)
	}

	storetest.Run(t, func(t *testing.T, opts ...tasks.Option) tasks.Store {
		prefix := nextPrefix()
		r, err := Dial(t.Context(), withPatientReplicas(url), append([]tasks.Option{tasks.WithKeyPrefix(prefix)}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		require.True(t, r.keys.tagged)
		require.Equal(t, 1, r.opts.MinReplicas)
		return r
	})

	// Bindings spread over the masters.
	r, err := Dial(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	for i := range 30 {
		require.NoError(t, r.Bind(t.Context(), tasks.Binding{TaskID: fmt.Sprintf("spread-%d", i), Subject: fmt.Sprintf("s%d", i), Capability: "c", Handler: "h"}))
	}
	var masters atomic.Int32
	require.NoError(t, raw.ForEachMaster(t.Context(), func(ctx2 context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx2).Result()
		if n > 0 {
			masters.Add(1)
		}
		return err
	}))
	require.Equal(t, int32(3), masters.Load(), "every master holds bindings")
}

// TestRedisSentinel runs the store conformance suite through Sentinel on a
// master with one replica: every ownership write waits for the replica.
// Then, with the replica stopped, a write is refused, not acknowledged.
func TestRedisSentinel(t *testing.T) {
	set := redisproc.StartSentinelSet(t, "main", 5*time.Second) // no failover wanted here: a slow shared machine must not start one
	url := set.URL()
	storetest.Run(t, func(t *testing.T, opts ...tasks.Option) tasks.Store {
		prefix := nextPrefix()
		r, err := Dial(t.Context(), withPatientReplicas(url), append([]tasks.Option{tasks.WithKeyPrefix(prefix)}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		require.Equal(t, 1, r.opts.MinReplicas)
		return r
	})

	r, err := Dial(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	b := tasks.Binding{TaskID: "t-1", Subject: "alice", Capability: "c", Handler: "h"}
	require.NoError(t, r.Bind(t.Context(), b))
	set.Replica.Kill()
	err = r.Bind(t.Context(), tasks.Binding{TaskID: "t-2", Subject: "alice", Capability: "c", Handler: "h"})
	require.ErrorIs(t, err, tasks.ErrUnavailable, "a write no replica confirmed is not acknowledged")
	require.ErrorContains(t, err, "not confirmed by enough replicas")
	require.ErrorIs(t, r.Delete(t.Context(), "t-1"), tasks.ErrUnavailable)
	got, ok, err := r.Lookup(t.Context(), "t-1")
	require.NoError(t, err, "reads need no replica")
	require.False(t, ok, "the master applied the delete; it was only not acknowledged")
	_ = got
}

// slotProbeKeys are keys of each kind, as a Cluster store names them, and
// two keys with braces, for checking slot against CLUSTER KEYSLOT.
func slotProbeKeys() []string {
	k := keys{prefix: "capgate:", tagged: true}
	return []string{k.task("t-1"), k.owner(tasks.Owner{Issuer: "https://idp", Subject: "s", Tenant: "t"}), k.day("c", 20000), "plain", "a{}b{c}"}
}
