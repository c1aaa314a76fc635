package tasks

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/replicas/redisproc"
)

var prefixes atomic.Int64

// openTestRedis opens a store on srv under a key prefix of its own and
// closes it when the test ends.
func openTestRedis(t *testing.T, srv *redisproc.Server, opts ...Option) *Redis {
	t.Helper()
	prefix := "test-" + strconv.FormatInt(prefixes.Add(1), 10) + ":"
	r, err := OpenRedis(t.Context(), srv.URL(0), append([]Option{WithKeyPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// rawClient talks to srv directly, to inspect keys.
func rawClient(t *testing.T, srv *redisproc.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestRedis(t *testing.T) {
	srv := redisproc.Start(t)
	testStore(t, func(t *testing.T, opts ...Option) Store { return openTestRedis(t, srv, opts...) })
}

// TestRedisKeys checks the documented key layout and expiries
// (docs/operations.md, "Shared state on Redis").
func TestRedisKeys(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	r := openTestRedis(t, srv, WithKeyPrefix("cg:"))
	raw := rawClient(t, srv)

	require.NoError(t, r.Bind(ctx, Binding{TaskID: "t1", Subject: "alice@x", Tenant: "acme", Capability: "c", Handler: "h", CreatedAt: time.Unix(100, 0)}))
	h, err := raw.HGetAll(ctx, "cg:task:t1").Result()
	require.NoError(t, err)
	require.Equal(t, "alice@x", h["subject"])
	require.Equal(t, "acme", h["tenant"])
	require.Equal(t, "c", h["capability"])
	require.Equal(t, "h", h["handler"])
	require.Equal(t, "0", h["pending"])
	require.Equal(t, "100000000000", h["created"])
	ttl, err := raw.TTL(ctx, "cg:task:t1").Result()
	require.NoError(t, err)
	require.InDelta(t, DefaultBindingTTL.Seconds(), ttl.Seconds(), 5)
	members, err := raw.SMembers(ctx, "cg:owner:acme:alice%40x").Result()
	require.NoError(t, err)
	require.Equal(t, []string{"t1"}, members)
	ttl, err = raw.TTL(ctx, "cg:owner:acme:alice%40x").Result()
	require.NoError(t, err)
	require.InDelta(t, DefaultBindingTTL.Seconds(), ttl.Seconds(), 5)

	now := time.Now()
	require.NoError(t, r.RecordCall(ctx, "lookup-invoice", now))
	d := strconv.FormatInt(now.Unix()/86400, 10)
	n, err := raw.Get(ctx, "cg:usage:lookup-invoice:"+d).Int()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	exp, err := raw.ExpireTime(ctx, "cg:usage:lookup-invoice:"+d).Result()
	require.NoError(t, err)
	require.Equal(t, time.Duration((now.Unix()/86400+32)*86400)*time.Second, exp)
	u, err := raw.HGetAll(ctx, "cg:usage:lookup-invoice").Result()
	require.NoError(t, err)
	require.Equal(t, "1", u["total"])
	require.Len(t, u["last"], 20)
}

func TestRedisBindingTTL(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	r := openTestRedis(t, srv, WithBindingTTL(300*time.Millisecond))
	require.NoError(t, r.Bind(ctx, Binding{TaskID: "t1", Subject: "alice", Tenant: "acme", Capability: "c", Handler: "h"}))
	time.Sleep(150 * time.Millisecond)
	// A Bind renews the TTL.
	require.NoError(t, r.Bind(ctx, Binding{TaskID: "t1", Subject: "alice", Tenant: "acme", Capability: "c", Handler: "h"}))
	time.Sleep(200 * time.Millisecond)
	_, ok, err := r.Lookup(ctx, "t1")
	require.NoError(t, err)
	require.True(t, ok, "renewed by the second Bind")
	require.Eventually(t, func() bool {
		_, ok, err := r.Lookup(ctx, "t1")
		return err == nil && !ok
	}, 2*time.Second, 20*time.Millisecond)
	owned, err := r.Owned(ctx, Owner{Subject: "alice", Tenant: "acme"})
	require.NoError(t, err)
	require.Empty(t, owned)
	// An expired task id is free again.
	require.NoError(t, r.Bind(ctx, Binding{TaskID: "t1", Subject: "mallory", Tenant: "acme", Capability: "c", Handler: "h"}))
}

// TestRedisUnavailable: with nothing listening, Open still returns a store,
// and every operation fails quickly with ErrUnavailable.
func TestRedisUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	start := time.Now()
	s, err := Open(t.Context(), "redis://"+addr+"/0")
	require.NoError(t, err, "a Redis that is down at start is not fatal")
	r := s.(*Redis)
	t.Cleanup(func() { _ = r.Close() })
	ctx := t.Context()
	ops := map[string]func() error{
		"bind":   func() error { return r.Bind(ctx, Binding{TaskID: "t", Subject: "s"}) },
		"lookup": func() error { _, _, err := r.Lookup(ctx, "t"); return err },
		"owned":  func() error { _, err := r.Owned(ctx, Owner{Subject: "s"}); return err },
		"delete": func() error { return r.Delete(ctx, "t") },
		"record": func() error { return r.RecordCall(ctx, "c", time.Now()) },
		"usage":  func() error { _, err := r.Usage(ctx, "c", time.Now()); return err },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := op()
			require.ErrorIs(t, err, ErrUnavailable)
			require.Contains(t, err.Error(), "task store unavailable: redis")
			require.Less(t, time.Since(start), DefaultOpTimeout+3*time.Second, "bounded, not hanging")
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
	hs, err := OpenRedis(t.Context(), "redis://"+hang.Addr().String()+"/0", WithOpTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = hs.Close() })
	start = time.Now()
	_, _, err = hs.Lookup(ctx, "t")
	require.ErrorIs(t, err, ErrUnavailable)
	require.Less(t, time.Since(start), 5*time.Second, "bounded by the op timeout, not hanging")
}

// TestRedisRestart: a binding acknowledged before a crash (SIGKILL) is there
// after the restart, and the same client recovers without being reopened.
func TestRedisRestart(t *testing.T) {
	srv := redisproc.Start(t)
	ctx := t.Context()
	r := openTestRedis(t, srv)
	b := Binding{TaskID: "t1", Subject: "alice", Tenant: "acme", Capability: "c", Handler: "h", CreatedAt: time.Unix(100, 0)}
	require.NoError(t, r.Bind(ctx, b))
	require.NoError(t, r.RecordCall(ctx, "c", time.Now()))

	srv.Kill()
	_, _, err := r.Lookup(ctx, "t1")
	require.ErrorIs(t, err, ErrUnavailable)
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
	require.ErrorIs(t, r.Bind(ctx, Binding{TaskID: "t1", Subject: "mallory"}), ErrConflict)
}

func TestOpen(t *testing.T) {
	s, err := Open(t.Context(), "memory")
	require.NoError(t, err)
	require.IsType(t, &Memory{}, s)

	for _, bad := range []string{"", "postgres://x", "redis://:secret@h:6379/0?binding_ttl=soon", "redis://:secret@h:6379/0?nope=1", "redis://:secret@h:6379/x"} {
		_, err := Open(t.Context(), bad)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "secret", "the password is not echoed")
	}
}

func TestParseRedisURL(t *testing.T) {
	o, own, err := parseRedisURL("rediss://u:p@cache.internal:6380/3?key_prefix=fin%3A&binding_ttl=48h&read_timeout=2s")
	require.NoError(t, err)
	require.Equal(t, "cache.internal:6380", o.Addr)
	require.Equal(t, 3, o.DB)
	require.NotNil(t, o.TLSConfig)
	require.Equal(t, DefaultRedisTimeout, o.DialTimeout)
	require.Equal(t, 2*time.Second, o.ReadTimeout, "the URL's timeout wins")
	require.Equal(t, DefaultRedisTimeout, o.WriteTimeout)
	require.Equal(t, DefaultRedisRetries, o.MaxRetries)
	r := NewRedis(redis.NewClient(o), own...)
	t.Cleanup(func() { _ = r.Close() })
	require.Equal(t, "fin:", r.prefix)
	require.Equal(t, 48*time.Hour, r.ttl)

	r = NewRedis(redis.NewClient(o), append(own, WithKeyPrefix("x:"))...)
	t.Cleanup(func() { _ = r.Close() })
	require.Equal(t, "x:", r.prefix, "options given in code win over the URL")
}
