package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/storetest"
	"github.com/capgate/capgate/test/replicas/redisproc"
	"github.com/capgate/capgate/test/testnet"
)

var prefixes atomic.Int64

// nextPrefix is a key prefix no other test of this run uses.
func nextPrefix() string { return "test-" + strconv.FormatInt(prefixes.Add(1), 10) + ":" }

// openTestRedis opens a store on srv under a key prefix of its own and
// closes it when the test ends.
func openTestRedis(t *testing.T, srv *redisproc.Server, opts ...tasks.Option) *Store {
	t.Helper()
	r, err := Dial(t.Context(), srv.URL(0), append([]tasks.Option{tasks.WithKeyPrefix(nextPrefix())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// twoReplicas starts a Redis and opens two stores on it under one key
// prefix, as two replicas of one deployment.
func twoReplicas(t *testing.T) (*redisproc.Server, [2]*Store) {
	t.Helper()
	srv := redisproc.Start(t)
	return srv, [2]*Store{openTestRedis(t, srv, tasks.WithKeyPrefix("shared:")), openTestRedis(t, srv, tasks.WithKeyPrefix("shared:"))}
}

// rawClient talks to srv directly, to inspect keys.
func rawClient(t *testing.T, srv *redisproc.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRedisExpiriesIgnoreSkew holds the rule behind every expiry the
// store sets: it is a time to live counted from the store's own now
// (PEXPIRE), so that a capgate clock a year behind or ahead of Redis's
// neither drops a key at once nor keeps it a year too long.
func TestRedisExpiriesIgnoreSkew(t *testing.T) {
	srv := redisproc.Start(t)
	raw := rawClient(t, srv)
	for _, c := range storetest.Skews() {
		t.Run(c.Name, func(t *testing.T) {
			ctx := t.Context()
			now := func() time.Time { return time.Now().Add(c.Offset) }
			r := openTestRedis(t, srv, tasks.WithClock(now))
			p := tasks.Binding{TaskID: "p1", Issuer: "i", Subject: "alice", Tenant: "acme", Pending: true}
			require.NoError(t, r.BindPending(ctx, p, 10*time.Minute, 5))
			at := now()
			require.NoError(t, r.RecordCall(ctx, "lookup-invoice", at))
			require.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: "t1", Issuer: "i", Subject: "alice", Tenant: "acme", Capability: "c", Handler: "h"}))
			o := tasks.Owner{Issuer: "i", Subject: "alice", Tenant: "acme"}
			for key, want := range map[string]time.Duration{
				r.keys.task("p1"): 10 * time.Minute,
				r.keys.pending(o): 10 * time.Minute,
				r.keys.day("lookup-invoice", tasks.Day(at)): usageTTL(at),
				r.keys.task("t1"): tasks.DefaultBindingTTL,
				r.keys.owner(o):   tasks.DefaultBindingTTL,
			} {
				pttl, err := raw.PTTL(ctx, key).Result()
				require.NoError(t, err)
				require.InDelta(t, want.Milliseconds(), pttl.Milliseconds(), 5000, key)
			}
		})
	}
}

// TestRedisKeys checks the documented key layout and expiries
// (docs/operations.md, "Shared state on Redis").
func TestRedisKeys(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	r := openTestRedis(t, srv, tasks.WithKeyPrefix("cg:"))
	raw := rawClient(t, srv)

	// A binding with an issuer: its owner set has three escaped components.
	require.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: "t1", Issuer: "https://idp.example/", Subject: "alice@x", Tenant: "acme", Capability: "c", Handler: "h", CreatedAt: time.Unix(100, 0)}))
	h, err := raw.HGetAll(ctx, "cg:task:t1").Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"subject": "alice@x", "tenant": "acme", "issuer": "https://idp.example/", "capability": "c", "handler": "h",
		"pending": "0", "created": "100000000000", "contextId": "", "candidates": ""}, h)
	ttl, err := raw.TTL(ctx, "cg:task:t1").Result()
	require.NoError(t, err)
	require.InDelta(t, tasks.DefaultBindingTTL.Seconds(), ttl.Seconds(), 5)
	const ownerKey = "cg:owner:https%3A%2F%2Fidp.example%2F:acme:alice%40x"
	members, err := raw.SMembers(ctx, ownerKey).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"t1"}, members)
	ttl, err = raw.TTL(ctx, ownerKey).Result()
	require.NoError(t, err)
	require.InDelta(t, tasks.DefaultBindingTTL.Seconds(), ttl.Seconds(), 5)

	// Without an issuer: the two-component owner key of earlier releases.
	require.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: "t0", Subject: "alice@x", Tenant: "acme", Capability: "c", Handler: "h"}))
	members, err = raw.SMembers(ctx, "cg:owner:acme:alice%40x").Result()
	require.NoError(t, err)
	require.Equal(t, []string{"t0"}, members)

	// A pending binding expires at its expiry, and so does its entry in the
	// owner's pending set.
	require.NoError(t, r.BindPending(ctx, tasks.Binding{TaskID: "p1", Issuer: "https://idp.example/", Subject: "alice@x", Tenant: "acme", Pending: true, Candidates: []string{"a", "b"}}, 10*time.Minute, 5))
	got, ok, err := r.Lookup(ctx, "p1")
	require.NoError(t, err)
	require.True(t, ok)
	require.WithinDuration(t, time.Now().Add(10*time.Minute), got.ExpiresAt, 5*time.Second)
	h, err = raw.HGetAll(ctx, "cg:task:p1").Result()
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(got.ExpiresAt.UnixMilli(), 10), h["expires"])
	require.Equal(t, "1", h["pending"])
	require.Equal(t, `["a","b"]`, h["candidates"])
	// Expiries are relative (PEXPIRE from the store's now), never an instant
	// of capgate's clock that Redis would read by its own.
	pttl, err := raw.PTTL(ctx, "cg:task:p1").Result()
	require.NoError(t, err)
	require.InDelta(t, (10 * time.Minute).Milliseconds(), pttl.Milliseconds(), 5000)
	const pendingKey = "cg:pending:https%3A%2F%2Fidp.example%2F:acme:alice%40x"
	z, err := raw.ZRangeWithScores(ctx, pendingKey, 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []redis.Z{{Score: float64(got.ExpiresAt.UnixMilli()), Member: "p1"}}, z)
	pttl, err = raw.PTTL(ctx, pendingKey).Result()
	require.NoError(t, err)
	require.InDelta(t, (10 * time.Minute).Milliseconds(), pttl.Milliseconds(), 5000)
	members, err = raw.SMembers(ctx, ownerKey).Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"t1", "p1"}, members)

	// Resolved, it loses the expiry and leaves the pending set.
	require.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: "p1", Issuer: "https://idp.example/", Subject: "alice@x", Tenant: "acme", Capability: "c", Handler: "h"}))
	h, err = raw.HGetAll(ctx, "cg:task:p1").Result()
	require.NoError(t, err)
	require.NotContains(t, h, "expires")
	ttl, err = raw.TTL(ctx, "cg:task:p1").Result()
	require.NoError(t, err)
	require.InDelta(t, tasks.DefaultBindingTTL.Seconds(), ttl.Seconds(), 5)
	n, err := raw.Exists(ctx, pendingKey).Result()
	require.NoError(t, err)
	require.Zero(t, n)

	now := time.Now()
	require.NoError(t, r.RecordCall(ctx, "lookup-invoice", now))
	d := strconv.FormatInt(now.Unix()/86400, 10)
	calls, err := raw.Get(ctx, "cg:usage:lookup-invoice:"+d).Int()
	require.NoError(t, err)
	require.Equal(t, 1, calls)
	pttl, err = raw.PTTL(ctx, "cg:usage:lookup-invoice:"+d).Result()
	require.NoError(t, err)
	require.InDelta(t, time.UnixMilli((now.Unix()/86400+32)*86400*1000).Sub(now).Milliseconds(), pttl.Milliseconds(), 5000)
	u, err := raw.HGetAll(ctx, "cg:usage:lookup-invoice").Result()
	require.NoError(t, err)
	require.Equal(t, "1", u["total"])
	require.Len(t, u["last"], 20)
}

// TestRedisContextKeys checks a context's documented key, its size and its
// life (docs/operations.md, "Keys"): binding_ttl, renewed by its holder's
// claim and by nobody else's; expired, the id is free again.
func TestRedisContextKeys(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	const ttl = 3 * time.Second
	// Without the context cache: every claim reaches Redis (TestRedisContextCache
	// holds what the cache changes).
	r := openTestRedis(t, srv, tasks.WithKeyPrefix("cg:"), tasks.WithBindingTTL(ttl), tasks.WithContextCache(0))
	raw := rawClient(t, srv)
	const id = "019a2b3c-4d5e-7f60-8a9b-0c1d2e3f4a5b" // the shape of a2a-go's context ids
	alice := tasks.Context{ContextID: id, Issuer: "https://idp.example/", Subject: "alice@x", Tenant: "acme", CreatedAt: time.Unix(100, 0)}
	_, err := r.ClaimContext(ctx, alice)
	require.NoError(t, err)
	h, err := raw.HGetAll(ctx, "cg:context:"+id).Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"subject": "alice@x", "tenant": "acme", "issuer": "https://idp.example/", "created": "100000000000"}, h)
	bytes, err := raw.MemoryUsage(ctx, "cg:context:"+id).Result()
	require.NoError(t, err)
	t.Logf("one context (36-byte id, 20-byte issuer): %d bytes", bytes)
	require.Less(t, bytes, int64(256), "docs/operations.md sizes a context at under 256 bytes")

	aged := func() bool {
		left, err := raw.PTTL(ctx, "cg:context:"+id).Result()
		return err == nil && left > 0 && left < ttl-time.Second
	}
	require.Eventually(t, aged, 5*time.Second, 20*time.Millisecond)
	held, err := r.ClaimContext(ctx, tasks.Context{ContextID: id, Issuer: "https://idp.example/", Subject: "mallory", Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, "alice@x", held.Subject)
	require.True(t, aged(), "another owner's claim does not renew the holder's context")
	_, err = r.ClaimContext(ctx, alice)
	require.NoError(t, err)
	left, err := raw.PTTL(ctx, "cg:context:"+id).Result()
	require.NoError(t, err)
	require.Greater(t, left, ttl-time.Second, "renewed by the holder's claim")
	require.Eventually(t, func() bool {
		_, ok, err := r.LookupContext(ctx, id)
		return err == nil && !ok
	}, 10*time.Second, 20*time.Millisecond)
	held, err = r.ClaimContext(ctx, tasks.Context{ContextID: id, Issuer: "https://idp.example/", Subject: "mallory", Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, "mallory", held.Subject, "an expired context id is free again")
}

// TestRedisContextClaimAcrossReplicas: replicas racing to claim one new
// context id: exactly one owner holds it, and every replica says which.
func TestRedisContextClaimAcrossReplicas(t *testing.T) {
	ctx := t.Context()
	_, replicas := twoReplicas(t)
	const n = 40
	held := make([]tasks.Context, n)
	errs := make([]error, n)
	storetest.Concurrently(n, func(i int) {
		held[i], errs[i] = replicas[i%2].ClaimContext(ctx, tasks.Context{ContextID: "new-ctx", Issuer: "i", Subject: "caller-" + strconv.Itoa(i), Tenant: "acme"})
	})
	won := 0
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, held[0], held[i], "every replica names the same holder")
		if held[i].OwnedBy(tasks.Owner{Issuer: "i", Subject: "caller-" + strconv.Itoa(i), Tenant: "acme"}) {
			won++
		}
	}
	require.Equal(t, 1, won)
}

func TestRedisBindingTTL(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	const ttl = 2 * time.Second
	r := openTestRedis(t, srv, tasks.WithKeyPrefix("ttl:"), tasks.WithBindingTTL(ttl))
	raw := rawClient(t, srv)
	require.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: "t1", Subject: "alice", Tenant: "acme", Capability: "c", Handler: "h"}))
	// A Bind renews the TTL: read Redis's own clock of the key rather than
	// sleeping close to the expiry, which a loaded machine overshoots.
	require.Eventually(t, func() bool {
		left, err := raw.PTTL(ctx, "ttl:task:t1").Result()
		return err == nil && left > 0 && left < ttl-time.Second
	}, 5*time.Second, 20*time.Millisecond)
	require.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: "t1", Subject: "alice", Tenant: "acme", Capability: "c", Handler: "h"}))
	left, err := raw.PTTL(ctx, "ttl:task:t1").Result()
	require.NoError(t, err)
	require.Greater(t, left, ttl-time.Second, "renewed by the second Bind")
	_, ok, err := r.Lookup(ctx, "t1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Eventually(t, func() bool {
		_, ok, err := r.Lookup(ctx, "t1")
		return err == nil && !ok
	}, 10*time.Second, 20*time.Millisecond)
	owned, err := r.Owned(ctx, tasks.Owner{Subject: "alice", Tenant: "acme"})
	require.NoError(t, err)
	require.Empty(t, owned)
	// An expired task id is free again.
	require.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: "t1", Subject: "mallory", Tenant: "acme", Capability: "c", Handler: "h"}))
}

// TestRedisLegacyRecord: a binding written before issuers were recorded
// (the hash and owner set exactly as that release wrote them) is read back
// with Issuer "", owned only by a Legacy owner, listed for one, re-bound
// with its own (empty) issuer, and deleted with its owner-set entry.
func TestRedisLegacyRecord(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	r := openTestRedis(t, srv, tasks.WithKeyPrefix("old:"))
	raw := rawClient(t, srv)

	// As the previous bindScript wrote it.
	write := func(id string, created int64, pending string) {
		require.NoError(t, raw.HSet(ctx, "old:task:"+id, "subject", "alice@x", "tenant", "acme", "capability", "reconcile-invoice",
			"handler", "recon", "pending", pending, "contextId", "ctx-"+id, "candidates", "", "created", strconv.FormatInt(created, 10)).Err())
		require.NoError(t, raw.PExpire(ctx, "old:task:"+id, tasks.DefaultBindingTTL).Err())
		require.NoError(t, raw.SAdd(ctx, "old:owner:acme:alice%40x", id).Err())
		require.NoError(t, raw.PExpire(ctx, "old:owner:acme:alice%40x", tasks.DefaultBindingTTL).Err())
	}
	write("old1", 100e9, "0")
	write("old2", 300e9, "0")
	require.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: "new", Issuer: "https://idp-a", Subject: "alice@x", Tenant: "acme", Capability: "c", Handler: "h", CreatedAt: time.Unix(200, 0)}))

	got, ok, err := r.Lookup(ctx, "old1")
	require.NoError(t, err)
	require.True(t, ok)
	storetest.RequireBinding(t, tasks.Binding{TaskID: "old1", ContextID: "ctx-old1", Capability: "reconcile-invoice", Handler: "recon", Subject: "alice@x", Tenant: "acme", CreatedAt: time.Unix(100, 0)}, got)
	require.Empty(t, got.Issuer)
	require.True(t, got.ExpiresAt.IsZero())
	require.True(t, got.OwnedBy(tasks.Owner{Issuer: "https://idp-a", Subject: "alice@x", Tenant: "acme", Legacy: true}))
	require.False(t, got.OwnedBy(tasks.Owner{Issuer: "https://idp-a", Subject: "alice@x", Tenant: "acme"}), "owned by nobody unless Legacy")

	owned, err := r.Owned(ctx, tasks.Owner{Issuer: "https://idp-a", Subject: "alice@x", Tenant: "acme", Legacy: true})
	require.NoError(t, err)
	require.Equal(t, []string{"old2", "new", "old1"}, storetest.TaskIDs(owned))
	owned, err = r.Owned(ctx, tasks.Owner{Issuer: "https://idp-a", Subject: "alice@x", Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, []string{"new"}, storetest.TaskIDs(owned))

	// Another issuer cannot take it over; its own (empty) issuer re-binds it.
	require.ErrorIs(t, r.Bind(ctx, tasks.Binding{TaskID: "old1", Issuer: "https://idp-a", Subject: "alice@x", Tenant: "acme", Capability: "reconcile-invoice", Handler: "recon"}), tasks.ErrConflict)
	require.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: "old1", Subject: "alice@x", Tenant: "acme", Capability: "reconcile-invoice", Handler: "recon"}))
	got, _, err = r.Lookup(ctx, "old1")
	require.NoError(t, err)
	require.True(t, got.CreatedAt.Equal(time.Unix(100, 0)), "created kept")

	require.NoError(t, r.Delete(ctx, "old2"))
	members, err := raw.SMembers(ctx, "old:owner:acme:alice%40x").Result()
	require.NoError(t, err)
	require.Equal(t, []string{"old1"}, members)
	n, err := raw.Exists(ctx, "old:task:old2").Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// previousBindScript is bindScript as the release before held message ids wrote bindings:
// fourteen arguments, held and heldVersion only.
var previousBindScript = redis.NewScript(`
local old = redis.call('HMGET', KEYS[1], 'subject', 'tenant', 'issuer', 'capability', 'handler', 'pending', 'expires', 'created', 'contextId')
local exists = old[1]
if exists and old[7] and old[7] ~= '' and tonumber(old[7]) <= tonumber(ARGV[10]) then
  redis.call('DEL', KEYS[1])
  exists = false
end
if exists then
  if old[1] ~= ARGV[1] or old[2] ~= ARGV[2] or (old[3] or '') ~= ARGV[3] then return 'conflict' end
  if old[6] ~= '1' and (old[4] ~= ARGV[4] or old[5] ~= ARGV[5]) then return 'conflict' end
end
redis.call('HSET', KEYS[1], 'subject', ARGV[1], 'tenant', ARGV[2], 'issuer', ARGV[3], 'capability', ARGV[4], 'handler', ARGV[5],
  'pending', ARGV[6], 'contextId', ARGV[8], 'candidates', ARGV[9])
if ARGV[13] ~= '' then
  redis.call('HSET', KEYS[1], 'held', ARGV[13], 'heldVersion', ARGV[14])
else
  redis.call('HDEL', KEYS[1], 'held', 'heldVersion')
end
if ARGV[7] ~= '' or not exists then redis.call('HSET', KEYS[1], 'created', ARGV[7]) end
if ARGV[12] == '' then
  redis.call('HDEL', KEYS[1], 'expires')
  redis.call('PEXPIRE', KEYS[1], ARGV[11])
else
  redis.call('HSET', KEYS[1], 'expires', ARGV[12])
  redis.call('PEXPIRE', KEYS[1], math.max(1, tonumber(ARGV[12]) - tonumber(ARGV[10])))
end
if exists then return {'ok', old[8] or '', old[9] or '', '1'} end
return 0
`)

// previousBindingFields are the fields the release before held message ids read.
var previousBindingFields = []string{"subject", "tenant", "capability", "handler", "pending", "created", "contextId", "candidates", "issuer", "expires", "held", "heldVersion"}

// TestRedisHeldMessageIDMixedFleet: during a rolling upgrade a replica of the previous release
// (which keeps no held message id) and one of this release share pending bindings. A pending
// binding the previous release wrote is read with no HeldMessageID (its task is rendered
// without history), not refused; one this release wrote is read by the previous release field
// for field as it wrote its own (the extra field is not among those it reads); the previous
// release asking again keeps this release's id (the same first message), and its resolution,
// which drops held and heldVersion but knows nothing of heldMessageId, leaves a field this
// release does not read on a resolved binding.
func TestRedisHeldMessageIDMixedFleet(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	r := openTestRedis(t, srv)
	raw := rawClient(t, srv)
	const ttl = 10 * time.Minute
	// previous binds b as the previous release's BindPending (with a ttl) or Bind did.
	previous := func(b tasks.Binding, ttl time.Duration) {
		t.Helper()
		var exp time.Time
		if ttl > 0 {
			exp = tasks.Expiry(time.Now(), ttl)
		}
		w, err := r.bindArgs(b, exp, 10)
		require.NoError(t, err)
		res, err := r.runFast(ctx, ownerScript, []scriptKeys{w.ownerKeys}, w.ownerArgs[:])
		require.NoError(t, err)
		require.Equal(t, "ok", res)
		require.NoError(t, previousBindScript.Run(ctx, r.rdb, []string{r.keys.task(b.TaskID)}, w.bindArgs[:14]...).Err())
	}
	owner := tasks.Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}
	pending := func(id string) tasks.Binding {
		return tasks.Binding{TaskID: id, ContextID: "ctx-" + id, Issuer: owner.Issuer, Subject: owner.Subject, Tenant: owner.Tenant, Pending: true,
			Candidates: []string{"a", "b"}, CreatedAt: time.Now(), Held: []byte(`[{"text":"hello there"}]`), HeldVersion: "1.0", HeldMessageID: "m-" + id}
	}

	// Written by the previous release: held parts, no id.
	old := pending("old")
	previous(old, ttl)
	got, ok, err := r.Lookup(ctx, "old")
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, got.Pending)
	require.Equal(t, old.Held, got.Held)
	require.Equal(t, "1.0", got.HeldVersion)
	require.Empty(t, got.HeldMessageID, "no id was kept: none is made up")

	// Written by this release: the previous release reads every field it knows, unchanged.
	b := pending("new")
	require.NoError(t, r.BindPending(ctx, b, ttl, 10))
	vals, err := raw.HMGet(ctx, r.keys.task("new"), previousBindingFields...).Result()
	require.NoError(t, err)
	prev, ok, err := decodeBinding("new", append(vals, nil))
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, prev.HeldMessageID)
	prev.HeldMessageID = b.HeldMessageID
	b.ExpiresAt = prev.ExpiresAt
	storetest.RequireBinding(t, b, prev)

	// Asked again by the previous release (the same first message): the id stays.
	previous(b, ttl)
	got, _, err = r.Lookup(ctx, "new")
	require.NoError(t, err)
	require.Equal(t, b.HeldMessageID, got.HeldMessageID)

	// Resolved by the previous release: held is dropped, the id it does not know is left in the
	// hash, and this release does not read it.
	previous(tasks.Binding{TaskID: "new", Issuer: owner.Issuer, Subject: owner.Subject, Tenant: owner.Tenant, Capability: "a", Handler: "h"}, 0)
	left, err := raw.HGet(ctx, r.keys.task("new"), "heldMessageId").Result()
	require.NoError(t, err)
	require.Equal(t, b.HeldMessageID, left)
	got, _, err = r.Lookup(ctx, "new")
	require.NoError(t, err)
	require.False(t, got.Pending)
	require.Empty(t, got.Held)
	require.Empty(t, got.HeldMessageID)

	// Resolved by this release: all three are dropped from the hash.
	b = pending("new2")
	require.NoError(t, r.BindPending(ctx, b, ttl, 10))
	require.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: "new2", Issuer: owner.Issuer, Subject: owner.Subject, Tenant: owner.Tenant, Capability: "a", Handler: "h"}))
	n, err := raw.HExists(ctx, r.keys.task("new2"), "heldMessageId").Result()
	require.NoError(t, err)
	require.False(t, n)
	n, err = raw.HExists(ctx, r.keys.task("new2"), "held").Result()
	require.NoError(t, err)
	require.False(t, n)
}

// TestRedisPendingCapAcrossReplicas: two stores (two replicas' clients) on
// one Redis racing BindPending for one owner never pass the cap together.
func TestRedisPendingCapAcrossReplicas(t *testing.T) {
	ctx := t.Context()
	srv, replicas := twoReplicas(t)
	b := replicas[1]
	const n, limit = 40, 7
	errs := make([]error, n)
	storetest.Concurrently(n, func(i int) {
		errs[i] = replicas[i%2].BindPending(ctx, tasks.Binding{TaskID: "c" + strconv.Itoa(i), Issuer: "i", Subject: "alice", Tenant: "acme", Pending: true}, time.Minute, limit)
	})
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, err, tasks.ErrTooManyPending)
	}
	require.Equal(t, limit, ok)
	card, err := rawClient(t, srv).ZCard(ctx, "shared:pending:i:acme:alice").Result()
	require.NoError(t, err)
	require.Equal(t, int64(limit), card)
	owned, err := b.Owned(ctx, tasks.Owner{Issuer: "i", Subject: "alice", Tenant: "acme"})
	require.NoError(t, err)
	require.Len(t, owned, limit)
}

// TestRedisUnavailable: with nothing listening, Open still returns a store,
// and every operation fails quickly with ErrUnavailable.
func TestRedisUnavailable(t *testing.T) {
	addr := testnet.RefusedAddr(t)

	start := time.Now()
	s, err := Open(t.Context(), "redis://"+addr+"/0")
	require.NoError(t, err, "a Redis that is down at start is not fatal")
	r := s.(*Store)
	t.Cleanup(func() { _ = r.Close() })
	ctx := t.Context()
	ops := map[string]func() error{
		"bind": func() error { return r.Bind(ctx, tasks.Binding{TaskID: "t", Subject: "s"}) },
		"bind pending": func() error {
			return r.BindPending(ctx, tasks.Binding{TaskID: "t", Subject: "s", Pending: true}, time.Minute, 1)
		},
		"lookup": func() error { _, _, err := r.Lookup(ctx, "t"); return err },
		"owned":  func() error { _, err := r.Owned(ctx, tasks.Owner{Subject: "s"}); return err },
		"delete": func() error { return r.Delete(ctx, "t") },
		"record": func() error { return r.RecordCall(ctx, "c", time.Now()) },
		"claim context": func() error {
			_, err := r.ClaimContext(ctx, tasks.Context{ContextID: "c", Subject: "s"})
			return err
		},
		"lookup context": func() error { _, _, err := r.LookupContext(ctx, "c"); return err },
		"usage":          func() error { _, err := r.Usage(ctx, "c", time.Now()); return err },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := op()
			require.ErrorIs(t, err, tasks.ErrUnavailable)
			require.Contains(t, err.Error(), "task store unavailable: redis")
			require.Less(t, time.Since(start), tasks.DefaultOpTimeout+3*time.Second, "bounded, not hanging")
		})
	}
	require.Less(t, time.Since(start), 10*time.Second)

	// A blackholed peer (accepts, never answers) is bounded by the timeouts.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = hang.Close() })
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	hs, err := Dial(t.Context(), "redis://"+hang.Addr().String()+"/0", tasks.WithOpTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = hs.Close() })
	start = time.Now()
	_, _, err = hs.Lookup(ctx, "t")
	require.ErrorIs(t, err, tasks.ErrUnavailable)
	require.Less(t, time.Since(start), 5*time.Second, "bounded by the op timeout, not hanging")
}

// TestRedisRestart: a binding acknowledged before a crash (SIGKILL) is there
// after the restart, and the same client recovers without being reopened.
func TestRedisRestart(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	r := openTestRedis(t, srv)
	b := tasks.Binding{TaskID: "t1", Subject: "alice", Tenant: "acme", Capability: "c", Handler: "h", CreatedAt: time.Unix(100, 0)}
	require.NoError(t, r.Bind(ctx, b))
	require.NoError(t, r.RecordCall(ctx, "c", time.Now()))

	srv.Kill()
	_, _, err := r.Lookup(ctx, "t1")
	require.ErrorIs(t, err, tasks.ErrUnavailable)
	srv.Restart()

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, ok, err := r.Lookup(ctx, "t1")
		if assert.NoError(c, err) && assert.True(c, ok) {
			assert.Equal(c, "alice", got.Subject)
		}
	}, 5*time.Second, 50*time.Millisecond)
	u, err := r.Usage(ctx, "c", time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(1), u.Total)
	// Scripts are reloaded after the restart flushed Redis's script cache.
	require.NoError(t, r.Bind(ctx, b))
	require.ErrorIs(t, r.Bind(ctx, tasks.Binding{TaskID: "t1", Subject: "mallory"}), tasks.ErrConflict)
}

func TestParseStoreURL(t *testing.T) {
	u, err := parseStoreURL("rediss://u:p@cache.internal:6380/3?key_prefix=fin%3A&binding_ttl=48h&read_timeout=2s")
	require.NoError(t, err)
	o := u.single
	require.Equal(t, "cache.internal:6380", o.Addr)
	require.Equal(t, 3, o.DB)
	require.Equal(t, "p", o.Password)
	require.NotNil(t, o.TLSConfig)
	require.Equal(t, DefaultTimeout, o.DialTimeout)
	require.Equal(t, 2*time.Second, o.ReadTimeout, "the URL's timeout wins")
	require.Equal(t, DefaultTimeout, o.WriteTimeout)
	require.Equal(t, DefaultRetries, o.MaxRetries)
	r := New(u.client(), u.own...)
	t.Cleanup(func() { _ = r.Close() })
	require.Equal(t, "fin:", r.opts.KeyPrefix)
	require.Equal(t, 48*time.Hour, r.opts.BindingTTL)
	require.Zero(t, r.opts.MinReplicas, "a single Redis waits for no replica")
	require.False(t, r.keys.tagged)
	require.Equal(t, tasks.DefaultContextCacheAge, r.contexts.age)
	u, err = parseStoreURL("redis://h:6379/0?context_cache=0")
	require.NoError(t, err)
	require.Zero(t, New(u.client(), u.own...).contexts.age, "context_cache=0 turns the cache off")

	r = New(u.client(), append(u.own, tasks.WithKeyPrefix("x:"))...)
	t.Cleanup(func() { _ = r.Close() })
	require.Equal(t, "x:", r.opts.KeyPrefix, "options given in code win over the URL")

	u, err = parseStoreURL("redis-sentinel://app:pw@s1:26379,s2:26380,[::1]:26381/main?db=2&dial_timeout=1s")
	require.NoError(t, err)
	f := u.failover
	require.Equal(t, []string{"s1:26379", "s2:26380", "[::1]:26381"}, f.SentinelAddrs)
	require.Equal(t, "main", f.MasterName)
	require.Equal(t, 2, f.DB)
	require.Equal(t, "app", f.Username)
	require.Equal(t, "pw", f.Password)
	require.Empty(t, f.SentinelPassword, "Sentinels are contacted without the servers' credentials")
	require.Empty(t, f.SentinelUsername)
	require.Nil(t, f.TLSConfig)
	require.Equal(t, time.Second, f.DialTimeout)
	require.Equal(t, DefaultTimeout, f.ReadTimeout)
	r = New(u.client(), u.own...)
	t.Cleanup(func() { _ = r.Close() })
	require.Equal(t, 1, r.opts.MinReplicas, "Sentinel: writes wait for one replica by default")
	require.Equal(t, tasks.DefaultReplicaTimeout, r.opts.ReplicaTimeout)
	require.False(t, r.keys.tagged, "Sentinel keeps the single-Redis key layout")

	u, err = parseStoreURL("redis-sentinel://app:pw@s1:26379/main?sentinel_username=watcher")
	require.NoError(t, err)
	require.Equal(t, "watcher", u.failover.SentinelUsername, "the Sentinels' ACL user, a parameter of capgate's")
	require.Equal(t, "app", u.failover.Username)
	require.Empty(t, u.failover.SentinelPassword)

	u, err = parseStoreURL("rediss-cluster://:pw@c1:7000,c2:7001?min_replicas=2&replica_timeout=100ms")
	require.NoError(t, err)
	c := u.cluster
	require.Equal(t, []string{"c1:7000", "c2:7001"}, c.Addrs)
	require.Equal(t, "pw", c.Password)
	require.Equal(t, "c1", c.TLSConfig.ServerName)
	r = New(u.client(), u.own...)
	t.Cleanup(func() { _ = r.Close() })
	require.Equal(t, 2, r.opts.MinReplicas)
	require.Equal(t, 100*time.Millisecond, r.opts.ReplicaTimeout)
	require.True(t, r.keys.tagged, "Cluster keys carry hash tags")

	u, err = parseStoreURL("redis-cluster://c1:7000")
	require.NoError(t, err)
	u.setPassword("from-file")
	require.Equal(t, "from-file", u.cluster.Password)
}

// TestCheck: every malformed store URL is refused before Redis is
// contacted, with a message that names the problem and never the password.
func TestCheck(t *testing.T) {
	for raw, want := range map[string]string{
		"mysql://db:3306":                                     "neither",
		"redis-sentinel://:secret@s1:26379":                   "master's name",
		"redis-sentinel://:secret@s1:26379/a/b":               "master's name",
		"redis-sentinel://:secret@s1/main":                    `"s1" is not host:port`,
		"redis-sentinel://:secret@s1:26379,/main":             `"" is not host:port`,
		"redis-sentinel://:secret@s1:99999/main":              "is not host:port",
		"redis-sentinel://:secret@s1:26379/main?db=x":         "database number",
		"redis-cluster://:secret@c1:7000/3":                   "no database numbers",
		"redis-cluster://:secret@c1:7000?db=1":                "no database numbers",
		"redis-cluster://:secret@c1:7000?key_prefix=%7Bx%7D":  "must not contain { or }",
		"redis-cluster://:secret@c1:7000?read_only=true":      "master only",
		"redis-sentinel://:secret@s1:1/m?replica_only=true":   "master only",
		"redis-cluster://:secret@c1:7000?nope=1":              "nope",
		"redis-cluster://:secret@c1:7000?min_replicas=-1":     "min_replicas",
		"redis-cluster://:secret@c1:7000?replica_timeout=1s":  "shorter than read_timeout",
		"redis://:secret@h1:1,h2:2/0":                         "one host:port",
		"redis://:secret@h:6379/0?binding_ttl=soon":           "binding_ttl",
		"redis://:secret@h:6379/0?context_cache=2h":           "context_cache",
		"redis://:secret@h:6379/0?context_cache=-1s":          "context_cache",
		"redis://:secret@h:6379/0?sentinel_username=w":        "for redis-sentinel:// stores",
		"redis-cluster://:secret@c1:7000?sentinel_username=w": "for redis-sentinel:// stores",
	} {
		err := Check(raw)
		require.Error(t, err, raw)
		require.Contains(t, err.Error(), want, raw)
		require.NotContains(t, err.Error(), "secret", "the password is not echoed")
	}
	for _, ok := range []string{"redis://h", "redis://h:6379/2", "rediss-sentinel://u:p@s1:1,s2:2/m", "redis-cluster://c:1?key_prefix=a:"} {
		require.NoError(t, Check(ok), ok)
		require.True(t, IsURL(ok))
	}
}

// TestRedisPassword: against a redis-server with requirepass, the store
// works with the password given as an option (store_password_file or
// _env) and fails closed without it or with a wrong one, never quoting it.
func TestRedisPassword(t *testing.T) {
	const pw = "s3rver-Secret"
	srv := redisproc.StartAuth(t, pw)
	b := tasks.Binding{TaskID: "t-1", Subject: "alice", Capability: "c", Handler: "h"}

	r := openTestRedis(t, srv, tasks.WithPassword(pw))
	require.NoError(t, r.Bind(t.Context(), b))
	got, ok, err := r.Lookup(t.Context(), "t-1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "alice", got.Subject)

	u := "redis://:" + pw + "@" + srv.Addr + "/0"
	r2, err := Dial(t.Context(), u, tasks.WithPassword("wrong-one"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r2.Close() })
	_, _, err = r2.Lookup(t.Context(), "t-1")
	require.ErrorIs(t, err, tasks.ErrUnavailable, "the option wins over the URL's password")

	for name, opts := range map[string][]tasks.Option{"none": nil, "wrong": {tasks.WithPassword("wrong-one")}} {
		r := openTestRedis(t, srv, opts...)
		_, _, err := r.Lookup(t.Context(), "t-1")
		require.ErrorIs(t, err, tasks.ErrUnavailable, name)
		require.NotContains(t, err.Error(), pw, name)
		require.ErrorIs(t, r.Bind(t.Context(), tasks.Binding{TaskID: "t-2", Subject: "alice", Capability: "c", Handler: "h"}), tasks.ErrUnavailable, name)
	}

	_, err = Dial(t.Context(), srv.URL(0), tasks.WithSentinelPassword("x"))
	require.ErrorContains(t, err, "not redis-sentinel://", "a Sentinel password needs Sentinels")
}

// commandCounter counts the commands a client sends, by name.
type commandCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *commandCounter) count(cmd redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[cmd.Name()]++
}

func (c *commandCounter) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// TestRedisOwnedPageBounded: one page of an owner of 10,000 tasks reads
// about a page of bindings (HMGET) — before the index, ListTasks read all
// 10,000 — and index entries whose bindings are gone cost at most
// indexScan(limit) per call and are dropped as found.
func TestRedisOwnedPageBounded(t *testing.T) {
	const owned = 10_000
	srv := redisproc.Start(t)
	ctx := t.Context()
	r := openTestRedis(t, srv, tasks.WithKeyPrefix("big:"))
	raw := rawClient(t, srv)
	alice := tasks.Owner{Issuer: "i", Subject: "alice", Tenant: "acme"}
	base := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	storetest.Concurrently(16, func(w int) {
		for i := w; i < owned; i += 16 {
			assert.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: fmt.Sprintf("t-%05d", i), ContextID: fmt.Sprintf("c-%d", i%2), Capability: "c", Handler: "h",
				Issuer: alice.Issuer, Subject: alice.Subject, Tenant: alice.Tenant, CreatedAt: base.Add(time.Duration(i) * time.Second)}))
		}
	})
	cc := &commandCounter{n: map[string]int{}}
	r.rdb.AddHook(cc)

	for _, contextID := range []string{"", "c-1"} {
		cc.reset()
		p, err := r.OwnedPage(ctx, alice, nil, contextID, 50)
		require.NoError(t, err)
		require.Len(t, p.Bindings, 50)
		require.True(t, p.More)
		require.Equal(t, "t-09999", p.Bindings[0].TaskID)
		n := cc.reset()
		require.LessOrEqual(t, n["hmget"], 51, "%q: bindings read for a page of 50: %v", contextID, n)
		require.Zero(t, n["smembers"]+n["sscan"], "the owner set is not read: %v", n)
		if contextID == "" {
			require.Equal(t, owned, p.Total)
		} else {
			require.Equal(t, owned/2, p.Total)
		}
	}

	// The newest 1,000 bindings gone (expired, say): one call reads at
	// most indexScan(50) entries, and the walk still finds the rest.
	for i := owned - 1000; i < owned; i++ {
		require.NoError(t, raw.Del(ctx, fmt.Sprintf("big:task:t-%05d", i)).Err())
	}
	cc.reset()
	var after *tasks.Position
	var got []tasks.Binding
	for calls := 0; len(got) < 50; calls++ {
		require.Less(t, calls, 20)
		p, err := r.OwnedPage(ctx, alice, after, "", 50)
		require.NoError(t, err)
		require.True(t, p.More)
		n := cc.reset()
		require.LessOrEqual(t, n["hmget"], indexScan(50), "entries read by one call: %v", n)
		got = append(got, p.Bindings...)
		next := p.Next
		after = &next
	}
	require.Equal(t, "t-08999", got[0].TaskID)
	card, err := raw.ZCard(ctx, r.keys.index(alice)).Result()
	require.NoError(t, err)
	require.Equal(t, int64(owned-1000), card, "the entries of the bindings gone are dropped")
}

// TestRedisIndexUpgrade: owner sets written before the index existed (an
// upgraded deployment) get their index built on the first read — also
// when a bind for the owner came first — and with it their contexts'.
func TestRedisIndexUpgrade(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	r := openTestRedis(t, srv, tasks.WithKeyPrefix("up:"))
	raw := rawClient(t, srv)
	alice := tasks.Owner{Issuer: "https://idp-a", Subject: "alice@x", Tenant: "acme"}
	const set = "up:owner:https%3A%2F%2Fidp-a:acme:alice%40x"
	// As the previous release wrote them: a binding hash and the owner set.
	for i := range 600 {
		id := fmt.Sprintf("old-%03d", i)
		require.NoError(t, raw.HSet(ctx, "up:task:"+id, "subject", "alice@x", "tenant", "acme", "issuer", alice.Issuer, "capability", "c",
			"handler", "h", "pending", "0", "contextId", fmt.Sprintf("ctx-%d", i%3), "candidates", "", "created", strconv.Itoa((1000+i)*1e9)).Err())
		require.NoError(t, raw.SAdd(ctx, set, id).Err())
	}
	require.NoError(t, raw.SAdd(ctx, set, "gone").Err()) // a binding expired since
	// A bind before any read: the index then exists, but lists one task.
	require.NoError(t, r.Bind(ctx, tasks.Binding{TaskID: "new", ContextID: "ctx-1", Capability: "c", Handler: "h",
		Issuer: alice.Issuer, Subject: alice.Subject, Tenant: alice.Tenant, CreatedAt: time.Unix(5000, 0)}))
	mark, err := raw.Exists(ctx, r.keys.unindexed(alice)).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), mark, "the bind marks the owner unindexed")

	// One chunk a read: the 602 ids take a few reads, each but the last
	// answered "try again" (fail closed, never a short list).
	defer func(n int) { buildChunks = n }(buildChunks)
	buildChunks = 1
	_, err = r.OwnedPage(ctx, alice, nil, "ctx-1", 3)
	require.ErrorIs(t, err, tasks.ErrUnavailable)
	require.ErrorIs(t, err, errBuilding)
	var p tasks.Page
	for reads := 1; ; reads++ {
		require.Less(t, reads, 20, "the build progresses from read to read")
		if p, err = r.OwnedPage(ctx, alice, nil, "ctx-1", 3); !errors.Is(err, errBuilding) {
			break
		}
	}
	require.NoError(t, err)
	require.Equal(t, []string{"new", "old-598", "old-595"}, storetest.TaskIDs(p.Bindings))
	owned, err := r.Owned(ctx, alice)
	require.NoError(t, err)
	require.Len(t, owned, 601)
	require.Equal(t, "old-599", owned[1].TaskID)
	mark, err = raw.Exists(ctx, r.keys.unindexed(alice)).Result()
	require.NoError(t, err)
	require.Zero(t, mark)
	isMember, err := raw.SIsMember(ctx, set, "gone").Result()
	require.NoError(t, err)
	require.False(t, isMember, "the id of a binding gone leaves the set")

	// Built once: the next read does not scan the set.
	cc := &commandCounter{n: map[string]int{}}
	r.rdb.AddHook(cc)
	_, err = r.OwnedPage(ctx, alice, nil, "", 10)
	require.NoError(t, err)
	require.Zero(t, cc.reset()["sscan"])
}

// TestRedisContextCache: the holder of a context, once read or claimed, is
// answered without a round trip — never past its record's expiry, never
// for a context nobody holds, renewing the holder's record at least once per
// cache age, and with min_replicas only from the holder's own confirmed
// claims.
func TestRedisContextCache(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	const age = time.Minute
	clk := storetest.NewClock(time.Now())
	r := openTestRedis(t, srv, tasks.WithClock(clk.Now), tasks.WithContextCache(age))
	cc := &commandCounter{n: map[string]int{}}
	r.rdb.AddHook(cc)
	total := func() int {
		n := 0
		for _, v := range cc.reset() {
			n += v
		}
		return n
	}
	alice := tasks.Context{ContextID: "ctx-1", Issuer: "i", Subject: "alice", Tenant: "acme"}
	mallory := tasks.Context{ContextID: "ctx-1", Issuer: "i", Subject: "mallory", Tenant: "acme"}

	// An unknown context is never kept: the lookup and the claim each go to Redis.
	_, ok, err := r.LookupContext(ctx, "ctx-1")
	require.NoError(t, err)
	require.False(t, ok)
	require.Positive(t, total())
	held, err := r.ClaimContext(ctx, alice)
	require.NoError(t, err)
	require.True(t, held.OwnedBy(alice.Owner()))
	require.Positive(t, total())

	// Held: the holder's claims, others' claims and lookups need no round trip.
	for range 3 {
		held, err = r.ClaimContext(ctx, alice)
		require.NoError(t, err)
		require.True(t, held.OwnedBy(alice.Owner()))
		held, err = r.ClaimContext(ctx, mallory)
		require.NoError(t, err)
		require.False(t, held.OwnedBy(mallory.Owner()), "another owner is still refused")
		got, ok, err := r.LookupContext(ctx, "ctx-1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, held, got)
	}
	require.Zero(t, total(), "answered from memory")

	// After the cache age the holder's claim writes again, renewing the record.
	clk.Advance(age)
	_, err = r.ClaimContext(ctx, alice)
	require.NoError(t, err)
	require.Positive(t, total(), "renewed at least once per cache age")

	// Never past the record's expiry: with a binding_ttl shorter than the
	// cache age, an entry ends with its record.
	short := openTestRedis(t, srv, tasks.WithClock(clk.Now), tasks.WithContextCache(age), tasks.WithBindingTTL(2*time.Second))
	sc := &commandCounter{n: map[string]int{}}
	short.rdb.AddHook(sc)
	_, err = short.ClaimContext(ctx, tasks.Context{ContextID: "ctx-2", Issuer: "i", Subject: "alice", Tenant: "acme"})
	require.NoError(t, err)
	sc.reset()
	clk.Advance(2*time.Second - time.Millisecond)
	_, ok, err = short.LookupContext(ctx, "ctx-2")
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, sc.reset(), "within the record's life: from memory")
	clk.Advance(time.Millisecond)
	_, _, err = short.LookupContext(ctx, "ctx-2")
	require.NoError(t, err)
	require.NotEmpty(t, sc.reset(), "at the record's expiry: asked again")

	// With min_replicas, a record only read may not be on the replicas yet: not kept.
	writer := openTestRedis(t, srv, tasks.WithKeyPrefix("shared-ctx:"))
	_, err = writer.ClaimContext(ctx, tasks.Context{ContextID: "ctx-3", Issuer: "i", Subject: "bob", Tenant: "acme"})
	require.NoError(t, err)
	confirmed := openTestRedis(t, srv, tasks.WithKeyPrefix("shared-ctx:"), tasks.WithReplicas(1, 50*time.Millisecond), tasks.WithContextCache(age))
	rc := &commandCounter{n: map[string]int{}}
	confirmed.rdb.AddHook(rc)
	for range 2 {
		got, ok, err := confirmed.LookupContext(ctx, "ctx-3")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "bob", got.Subject)
		require.NotEmpty(t, rc.reset(), "each lookup reads Redis")
	}
}

// TestContextCacheBounded: a full cache starts over rather than grow.
func TestContextCacheBounded(t *testing.T) {
	c := newContextCache(time.Minute)
	now := time.Now()
	for i := range maxCachedContexts + 10 {
		c.put(tasks.Context{ContextID: strconv.Itoa(i), Subject: "s"}, now, time.Hour)
	}
	require.LessOrEqual(t, len(c.m), maxCachedContexts)
	_, ok := c.get(strconv.Itoa(maxCachedContexts+9), now)
	require.True(t, ok, "the newest entry is kept")
	_, ok = newContextCache(0).get("x", now)
	require.False(t, ok, "age 0: off")
}
