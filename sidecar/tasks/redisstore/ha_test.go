package redisstore

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/test/replicas/redisproc"
)

// crc16 is Redis Cluster's key hash (CRC-16/XMODEM).
func crc16(b string) uint16 {
	var crc uint16
	for i := range len(b) {
		crc ^= uint16(b[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot is the Cluster slot of key: the hash of its hash tag — what lies
// between the first { and the first } after it, when not empty — or of the
// whole key.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// operationKeys are the key sets one script or transaction of the Redis
// store touches, built by the store's own key functions.
func operationKeys(k keys, o tasks.Owner, taskID, contextID, capability string, day int64) map[string][]string {
	return map[string][]string{
		"ownerScript/ownerDeleteScript": k.ownerSets(o, contextID),
		"ownerScript, no context":       k.ownerSets(o, ""),
		"buildIndex/dropStale":          {k.owner(o), k.index(o), k.contextIndex(o, contextID), k.unindexed(o)},
		"bindScript/deleteScript":       {k.task(taskID)},
		"recordScript":                  k.usageKeys(capability, day),
		"reserveScript/settleScript":    append(k.sentKeys(o), k.owner(o), k.index(o)),
	}
}

// TestClusterKeySlots: in a Cluster layout every script's keys hash to
// one slot, for owners, task ids and capabilities drawn with the
// characters that matter (braces, colons, escapes, empty parts), and the
// keys of different owners, tasks and capabilities spread over slots.
func TestClusterKeySlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 3))
	alphabet := []string{"", "a", "b", "{", "}", "{}", ":", "%", "%7B", "é", " ", "/", "x{y}z"}
	word := func() string {
		var b strings.Builder
		for range rng.IntN(5) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	slots := map[int]bool{}
	for i := range 5000 {
		k := keys{prefix: []string{"capgate:", "", "fin:", "a:b:"}[i%4], tagged: true}
		o := tasks.Owner{Issuer: word(), Subject: word(), Tenant: word()}
		for name, ks := range operationKeys(k, o, word(), word(), word(), int64(rng.IntN(30000))) {
			for _, key := range ks[1:] {
				require.Equal(t, slot(ks[0]), slot(key), "%s keys %q cross slots", name, ks)
			}
		}
		slots[slot(k.owner(o))] = true
		slots[slot(k.task(strconv.Itoa(i)))] = true
	}
	require.Greater(t, len(slots), 1000, "keys spread over the cluster's slots")

	// Without tags (one Redis, Sentinel) the layout is the documented one.
	k := keys{prefix: "p:"}
	require.Equal(t, "p:task:t{1}", k.task("t{1}"))
	require.Equal(t, "p:owner:acme:alice", k.owner(tasks.Owner{Subject: "alice", Tenant: "acme"}))
	require.Equal(t, "p:usage:c:3", k.day("c", 3))
	k.tagged = true
	require.Equal(t, "p:task:{t%7B1%7D}", k.task("t{1}"))
	require.Equal(t, "p:usage:{%}", k.usage(""))
	require.Equal(t, "p:usage:{%25}", k.usage("%"))
	require.Equal(t, "p:owner:{:acme:alice}", k.owner(tasks.Owner{Subject: "alice", Tenant: "acme"}))
	require.Equal(t, "p:pending:{i:acme:alice}", k.pending(tasks.Owner{Issuer: "i", Subject: "alice", Tenant: "acme"}))
	require.Equal(t, "p:usage:{c}:3", k.day("c", 3))
}

// TestRedisSentinelAuth: Sentinels and Redis servers with different
// passwords. The servers' password goes to the servers only
// (WithPassword: store_password_file or _env, or the URL's userinfo), the
// Sentinels' to the Sentinels only (WithSentinelPassword); with either
// missing or the two swapped nothing is read or written.
func TestRedisSentinelAuth(t *testing.T) {
	const server, sentinel = "s3rver-Secret", "sentinel-Secret"
	set := redisproc.StartSentinelSetAuth(t, "main", 5*time.Second, redisproc.Auth{Password: server, SentinelPassword: sentinel})
	open := func(t *testing.T, url string, opts ...tasks.Option) *Store {
		t.Helper()
		prefix := "test-" + strconv.FormatInt(prefixes.Add(1), 10) + ":"
		r, err := Dial(t.Context(), url, append([]tasks.Option{tasks.WithKeyPrefix(prefix), tasks.WithOpTimeout(3 * time.Second)}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	bind := func(r *Store, id string) error {
		return r.Bind(t.Context(), tasks.Binding{TaskID: id, Subject: "alice", Capability: "c", Handler: "h"})
	}

	r := open(t, set.URL(), tasks.WithPassword(server), tasks.WithSentinelPassword(sentinel))
	require.NoError(t, bind(r, "t-1"), "the write waits for the replica, which authenticated to the master")
	got, ok, err := r.Lookup(t.Context(), "t-1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "alice", got.Subject)

	userinfo := strings.Replace(set.URL(), "redis-sentinel://", "redis-sentinel://:"+server+"@", 1)
	require.NoError(t, bind(open(t, userinfo, tasks.WithSentinelPassword(sentinel)), "t-2"), "the URL's password is the servers'")

	for name, opts := range map[string][]tasks.Option{
		"no Sentinel password":  {tasks.WithPassword(server)},
		"no server password":    {tasks.WithSentinelPassword(sentinel)},
		"swapped":               {tasks.WithPassword(sentinel), tasks.WithSentinelPassword(server)},
		"the servers' for both": {tasks.WithPassword(server), tasks.WithSentinelPassword(server)},
	} {
		err := bind(open(t, set.URL(), opts...), "t-3")
		require.ErrorIs(t, err, tasks.ErrUnavailable, name)
		// An unauthenticated connection's first command (the owner step's
		// script, 16 elements) is refused as NOAUTH, or, being longer than
		// Redis lets an unauthenticated client send, as "unauthenticated
		// multibulk length".
		require.Regexp(t, "NOAUTH|WRONGPASS|unauthenticated", err.Error(), "%s: refused for the credentials (not reported as unreplicated)", name)
		require.NotContains(t, err.Error(), server, name)
		require.NotContains(t, err.Error(), sentinel, name)
	}
}

// withPatientReplicas gives the conformance suite's HA stores a replica_timeout of 1.5 s (and
// a read_timeout above it) instead of 250 ms: on a loaded 2-core machine a replica's
// acknowledgement can take longer than production's default, and the suite tests the store's
// answers, not replication latency (the refusal of an unconfirmed write has tests of its own).
func withPatientReplicas(url string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "read_timeout=2s&replica_timeout=1500ms"
}
