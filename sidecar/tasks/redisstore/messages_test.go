package redisstore

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/test/replicas/redisproc"
)

// TestCountingMatchesPlain: SettleCounting and ReleaseCounting leave the store as Settle or
// Release followed by RecordCall do (the same records, the same usage), also when Redis lost
// the scripts (NOSCRIPT: a restart flushed its cache), and fail closed on both counts when
// Redis does not answer. On one server they run as one script; in a Cluster, where their keys
// lie in different slots, pipelined (min_replicas 0) or one after the other (min_replicas 1).
func TestCountingMatchesPlain(t *testing.T) {
	srv := redisproc.Start(t)
	t.Run("server", func(t *testing.T) {
		countingMatchesPlain(t, openTestRedis(t, srv), openTestRedis(t, srv),
			func() error { return rawClient(t, srv).ScriptFlush(t.Context()).Err() })
		srv.Kill()
		r := openTestRedis(t, srv)
		owner := tasks.Owner{Subject: "alice"}
		call := tasks.Call{Capability: "lookup-invoice", At: time.Now()}
		s := tasks.Sent{MessageID: "m", Owner: owner, Started: time.Now()}
		for _, errs := range [][2]error{
			pair(r.SettleCounting(t.Context(), s, time.Hour, call)),
			pair(r.ReleaseCounting(t.Context(), s, call)),
		} {
			require.ErrorIs(t, errs[0], tasks.ErrUnavailable)
			require.ErrorIs(t, errs[1], tasks.ErrUnavailable)
		}
	})
	nodes := redisproc.StartCluster(t, 3, 1)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	raw := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = raw.Close() })
	flush := func() error {
		return raw.ForEachMaster(t.Context(), func(ctx context.Context, m *redis.Client) error { return m.ScriptFlush(ctx).Err() })
	}
	for _, minReplicas := range []string{"0", "1"} {
		t.Run("cluster, min_replicas "+minReplicas, func(t *testing.T) {
			open := func() *Store {
				r, err := Dial(t.Context(), withPatientReplicas("redis-cluster://"+strings.Join(addrs[:3], ",")+"?min_replicas="+minReplicas),
					tasks.WithKeyPrefix(nextPrefix()))
				require.NoError(t, err)
				t.Cleanup(func() { _ = r.Close() })
				require.True(t, r.keys.tagged)
				return r
			}
			countingMatchesPlain(t, open(), open(), flush)
		})
	}
}

// countingMatchesPlain checks the counting store against the plain one (both empty, with key
// prefixes of their own); flushScripts empties Redis's script cache.
func countingMatchesPlain(t *testing.T, plain, counting *Store, flushScripts func() error) {
	ctx, now := t.Context(), time.Now()
	owner := tasks.Owner{Issuer: "https://issuer.example/", Subject: "alice", Tenant: "acme"}
	round := ""
	sent := func(id string) tasks.Sent {
		id += round
		return tasks.Sent{MessageID: id, Owner: owner, Started: now, Deadline: now.Add(time.Minute), Digest: "d-" + id}
	}
	const window = time.Hour
	call := tasks.Call{Capability: "lookup-invoice", At: now}
	for i, flush := range []bool{false, true} {
		if flush {
			round = "-again"
		}
		for _, r := range []*Store{plain, counting} {
			for _, id := range []string{"settled", "lost", "released"} {
				_, fresh, err := r.Reserve(ctx, sent(id), window, 100)
				require.NoError(t, err)
				require.True(t, fresh)
			}
		}
		settled := sent("settled")
		settled.TaskID, settled.ContextID, settled.Capability, settled.Handler = "t-1", "c-1", "lookup-invoice", "billing"
		lost := sent("lost")
		lost.Lost = true
		require.NoError(t, plain.Settle(ctx, settled, window))
		require.NoError(t, plain.RecordCall(ctx, call.Capability, call.At))
		require.NoError(t, plain.Settle(ctx, lost, window))
		require.NoError(t, plain.RecordCall(ctx, call.Capability, call.At))
		require.NoError(t, plain.Release(ctx, sent("released")))
		require.NoError(t, plain.RecordCall(ctx, call.Capability, call.At))
		if flush {
			require.NoError(t, flushScripts())
		}
		for _, errs := range [][2]error{
			pair(counting.SettleCounting(ctx, settled, window, call)),
			pair(counting.SettleCounting(ctx, lost, window, call)),
			pair(counting.ReleaseCounting(ctx, sent("released"), call)),
		} {
			require.NoError(t, errs[0])
			require.NoError(t, errs[1])
		}
		for _, id := range []string{"settled", "lost", "released"} {
			want, wantFresh, err := plain.Reserve(ctx, sent(id), window, 100)
			require.NoError(t, err)
			got, gotFresh, err := counting.Reserve(ctx, sent(id), window, 100)
			require.NoError(t, err)
			require.Equal(t, wantFresh, gotFresh, id)
			require.Equal(t, want, got, id)
			require.Equal(t, id == "released", gotFresh, id)
		}
		for _, r := range []*Store{plain, counting} {
			require.NoError(t, r.Release(ctx, sent("released")))
		}
		want, err := plain.Usage(ctx, call.Capability, now)
		require.NoError(t, err)
		got, err := counting.Usage(ctx, call.Capability, now)
		require.NoError(t, err)
		require.Equal(t, int64(3*(i+1)), got.Total)
		want.ObservedSince, got.ObservedSince = time.Time{}, time.Time{}
		require.Equal(t, want, got)
	}

}

func pair(a, b error) [2]error { return [2]error{a, b} }

// benchStore is a store on a redis-server of its own for a benchmark, and the owner its
// messages are sent by.
func benchStore(b *testing.B) (*Store, tasks.Owner) {
	srv := redisproc.Start(b)
	r, err := Dial(b.Context(), srv.URL(0), tasks.WithKeyPrefix(nextPrefix()))
	require.NoError(b, err)
	b.Cleanup(func() { _ = r.Close() })
	return r, tasks.Owner{Issuer: "https://issuer.example/", Subject: "alice", Tenant: "acme"}
}

// BenchmarkMessageRoundTrips is the store's part of a routed message that a handler answers
// with a message: reserve its id, then settle it and count the call, pipelined
// (SettleCounting) or one after the other (plain).
func BenchmarkMessageRoundTrips(b *testing.B) {
	r, owner := benchStore(b)
	for _, counting := range []bool{true, false} {
		name := "plain"
		if counting {
			name = "counting"
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(b.Context()) // a request's context, cancellable
			defer cancel()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				now := time.Now()
				s := tasks.Sent{MessageID: "m-" + strconv.Itoa(i), Owner: owner, Started: now, Deadline: now.Add(time.Minute), Digest: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
				s, _, err := r.Reserve(ctx, s, time.Hour, 1000)
				if err != nil {
					b.Fatal(err)
				}
				s.ContextID = "ctx-1"
				if counting {
					err, _ = r.SettleCounting(ctx, s, time.Hour, tasks.Call{Capability: "lookup-invoice", At: now})
				} else {
					err = r.Settle(ctx, s, time.Hour)
					if err == nil {
						err = r.RecordCall(ctx, "lookup-invoice", now)
					}
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestKeyCache: the cached message, usage and owner keys are the ones keys.sentKeys,
// keys.usageKeys and keys.ownerSets build, for owners, contexts and capabilities with the
// characters that matter (braces, colons, escapes, empty parts), in both layouts, also past
// the cache's bound (when it starts over).
func TestKeyCache(t *testing.T) {
	parts := []string{"", "a", "{x}", "a:b", "%7B", "https://issuer.example/", "ü"}
	for _, k := range []keys{{prefix: "capgate:"}, {prefix: "p:", tagged: true}} {
		sent := newKeyCache(k.sentKeys)
		usage := newKeyCache(func(c capabilityDay) []string { return k.usageKeys(c.capability, c.day) })
		owned := newKeyCache(func(c ownerContext) []string { return k.ownerSets(c.owner, c.contextID) })
		for round := range 2 {
			for _, iss := range parts {
				for _, sub := range parts {
					for _, ten := range parts {
						o := tasks.Owner{Issuer: iss, Subject: sub, Tenant: ten, Legacy: round == 1}
						require.Equal(t, newScriptKeys(k.sentKeys(o)), sent.of(o), "%+v", o)
						require.Equal(t, newScriptKeys(k.sentKeys(o)), sent.of(o), "%+v, again", o)
						for _, c := range []string{"", ten, "ctx-1"} {
							require.Equal(t, newScriptKeys(k.ownerSets(o, c)), owned.of(ownerContext{o, c}), "%+v in %q", o, c)
						}
					}
				}
				for d := int64(20000); d < 20003; d++ {
					require.Equal(t, newScriptKeys(k.usageKeys(iss, d)), usage.of(capabilityDay{iss, d}))
				}
			}
		}
		for i := range maxCachedKeys + 10 {
			o := tasks.Owner{Subject: strconv.Itoa(i)}
			require.Equal(t, newScriptKeys(k.sentKeys(o)), sent.of(o))
		}
		require.LessOrEqual(t, len(sent.m), maxCachedKeys)
		o := tasks.Owner{Subject: "0"}
		require.Equal(t, newScriptKeys(k.sentKeys(o)), sent.of(o), "after the cache started over")
	}
}

// TestScriptKeys: a script's boxed keys are its names.
func TestScriptKeys(t *testing.T) {
	k := newScriptKeys([]string{"a", "{b}:c"})
	require.Equal(t, []any{"a", "{b}:c"}, k.boxed)
}

// TestRunFastMatchesRun: runFast answers as Script.Run does on the concatenated keys and
// arguments, also when Redis lost the script (NOSCRIPT), and an error as an error.
func TestRunFastMatchesRun(t *testing.T) {
	srv := redisproc.Start(t)
	r := openTestRedis(t, srv)
	ctx := t.Context()
	echo := newFastScript(`
if ARGV[1] == 'fail' then return redis.error_reply('ERR asked to') end
return {#KEYS, KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[4], redis.call('INCR', KEYS[1])}`)
	keys := []scriptKeys{newScriptKeys([]string{"k1", "k2"}), newScriptKeys([]string{"k3"})}
	for _, flush := range []bool{false, true} {
		if flush {
			require.NoError(t, rawClient(t, srv).ScriptFlush(ctx).Err())
		}
		got, err := r.runFast(ctx, echo, keys, []any{"a", int64(1_733_370_000_123)}, []any{"c", 4})
		require.NoError(t, err)
		want, err := echo.Run(ctx, r.rdb, []string{"k1", "k2", "k3"}, "a", int64(1_733_370_000_123), "c", 4).Result()
		require.NoError(t, err)
		require.Equal(t, []any{int64(3), "k1", "k3", "a", "1733370000123", "4"}, got.([]any)[:6])
		require.Equal(t, want.([]any)[:6], got.([]any)[:6])
		require.Equal(t, want.([]any)[6].(int64)-1, got.([]any)[6], "both ran, in order")
	}
	_, err := r.runFast(ctx, echo, keys[:1], []any{"fail"})
	require.ErrorContains(t, err, "asked to")
}

// previousReserve is the reservation script of the release before the message scripts
// answered integers (it answered {'new', record}); the other scripts it ran (settle, release,
// record) are this release's, unchanged.
var previousReserve = redis.NewScript(`
local cutoff = tonumber(ARGV[3]) - tonumber(ARGV[4])
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  local at = redis.call('ZSCORE', KEYS[2], ARGV[1])
  if at and tonumber(at) > cutoff then return {'held', old} end
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', cutoff, 'LIMIT', 0, 1000)
for _, id in ipairs(gone) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
local n = redis.call('ZCARD', KEYS[2])
local max = tonumber(ARGV[5])
if n >= max then
  local out = redis.call('ZPOPMIN', KEYS[2], n - max + 1)
  for i = 1, #out, 2 do redis.call('HDEL', KEYS[1], out[i]) end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {'new', ARGV[2]}
`)

// TestMixedFleet: a replica of the previous release and one of this release share one store
// during a rolling upgrade: a message one reserved is a retry to the other, and a record this
// release settled (with the call's count, in one script) is the record the previous release
// reads, as it would have written it (encoding/json).
func TestMixedFleet(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	r := openTestRedis(t, srv)
	now := time.Now()
	owner := tasks.Owner{Issuer: "https://issuer.example/", Subject: "alice", Tenant: "acme"}
	const window = time.Hour
	// previous reserves as the previous release's Reserve did; it answers the held record, if any.
	previous := func(s tasks.Sent) (tasks.Sent, bool) {
		rec, err := json.Marshal(s)
		require.NoError(t, err)
		res, err := previousReserve.Run(ctx, r.rdb, r.keys.sentKeys(s.Owner), url.QueryEscape(s.MessageID), rec,
			now.UnixMilli(), window.Milliseconds(), 100, s.Started.UnixMilli()).StringSlice()
		require.NoError(t, err)
		require.Len(t, res, 2)
		if res[0] == "new" {
			return s, true
		}
		var held tasks.Sent
		require.NoError(t, json.Unmarshal([]byte(res[1]), &held))
		held.MessageID, held.Owner = s.MessageID, s.Owner
		return held, false
	}
	sent := func(id string) tasks.Sent {
		return tasks.Sent{MessageID: id, Owner: owner, Started: now, Deadline: now.Add(time.Minute), Digest: "d-" + id}
	}

	// Reserved by the previous release, retried through this one.
	s, fresh := previous(sent("old-first"))
	require.True(t, fresh)
	held, fresh, err := r.Reserve(ctx, sent("old-first"), window, 100)
	require.NoError(t, err)
	require.False(t, fresh)
	require.Equal(t, tasks.InProgress, held.State(now))
	require.Equal(t, s.Digest, held.Digest)

	// Reserved and settled by this release, retried through the previous one.
	s, fresh, err = r.Reserve(ctx, sent("new-first"), window, 100)
	require.NoError(t, err)
	require.True(t, fresh)
	s.TaskID, s.ContextID, s.Capability, s.Handler = "t-1", "c-1", "lookup-invoice", "billing"
	errs := pair(r.SettleCounting(ctx, s, window, tasks.Call{Capability: "lookup-invoice", At: now}))
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	held, fresh = previous(sent("new-first"))
	require.False(t, fresh)
	s.Done = true
	require.Equal(t, s.TaskID, held.TaskID)
	require.Equal(t, tasks.Answered, held.State(now))
	raw, err := rawClient(t, srv).HGet(ctx, r.keys.sent(owner), "new-first").Result()
	require.NoError(t, err)
	want, err := json.Marshal(s)
	require.NoError(t, err)
	require.Equal(t, string(want), raw, "the record is what encoding/json writes")
}

// BenchmarkBindTask is the store's part of a routed message a handler answers with a new task
// in the caller's context: the bind's two scripts (the owner's sets, then the binding).
func BenchmarkBindTask(b *testing.B) {
	srv := redisproc.Start(b)
	r, err := Dial(b.Context(), srv.URL(0), tasks.WithKeyPrefix(nextPrefix()))
	require.NoError(b, err)
	b.Cleanup(func() { _ = r.Close() })
	ctx, cancel := context.WithCancel(b.Context()) // a request's context, cancellable
	defer cancel()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		err := r.Bind(ctx, tasks.Binding{TaskID: "t-" + strconv.Itoa(i), ContextID: "ctx-1", Capability: "lookup-invoice", Handler: "billing",
			Issuer: "https://issuer.example/", Subject: "alice", Tenant: "acme", CreatedAt: time.Now()})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// TestSettleBindMatchesPlain: SettleBind leaves the store as Settle (or SettleCounting) then
// Bind do — the same record, usage, binding, list and answer — for a new task, a re-bind that
// moves the task in its owner's list, a task another owner holds (a conflict, the record
// settled all the same) and an anonymous owner's; on one server (one script, also after
// SCRIPT FLUSH) and in a Cluster (the plain calls).
func TestSettleBindMatchesPlain(t *testing.T) {
	srv := redisproc.Start(t)
	t.Run("server", func(t *testing.T) {
		settleBindMatchesPlain(t, openTestRedis(t, srv), openTestRedis(t, srv),
			func() error { return rawClient(t, srv).ScriptFlush(t.Context()).Err() })
	})
	nodes := redisproc.StartCluster(t, 3, 1)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	open := func() *Store {
		r, err := Dial(t.Context(), withPatientReplicas("redis-cluster://"+strings.Join(addrs[:3], ",")), tasks.WithKeyPrefix(nextPrefix()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	t.Run("cluster", func(t *testing.T) { settleBindMatchesPlain(t, open(), open(), func() error { return nil }) })
}

func settleBindMatchesPlain(t *testing.T, plain, combined *Store, flushScripts func() error) {
	ctx, now := t.Context(), time.Now()
	alice := tasks.Owner{Issuer: "https://issuer.example/", Subject: "alice", Tenant: "acme"}
	bob := tasks.Owner{Issuer: "https://issuer.example/", Subject: "bob", Tenant: "acme"}
	const window = time.Hour
	type step struct {
		id     string
		sender tasks.Owner
		b      tasks.Binding
		count  bool
	}
	binding := func(id string, o tasks.Owner, created time.Time) tasks.Binding {
		return tasks.Binding{TaskID: id, ContextID: "ctx-" + o.Subject, Capability: "lookup-invoice", Handler: "billing",
			Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant, CreatedAt: created}
	}
	steps := []step{
		{"m-1", alice, binding("t-1", alice, now), true},
		{"m-2", alice, binding("t-2", alice, now.Add(time.Second)), false},
		{"m-3", alice, binding("t-1", alice, now.Add(2*time.Second)), true}, // a re-bind, moved in the list
		{"m-4", bob, binding("t-1", bob, now), true},                        // alice holds t-1: a conflict
	}
	for i, st := range steps {
		if i == 2 {
			require.NoError(t, flushScripts())
		}
		var errs [2][3]error
		for j, r := range []*Store{plain, combined} {
			s, fresh, err := r.Reserve(ctx, tasks.Sent{MessageID: st.id, Owner: st.sender, Started: now, Deadline: now.Add(time.Minute), Digest: "d"}, window, 100)
			require.NoError(t, err)
			require.True(t, fresh)
			s.TaskID, s.ContextID, s.Capability, s.Handler = st.b.TaskID, st.b.ContextID, st.b.Capability, st.b.Handler
			c := tasks.Call{}
			if st.count {
				c = tasks.Call{Capability: "lookup-invoice", At: now}
			}
			if j == 0 {
				if st.count {
					errs[j][0], errs[j][1] = r.SettleCounting(ctx, s, window, c)
				} else {
					errs[j][0] = r.Settle(ctx, s, window)
				}
				errs[j][2] = r.Bind(ctx, st.b)
			} else {
				errs[j][0], errs[j][1], errs[j][2] = r.SettleBind(ctx, s, window, c, st.b)
			}
		}
		require.Equal(t, errs[0], errs[1], "step %d", i)
		if i == 3 {
			require.ErrorIs(t, errs[1][2], tasks.ErrConflict)
		}
		for _, o := range []tasks.Owner{alice, bob} {
			want, err := plain.OwnedPage(ctx, o, nil, "", 10)
			require.NoError(t, err)
			got, err := combined.OwnedPage(ctx, o, nil, "", 10)
			require.NoError(t, err)
			require.Equal(t, want, got, "step %d, %s's tasks", i, o.Subject)
		}
		for _, id := range []string{"t-1", "t-2"} {
			want, wok, err := plain.Lookup(ctx, id)
			require.NoError(t, err)
			got, gok, err := combined.Lookup(ctx, id)
			require.NoError(t, err)
			require.Equal(t, wok, gok)
			require.Equal(t, want, got, "step %d, %s", i, id)
		}
		want, _, err := plain.Reserve(ctx, tasks.Sent{MessageID: st.id, Owner: st.sender, Started: now, Digest: "d"}, window, 100)
		require.NoError(t, err)
		got, _, err := combined.Reserve(ctx, tasks.Sent{MessageID: st.id, Owner: st.sender, Started: now, Digest: "d"}, window, 100)
		require.NoError(t, err)
		require.Equal(t, want, got, "step %d: the settled record", i)
		require.Equal(t, tasks.Answered, got.State(now))
	}
	wantUsage, err := plain.Usage(ctx, "lookup-invoice", now)
	require.NoError(t, err)
	gotUsage, err := combined.Usage(ctx, "lookup-invoice", now)
	require.NoError(t, err)
	require.Equal(t, int64(3), gotUsage.Total)
	wantUsage.ObservedSince, gotUsage.ObservedSince = time.Time{}, time.Time{}
	require.Equal(t, wantUsage, gotUsage)

	// An anonymous sender's record is not kept; the task is bound all the same.
	errs := [3]error{}
	errs[0], errs[1], errs[2] = combined.SettleBind(ctx, tasks.Sent{MessageID: "m-5"}, window, tasks.Call{}, binding("t-5", alice, now))
	require.ErrorIs(t, errs[0], tasks.ErrNoOwner)
	require.NoError(t, errs[2])
	_, ok, err := combined.Lookup(ctx, "t-5")
	require.NoError(t, err)
	require.True(t, ok)
}

// BenchmarkTaskRoundTrips is the store's part of a routed message that a handler answers with a
// new task in the caller's context: reserve its id, then settle it, count the call and bind the
// task, in one script (SettleBind) or as SettleCounting then Bind (plain).
func BenchmarkTaskRoundTrips(b *testing.B) {
	r, owner := benchStore(b)
	for _, combined := range []bool{true, false} {
		name := "plain"
		if combined {
			name = "combined"
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(b.Context()) // a request's context, cancellable
			defer cancel()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				now := time.Now()
				id := name + "-" + strconv.Itoa(i)
				s, _, err := r.Reserve(ctx, tasks.Sent{MessageID: id, Owner: owner, Started: now, Deadline: now.Add(time.Minute),
					Digest: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, time.Hour, 1000)
				if err != nil {
					b.Fatal(err)
				}
				s.TaskID, s.ContextID, s.Capability, s.Handler = "t-"+id, "ctx-1", "lookup-invoice", "billing"
				bd := tasks.Binding{TaskID: s.TaskID, ContextID: "ctx-1", Capability: "lookup-invoice", Handler: "billing",
					Issuer: owner.Issuer, Subject: owner.Subject, Tenant: owner.Tenant, CreatedAt: now}
				c := tasks.Call{Capability: "lookup-invoice", At: now}
				var berr error
				if combined {
					err, _, berr = r.SettleBind(ctx, s, time.Hour, c, bd)
				} else {
					err, _ = r.SettleCounting(ctx, s, time.Hour, c)
					berr = r.Bind(ctx, bd)
				}
				if err != nil || berr != nil {
					b.Fatal(err, berr)
				}
			}
		})
	}
}
