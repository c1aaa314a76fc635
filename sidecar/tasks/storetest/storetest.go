// Package storetest is the conformance suite every task store passes (tasks.Store): bindings and
// their owners, pending clarifications and their cap, contexts, the owner index page by page,
// messageIds, usage — each run with the store's clock now, a year behind and a year ahead of the
// real one, since a store must never compare its clock with another machine's. Each backend's
// tests call Run with a constructor of empty stores (the memory store in sidecar/tasks, and Redis
// as one server, a Sentinel set and a Cluster on real redis-server processes); a new backend
// does the same from its own folder (docs/walkthroughs.md, "Add a store backend").
package storetest

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
)

// Skew is where the conformance suite sets a store's clock (WithClock)
// against the real one, and so against the clock of a Redis, which expires
// keys by its own: a store must not compare a time taken from its clock with
// another machine's (docs/operations.md, "Clocks").
type Skew struct {
	Name   string
	Offset time.Duration
}

// Skews are the clocks Run runs the suite at: now, a year behind, a year
// ahead. A backend's own expiry tests use the same.
func Skews() []Skew {
	return []Skew{
		{"clock now", 0},
		{"clock a year behind", -365 * 24 * time.Hour},
		{"clock a year ahead", 365 * 24 * time.Hour},
	}
}

// Run is the conformance suite every Store passes, run with the
// store's clock at each of Skews. newStore returns an empty store
// for one subtest.
func Run(t *testing.T, newStore func(t *testing.T, opts ...tasks.Option) tasks.Store) {
	for _, c := range Skews() {
		t.Run(c.Name, func(t *testing.T) {
			now := func() time.Time { return time.Now().Add(c.Offset) }
			runAt(t, now, func(t *testing.T, opts ...tasks.Option) tasks.Store {
				return newStore(t, append([]tasks.Option{tasks.WithClock(now)}, opts...)...)
			})
		})
	}
}

// runAt is the conformance suite with the store's clock at now: every
// time the suite gives a store is taken from now, never a calendar date.
func runAt(t *testing.T, now func() time.Time, newStore func(t *testing.T, opts ...tasks.Option) tasks.Store) {
	newClock := func() *Clock { return NewClock(now()) }
	testMessages(t, newClock, newStore)
	t.Run("bind ownership", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		b := tasks.Binding{TaskID: "t1", Capability: "reconcile-invoice", Handler: "recon", Subject: "alice", Tenant: "acme", CreatedAt: time.Unix(100, 0)}
		require.NoError(t, m.Bind(ctx, b))

		got, ok, err := m.Lookup(ctx, "t1")
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, got.OwnedBy(tasks.Owner{Subject: "alice", Tenant: "acme"}))
		require.False(t, got.OwnedBy(tasks.Owner{Subject: "alice", Tenant: "globex"}))
		require.False(t, got.OwnedBy(tasks.Owner{Subject: "mallory", Tenant: "acme"}))

		// Same owner and target: an update. Another owner or handler: conflict.
		require.NoError(t, m.Bind(ctx, b))
		other := b
		other.Subject = "mallory"
		require.ErrorIs(t, m.Bind(ctx, other), tasks.ErrConflict)
		otherTenant := b
		otherTenant.Tenant = "globex"
		require.ErrorIs(t, m.Bind(ctx, otherTenant), tasks.ErrConflict)
		moved := b
		moved.Handler = "elsewhere"
		require.ErrorIs(t, m.Bind(ctx, moved), tasks.ErrConflict)
		recap := b
		recap.Capability = "lookup-invoice"
		require.ErrorIs(t, m.Bind(ctx, recap), tasks.ErrConflict)
		got, _, err = m.Lookup(ctx, "t1")
		require.NoError(t, err)
		RequireBinding(t, b, got) // a refused Bind changed nothing

		// A pending clarification task may be re-bound to the chosen capability.
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "c1", Subject: "alice", Tenant: "acme", Pending: true, Candidates: []string{"a", "b"}}))
		require.ErrorIs(t, m.Bind(ctx, tasks.Binding{TaskID: "c1", Subject: "mallory", Tenant: "acme", Capability: "a", Handler: "h"}), tasks.ErrConflict)
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "c1", Subject: "alice", Tenant: "acme", Capability: "a", Handler: "h"}))
		got, ok, err = m.Lookup(ctx, "c1")
		require.NoError(t, err)
		require.True(t, ok)
		require.False(t, got.Pending)
		require.Empty(t, got.Candidates)
		// Once bound, it is no longer pending: it cannot move again.
		require.ErrorIs(t, m.Bind(ctx, tasks.Binding{TaskID: "c1", Subject: "alice", Tenant: "acme", Capability: "b", Handler: "h"}), tasks.ErrConflict)

		owned, err := m.Owned(ctx, tasks.Owner{Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		require.Len(t, owned, 2)
		none, err := m.Owned(ctx, tasks.Owner{Subject: "mallory", Tenant: "acme"})
		require.NoError(t, err)
		require.Empty(t, none)
		none, err = m.Owned(ctx, tasks.Owner{Subject: "alice", Tenant: "globex"})
		require.NoError(t, err)
		require.Empty(t, none)

		require.NoError(t, m.Delete(ctx, "t1"))
		_, ok, err = m.Lookup(ctx, "t1")
		require.NoError(t, err)
		require.False(t, ok)
		owned, err = m.Owned(ctx, tasks.Owner{Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		require.Len(t, owned, 1)
		require.NoError(t, m.Delete(ctx, "t1"), "deleting an unknown task is not an error")

		// A deleted task id may be bound by anyone.
		require.NoError(t, m.Bind(ctx, other))
	})

	t.Run("round trip", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		_, ok, err := m.Lookup(ctx, "nope")
		require.NoError(t, err)
		require.False(t, ok)

		b := tasks.Binding{TaskID: "task:with spaces/ünïcode", ContextID: "ctx-1", Subject: "user:1 with space", Tenant: "acme:eu",
			Pending: true, Candidates: []string{"lookup-invoice", "reconcile-invoice"}, CreatedAt: now().Truncate(time.Second).Add(123456789)}
		require.NoError(t, m.Bind(ctx, b))
		got, ok, err := m.Lookup(ctx, b.TaskID)
		require.NoError(t, err)
		require.True(t, ok)
		RequireBinding(t, b, got)

		// A rebind without a created time keeps the first one.
		b2 := b
		b2.CreatedAt = time.Time{}
		b2.Pending, b2.Candidates = false, nil
		b2.Capability, b2.Handler = "lookup-invoice", "invoices.lookup"
		require.NoError(t, m.Bind(ctx, b2))
		got, _, err = m.Lookup(ctx, b.TaskID)
		require.NoError(t, err)
		b2.CreatedAt = b.CreatedAt
		RequireBinding(t, b2, got)

		// Owners whose names would collide if joined naively stay apart.
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "x1", Subject: "a:b", Tenant: "c"}))
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "x2", Subject: "b", Tenant: "c:a"}))
		owned, err := m.Owned(ctx, tasks.Owner{Subject: "a:b", Tenant: "c"})
		require.NoError(t, err)
		require.Len(t, owned, 1)
		require.Equal(t, "x1", owned[0].TaskID)
	})

	t.Run("owned pages", func(t *testing.T) {
		// A model of the owner's tasks (binds, re-binds to a new time or
		// context, re-binds keeping the time, deletes, other owners, tasks
		// without an issuer) against OwnedPage walked in small pages.
		ctx := t.Context()
		m := newStore(t)
		base := now().Add(-30 * 24 * time.Hour).Truncate(time.Second)
		model := map[string]tasks.Binding{}
		bind := func(b tasks.Binding) {
			require.NoError(t, m.Bind(ctx, b))
			if old, ok := model[b.TaskID]; ok && b.CreatedAt.IsZero() {
				b.CreatedAt = old.CreatedAt
			}
			model[b.TaskID] = b
		}
		contexts := []string{"", "ctx-a", "ctx-b:x{y}"}
		for i := range 90 {
			b := tasks.Binding{TaskID: fmt.Sprintf("t%02d", i), ContextID: contexts[i%3], Capability: "x", Handler: "h",
				Issuer: "i", Subject: "alice", Tenant: "acme", CreatedAt: base.Add(time.Duration(i/4) * time.Second)}
			switch {
			case i%6 == 5:
				b.Issuer = "" // written before issuers were recorded
			case i%10 == 7:
				b.Subject = "bob"
			}
			bind(b)
		}
		for _, id := range []string{"t00", "t13", "t40", "t41", "t88"} {
			require.NoError(t, m.Delete(ctx, id))
			delete(model, id)
		}
		for i, id := range []string{"t02", "t03", "t20", "t50", "t61"} {
			b := model[id]
			b.CreatedAt = base.Add(time.Duration(30+i%2) * time.Second)
			if i%2 == 0 {
				b.ContextID = "ctx-a"
			}
			bind(b)
		}
		for _, id := range []string{"t05", "t11", "t04"} {
			b := model[id]
			b.CreatedAt = time.Time{} // keeps its created time
			bind(b)
		}
		owners := []tasks.Owner{{Issuer: "i", Subject: "alice", Tenant: "acme"}, {Issuer: "i", Subject: "alice", Tenant: "acme", Legacy: true},
			{Subject: "alice", Tenant: "acme"}, {Issuer: "i", Subject: "bob", Tenant: "acme"}}
		for _, o := range owners {
			for _, contextID := range contexts {
				var want []tasks.Binding
				for _, b := range model {
					if b.OwnedBy(o) && (contextID == "" || b.ContextID == contextID) {
						want = append(want, b)
					}
				}
				slices.SortFunc(want, func(a, b tasks.Binding) int { return tasks.PositionOf(a).Compare(tasks.PositionOf(b)) })
				for _, limit := range []int{1, 7, 100} {
					var got []tasks.Binding
					var after *tasks.Position
					for pages := 0; ; pages++ {
						require.Less(t, pages, len(want)+2, "pages end")
						p, err := m.OwnedPage(ctx, o, after, contextID, limit)
						require.NoError(t, err)
						require.LessOrEqual(t, len(p.Bindings), limit)
						require.GreaterOrEqual(t, p.Total, len(want), "total is at least the tasks listed")
						got = append(got, p.Bindings...)
						if !p.More {
							break
						}
						next := p.Next
						after = &next
					}
					require.Equal(t, TaskIDs(want), TaskIDs(got), "%+v in %q by %d", o, contextID, limit)
					for i := range got {
						RequireBinding(t, want[i], got[i])
					}
				}
			}
		}
		none, err := m.OwnedPage(ctx, tasks.Owner{Tenant: "acme"}, nil, "", 10)
		require.NoError(t, err)
		require.Empty(t, none.Bindings)
	})

	t.Run("owned newest first", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		base := now().Add(-30 * 24 * time.Hour).Truncate(time.Second)
		for i, id := range []string{"b", "a", "d", "c"} {
			require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: id, Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h",
				CreatedAt: base.Add(time.Duration(i/2) * time.Hour)}))
		}
		owned, err := m.Owned(ctx, tasks.Owner{Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		var ids []string
		for _, b := range owned {
			ids = append(ids, b.TaskID)
		}
		byDigest := func(x, y string) []string { // same created time: the task id's digest orders
			if tasks.PositionOf(tasks.Binding{TaskID: x}).Compare(tasks.PositionOf(tasks.Binding{TaskID: y})) > 0 {
				return []string{y, x}
			}
			return []string{x, y}
		}
		require.Equal(t, append(byDigest("c", "d"), byDigest("a", "b")...), ids, "newest first, then by the id's digest")
	})

	t.Run("concurrent binds of one task id", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		const n = 16
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				errs[i] = m.Bind(ctx, tasks.Binding{TaskID: "race", Subject: fmt.Sprintf("caller-%d", i), Tenant: "acme", Capability: "x", Handler: "h"})
			})
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, won, "two callers bound the same task id")
				won = i
				continue
			}
			require.ErrorIs(t, err, tasks.ErrConflict)
		}
		require.NotEqual(t, -1, won)
		got, ok, err := m.Lookup(ctx, "race")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, fmt.Sprintf("caller-%d", won), got.Subject)
	})

	t.Run("the issuer is part of the owner", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		alice := tasks.Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}
		b := tasks.Binding{TaskID: "t1", Capability: "x", Handler: "h", Issuer: alice.Issuer, Subject: "alice", Tenant: "acme", CreatedAt: time.Unix(100, 0)}
		require.NoError(t, m.Bind(ctx, b))
		for name, issuer := range map[string]string{"another issuer": "https://idp-b", "no issuer": "", "issuer differing in case": "https://IDP-A"} {
			other := b
			other.Issuer = issuer
			require.ErrorIs(t, m.Bind(ctx, other), tasks.ErrConflict, name)
			require.ErrorIs(t, m.BindPending(ctx, tasks.Binding{TaskID: "t1", Issuer: issuer, Subject: "alice", Tenant: "acme", Pending: true}, time.Minute, 10), tasks.ErrConflict, name)
		}
		require.NoError(t, m.Bind(ctx, b), "the same owner re-binds")
		got, ok, err := m.Lookup(ctx, "t1")
		require.NoError(t, err)
		require.True(t, ok)
		RequireBinding(t, b, got)
		require.Equal(t, alice, got.Owner())

		owned, err := m.Owned(ctx, alice)
		require.NoError(t, err)
		require.Equal(t, []string{"t1"}, TaskIDs(owned))
		for _, o := range []tasks.Owner{
			{Issuer: "https://idp-b", Subject: "alice", Tenant: "acme"},
			{Issuer: "https://idp-b", Subject: "alice", Tenant: "acme", Legacy: true},
			{Subject: "alice", Tenant: "acme"},
			{Subject: "alice", Tenant: "acme", Legacy: true},
		} {
			owned, err := m.Owned(ctx, o)
			require.NoError(t, err)
			require.Empty(t, owned, "%+v", o)
		}

		// Owners whose components would collide if joined naively stay apart.
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "y1", Issuer: "i:s", Subject: "t", Tenant: "u"}))
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "y2", Issuer: "i", Subject: "t", Tenant: "s:u"}))
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "y3", Issuer: "i", Subject: "s:t", Tenant: "u"}))
		for o, want := range map[tasks.Owner]string{
			{Issuer: "i:s", Subject: "t", Tenant: "u"}: "y1",
			{Issuer: "i", Subject: "t", Tenant: "s:u"}: "y2",
			{Issuer: "i", Subject: "s:t", Tenant: "u"}: "y3",
		} {
			owned, err := m.Owned(ctx, o)
			require.NoError(t, err)
			require.Equal(t, []string{want}, TaskIDs(owned), "%+v", o)
		}
	})

	t.Run("legacy bindings", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		base := now().Add(-30 * 24 * time.Hour).Truncate(time.Second)
		// Bindings without an issuer, as written before issuers were recorded.
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "old1", Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h", CreatedAt: base}))
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "old2", Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h", CreatedAt: base.Add(2 * time.Hour)}))
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "old-globex", Subject: "alice", Tenant: "globex", Capability: "x", Handler: "h", CreatedAt: base}))
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "new", Issuer: "https://idp-a", Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h", CreatedAt: base.Add(time.Hour)}))

		tests := []struct {
			name  string
			owner tasks.Owner
			want  []string
		}{
			{"issuer, not legacy", tasks.Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}, []string{"new"}},
			{"issuer and legacy", tasks.Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme", Legacy: true}, []string{"old2", "new", "old1"}},
			{"another issuer, legacy", tasks.Owner{Issuer: "https://idp-b", Subject: "alice", Tenant: "acme", Legacy: true}, []string{"old2", "old1"}},
			{"legacy, other tenant", tasks.Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "globex", Legacy: true}, []string{"old-globex"}},
			{"legacy, other subject", tasks.Owner{Issuer: "https://idp-a", Subject: "bob", Tenant: "acme", Legacy: true}, nil},
			{"no subject", tasks.Owner{Issuer: "https://idp-a", Tenant: "acme", Legacy: true}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				owned, err := m.Owned(ctx, tt.owner)
				require.NoError(t, err)
				require.Equal(t, tt.want, TaskIDs(owned))
			})
		}

		// A legacy binding is re-bound with the issuer it has ("").
		require.ErrorIs(t, m.Bind(ctx, tasks.Binding{TaskID: "old1", Issuer: "https://idp-a", Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h"}), tasks.ErrConflict)
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "old1", Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h"}))
		require.NoError(t, m.Delete(ctx, "old2"))
		owned, err := m.Owned(ctx, tasks.Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme", Legacy: true})
		require.NoError(t, err)
		require.Equal(t, []string{"new", "old1"}, TaskIDs(owned))
	})

	t.Run("anonymous bindings are owned by nobody", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "anon", Capability: "x", Handler: "h"}))
		got, ok, err := m.Lookup(ctx, "anon")
		require.NoError(t, err)
		require.True(t, ok)
		require.False(t, got.OwnedBy(tasks.Owner{}))
		require.False(t, got.OwnedBy(tasks.Owner{Legacy: true}))
		owned, err := m.Owned(ctx, tasks.Owner{})
		require.NoError(t, err)
		require.Empty(t, owned)
		require.ErrorIs(t, m.BindPending(ctx, tasks.Binding{TaskID: "p", Pending: true}, time.Minute, 10), tasks.ErrTooManyPending, "anonymous callers hold no pending task")
		_, ok, err = m.Lookup(ctx, "p")
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("pending bindings expire", func(t *testing.T) {
		ctx := t.Context()
		clk := newClock()
		m := newStore(t, tasks.WithClock(clk.Now))
		alice := tasks.Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}
		p := tasks.Binding{TaskID: "p1", ContextID: "ctx", Issuer: alice.Issuer, Subject: "alice", Tenant: "acme", Pending: true, Candidates: []string{"a", "b"}, CreatedAt: clk.Now()}
		require.NoError(t, m.BindPending(ctx, p, 10*time.Minute, 10))
		got, ok, err := m.Lookup(ctx, "p1")
		require.NoError(t, err)
		require.True(t, ok)
		p.ExpiresAt = clk.Now().Add(10 * time.Minute)
		RequireBinding(t, p, got)
		require.True(t, p.ExpiresAt.Equal(got.ExpiresAt), "expires %s, want %s", got.ExpiresAt, p.ExpiresAt)

		// A second pending task, holding its first message (parts, version,
		// messageId), asked again, then resolved (plain Bind) before it
		// expires: it loses its expiry and the held message, all of it.
		held := tasks.Binding{TaskID: "p2", ContextID: "ctx-2", Issuer: alice.Issuer, Subject: "alice", Tenant: "acme", Pending: true, CreatedAt: clk.Now(),
			Held: []byte(`[{"text":"ünïcode \"quoted\""},{"raw":"JVBERi0xLjQK","mediaType":"application/pdf"}]`), HeldVersion: "1.0", HeldMessageID: "msg 1/ünï:x"}
		for range 2 {
			require.NoError(t, m.BindPending(ctx, held, 10*time.Minute, 10))
			got, _, err = m.Lookup(ctx, "p2")
			require.NoError(t, err)
			want := held
			want.ExpiresAt = clk.Now().Add(10 * time.Minute)
			RequireBinding(t, want, got)
		}
		resolved := tasks.Binding{TaskID: "p2", Issuer: alice.Issuer, Subject: "alice", Tenant: "acme", Capability: "a", Handler: "h",
			Held: held.Held, HeldVersion: held.HeldVersion, HeldMessageID: held.HeldMessageID}
		require.NoError(t, m.Bind(ctx, resolved))
		got, _, err = m.Lookup(ctx, "p2")
		require.NoError(t, err)
		require.False(t, got.Pending)
		require.True(t, got.ExpiresAt.IsZero())
		require.Empty(t, got.Held, "only a pending binding keeps the first message")
		require.Empty(t, got.HeldVersion)
		require.Empty(t, got.HeldMessageID)
		// A pending binding without held parts keeps no version or id either.
		require.NoError(t, m.BindPending(ctx, tasks.Binding{TaskID: "p3", Issuer: alice.Issuer, Subject: "alice", Tenant: "acme", Pending: true,
			HeldVersion: "1.0", HeldMessageID: "m-3"}, time.Millisecond, 10))
		got, _, err = m.Lookup(ctx, "p3")
		require.NoError(t, err)
		require.Empty(t, got.HeldVersion)
		require.Empty(t, got.HeldMessageID)
		require.NoError(t, m.Delete(ctx, "p3"))

		clk.Advance(10*time.Minute - time.Millisecond)
		_, ok, err = m.Lookup(ctx, "p1")
		require.NoError(t, err)
		require.True(t, ok, "not expired a millisecond before")
		owned, err := m.Owned(ctx, alice)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"p1", "p2"}, TaskIDs(owned), "p2 re-bound without a created time keeps its place")

		clk.Advance(time.Millisecond)
		_, ok, err = m.Lookup(ctx, "p1")
		require.NoError(t, err)
		require.False(t, ok, "expired")
		owned, err = m.Owned(ctx, alice)
		require.NoError(t, err)
		require.Equal(t, []string{"p2"}, TaskIDs(owned), "the resolved task stays")

		// An expired task id is free again, for anyone.
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "p1", Issuer: "https://idp-b", Subject: "mallory", Tenant: "acme", Capability: "a", Handler: "h"}))
		got, ok, err = m.Lookup(ctx, "p1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "mallory", got.Subject)
		require.True(t, got.ExpiresAt.IsZero())
		owned, err = m.Owned(ctx, alice)
		require.NoError(t, err)
		require.Equal(t, []string{"p2"}, TaskIDs(owned))
	})

	t.Run("pending bindings are capped per owner", func(t *testing.T) {
		ctx := t.Context()
		clk := newClock()
		m := newStore(t, tasks.WithClock(clk.Now))
		const ttl, limit = time.Minute, 3
		pending := func(id, issuer string) tasks.Binding {
			return tasks.Binding{TaskID: id, Issuer: issuer, Subject: "alice", Tenant: "acme", Pending: true, Candidates: []string{"a", "b"}}
		}
		const a = "https://idp-a"
		for _, id := range []string{"p1", "p2", "p3"} {
			require.NoError(t, m.BindPending(ctx, pending(id, a), ttl, limit))
		}
		require.ErrorIs(t, m.BindPending(ctx, pending("p4", a), ttl, limit), tasks.ErrTooManyPending)
		_, ok, err := m.Lookup(ctx, "p4")
		require.NoError(t, err)
		require.False(t, ok, "a refused BindPending writes nothing")

		require.NoError(t, m.BindPending(ctx, pending("p1", a), ttl, limit), "re-asking on a held task is not a new one")
		require.NoError(t, m.BindPending(ctx, pending("p4", "https://idp-b"), ttl, limit), "another issuer's user is another owner")
		require.NoError(t, m.BindPending(ctx, tasks.Binding{TaskID: "p5", Issuer: a, Subject: "alice", Tenant: "globex", Pending: true}, ttl, limit), "another tenant is another owner")
		require.ErrorIs(t, m.BindPending(ctx, pending("p4", a), ttl, limit), tasks.ErrConflict, "another owner's task id")

		// Resolving or deleting a pending task frees its place.
		require.NoError(t, m.Bind(ctx, tasks.Binding{TaskID: "p1", Issuer: a, Subject: "alice", Tenant: "acme", Capability: "a", Handler: "h"}))
		require.NoError(t, m.BindPending(ctx, pending("p6", a), ttl, limit))
		require.ErrorIs(t, m.BindPending(ctx, pending("p7", a), ttl, limit), tasks.ErrTooManyPending)
		require.NoError(t, m.Delete(ctx, "p2"))
		require.NoError(t, m.BindPending(ctx, pending("p7", a), ttl, limit))
		require.ErrorIs(t, m.BindPending(ctx, pending("p8", a), ttl, limit), tasks.ErrTooManyPending)

		// So does expiry.
		clk.Advance(ttl)
		for _, id := range []string{"p8", "p9", "p10"} {
			require.NoError(t, m.BindPending(ctx, pending(id, a), ttl, limit))
		}
		require.ErrorIs(t, m.BindPending(ctx, pending("p11", a), ttl, limit), tasks.ErrTooManyPending)
		owned, err := m.Owned(ctx, tasks.Owner{Issuer: a, Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"p1", "p8", "p9", "p10"}, TaskIDs(owned))

		// Misuse is refused.
		require.ErrorIs(t, m.BindPending(ctx, pending("q1", "https://idp-c"), ttl, 0), tasks.ErrTooManyPending)
		err = m.BindPending(ctx, tasks.Binding{TaskID: "q2", Issuer: a, Subject: "bob", Capability: "a", Handler: "h"}, ttl, limit)
		require.Error(t, err, "not pending")
		require.NotErrorIs(t, err, tasks.ErrTooManyPending)
		require.Error(t, m.BindPending(ctx, tasks.Binding{TaskID: "q3", Issuer: a, Subject: "bob", Pending: true}, 0, limit), "no ttl")
		for _, id := range []string{"q1", "q2", "q3"} {
			_, ok, err := m.Lookup(ctx, id)
			require.NoError(t, err)
			require.False(t, ok, id)
		}
	})

	t.Run("concurrent pending binds never pass the cap", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		const n, limit = 24, 5
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				errs[i] = m.BindPending(ctx, tasks.Binding{TaskID: fmt.Sprintf("c%d", i), Issuer: "i", Subject: "alice", Tenant: "acme", Pending: true}, time.Minute, limit)
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
				continue
			}
			require.ErrorIs(t, err, tasks.ErrTooManyPending)
		}
		require.Equal(t, limit, ok)
		owned, err := m.Owned(ctx, tasks.Owner{Issuer: "i", Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		require.Len(t, owned, limit)
	})

	t.Run("contexts have owners", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		alice := tasks.Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}
		_, ok, err := m.LookupContext(ctx, "ctx-1")
		require.NoError(t, err)
		require.False(t, ok, "an unknown context is nobody's")

		mine := tasks.Context{ContextID: "ctx-1", Issuer: alice.Issuer, Subject: alice.Subject, Tenant: alice.Tenant, CreatedAt: time.Unix(100, 0).UTC()}
		held, err := m.ClaimContext(ctx, mine)
		require.NoError(t, err)
		require.Equal(t, mine, held, "a new id becomes the claimant's")
		require.True(t, held.OwnedBy(alice))
		again := mine
		again.CreatedAt = time.Unix(200, 0).UTC()
		held, err = m.ClaimContext(ctx, again)
		require.NoError(t, err)
		require.Equal(t, mine, held, "the holder's claim keeps the first created time")

		// Any other owner — subject, tenant or issuer — gets the holder back, unchanged.
		for _, o := range []tasks.Owner{
			{Issuer: alice.Issuer, Subject: "mallory", Tenant: "acme"},
			{Issuer: alice.Issuer, Subject: "alice", Tenant: "globex"},
			{Issuer: "https://idp-b", Subject: "alice", Tenant: "acme"},
			{Subject: "alice", Tenant: "acme"},
		} {
			held, err := m.ClaimContext(ctx, tasks.Context{ContextID: "ctx-1", Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant})
			require.NoError(t, err)
			require.Equal(t, mine, held)
			require.False(t, held.OwnedBy(o), "%+v", o)
			require.False(t, held.OwnedBy(tasks.Owner{Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant, Legacy: true}))
		}
		got, ok, err := m.LookupContext(ctx, "ctx-1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, mine, got)

		// Contexts and tasks are apart: a task id equal to a context id is another record.
		_, ok, err = m.Lookup(ctx, "ctx-1")
		require.NoError(t, err)
		require.False(t, ok)

		// A context held without a subject (a handler answered an anonymous caller in it)
		// is nobody's, and nobody can take it.
		held, err = m.ClaimContext(ctx, tasks.Context{ContextID: "ctx-anon"})
		require.NoError(t, err)
		require.False(t, held.OwnedBy(tasks.Owner{}))
		held, err = m.ClaimContext(ctx, tasks.Context{ContextID: "ctx-anon", Issuer: alice.Issuer, Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		require.Empty(t, held.Subject)
		require.False(t, held.OwnedBy(alice))

		// A context held without an issuer is a Legacy owner's, as a binding is.
		held, err = m.ClaimContext(ctx, tasks.Context{ContextID: "ctx-old", Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		require.False(t, held.OwnedBy(alice))
		require.True(t, held.OwnedBy(tasks.Owner{Issuer: alice.Issuer, Subject: "alice", Tenant: "acme", Legacy: true}))
	})

	t.Run("concurrent claims of one new context", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		const n = 16
		held := make([]tasks.Context, n)
		errs := make([]error, n)
		Concurrently(n, func(i int) {
			held[i], errs[i] = m.ClaimContext(ctx, tasks.Context{ContextID: "race", Issuer: "i", Subject: fmt.Sprintf("caller-%d", i), Tenant: "acme"})
		})
		won := 0
		for i := range n {
			require.NoError(t, errs[i])
			require.Equal(t, held[0].Subject, held[i].Subject, "every claimant is told the same holder")
			if held[i].OwnedBy(tasks.Owner{Issuer: "i", Subject: fmt.Sprintf("caller-%d", i), Tenant: "acme"}) {
				won++
			}
		}
		require.Equal(t, 1, won, "exactly one claimant holds the context")
		got, ok, err := m.LookupContext(ctx, "race")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, held[0].Subject, got.Subject)
	})

	t.Run("usage window", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		now := now()
		require.NoError(t, m.RecordCall(ctx, "old", now.Add(-40*24*time.Hour)))
		require.NoError(t, m.RecordCall(ctx, "recent", now.Add(-2*24*time.Hour)))
		require.NoError(t, m.RecordCall(ctx, "recent", now.Add(-1*time.Hour)))
		require.NoError(t, m.RecordCall(ctx, "recent", now.Add(-29*24*time.Hour)))
		require.NoError(t, m.RecordCall(ctx, "recent", now.Add(-31*24*time.Hour)))
		require.NoError(t, m.RecordCall(ctx, "recent", now.Add(-3*time.Hour))) // out of order: last stays the latest

		u, err := m.Usage(ctx, "old", now)
		require.NoError(t, err)
		require.Equal(t, int64(0), u.Calls30d)
		require.Equal(t, int64(1), u.Total)
		require.True(t, now.Add(-40*24*time.Hour).Equal(u.LastUsed))

		u, err = m.Usage(ctx, "recent", now)
		require.NoError(t, err)
		require.Equal(t, "recent", u.Capability)
		require.Equal(t, int64(4), u.Calls30d)
		require.Equal(t, int64(5), u.Total)
		require.True(t, now.Add(-time.Hour).Equal(u.LastUsed), "last used %s", u.LastUsed)

		u, err = m.Usage(ctx, "never", now)
		require.NoError(t, err)
		require.Equal(t, "never", u.Capability)
		require.Zero(t, u.Total)
		require.Zero(t, u.Calls30d)
		require.True(t, u.LastUsed.IsZero())
	})

	t.Run("usage says since when it counts", func(t *testing.T) {
		before := now().Add(-time.Second)
		m := newStore(t)
		u, err := m.Usage(t.Context(), "never", now())
		require.NoError(t, err)
		require.False(t, u.ObservedSince.IsZero(), "a store knows when it began counting")
		require.True(t, u.ObservedSince.After(before), "a new store began now by its clock, not %s", u.ObservedSince)
		require.True(t, u.ObservedSince.Before(now().Add(time.Second)))
	})
}

// testMessages is the conformance suite of Messages (run by Run on every store).
func testMessages(t *testing.T, newClock func() *Clock, newStore func(t *testing.T, opts ...tasks.Option) tasks.Store) {
	const window = time.Hour
	alice := tasks.Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}

	t.Run("a message id is reserved once per owner", func(t *testing.T) {
		ctx := t.Context()
		clk := newClock()
		m := newStore(t, tasks.WithClock(clk.Now))
		s := tasks.Sent{MessageID: "m-1", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}
		got, fresh, err := m.Reserve(ctx, s, window, 10)
		require.NoError(t, err)
		require.True(t, fresh)
		require.Equal(t, tasks.InProgress, got.State(clk.Now()))

		again, fresh, err := m.Reserve(ctx, tasks.Sent{MessageID: "m-1", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Hour)}, window, 10)
		require.NoError(t, err)
		require.False(t, fresh, "the same owner's same id is the same message")
		require.True(t, again.Deadline.Equal(s.Deadline), "the first record answers")
		require.Equal(t, tasks.InProgress, again.State(clk.Now()))

		// Every other owner — another issuer, subject or tenant — sends another message.
		for _, o := range []tasks.Owner{{Issuer: "https://idp-b", Subject: "alice", Tenant: "acme"}, {Issuer: alice.Issuer, Subject: "bob", Tenant: "acme"},
			{Issuer: alice.Issuer, Subject: "alice", Tenant: "other"}, {Subject: "alice", Tenant: "acme"}} {
			_, fresh, err := m.Reserve(ctx, tasks.Sent{MessageID: "m-1", Owner: o, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 10)
			require.NoError(t, err)
			require.True(t, fresh, "owner %+v", o)
		}
		_, _, err = m.Reserve(ctx, tasks.Sent{MessageID: "m-1", Owner: tasks.Owner{Tenant: "acme"}}, window, 10)
		require.ErrorIs(t, err, tasks.ErrNoOwner, "an anonymous caller reserves nothing")

		// Settled: the record names the task; past its deadline unsettled: unknown.
		require.NoError(t, m.Settle(ctx, tasks.Sent{MessageID: "m-1", Owner: alice, Started: s.Started, Deadline: s.Deadline, TaskID: "t-1", ContextID: "c-1",
			Capability: "pay", Handler: "billing"}, window))
		got, fresh, err = m.Reserve(ctx, s, window, 10)
		require.NoError(t, err)
		require.False(t, fresh)
		require.Equal(t, tasks.Answered, got.State(clk.Now()))
		require.Equal(t, tasks.Sent{MessageID: "m-1", Owner: alice, Done: true, TaskID: "t-1", ContextID: "c-1", Capability: "pay", Handler: "billing"},
			tasks.Sent{MessageID: got.MessageID, Owner: got.Owner, Done: got.Done, TaskID: got.TaskID, ContextID: got.ContextID, Capability: got.Capability, Handler: got.Handler})
		require.True(t, got.Started.Equal(s.Started))

		// Settled as lost: unknown, whatever the deadline.
		_, fresh, err = m.Reserve(ctx, tasks.Sent{MessageID: "m-3", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Hour)}, window, 10)
		require.NoError(t, err)
		require.True(t, fresh)
		require.NoError(t, m.Settle(ctx, tasks.Sent{MessageID: "m-3", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Hour), Lost: true}, window))
		got, _, err = m.Reserve(ctx, tasks.Sent{MessageID: "m-3", Owner: alice, Started: clk.Now()}, window, 10)
		require.NoError(t, err)
		require.Equal(t, tasks.Unknown, got.State(clk.Now()))

		_, fresh, err = m.Reserve(ctx, tasks.Sent{MessageID: "m-2", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 10)
		require.NoError(t, err)
		require.True(t, fresh)
		clk.Advance(time.Minute)
		got, _, err = m.Reserve(ctx, tasks.Sent{MessageID: "m-2", Owner: alice, Started: clk.Now()}, window, 10)
		require.NoError(t, err)
		require.Equal(t, tasks.Unknown, got.State(clk.Now()), "never settled, past its deadline")

		// Released by another call than the one that reserved it: kept. By its own: the id
		// is free again.
		require.NoError(t, m.Release(ctx, tasks.Sent{MessageID: "m-2", Owner: alice, Started: clk.Now()}))
		_, fresh, err = m.Reserve(ctx, tasks.Sent{MessageID: "m-2", Owner: alice, Started: clk.Now()}, window, 10)
		require.NoError(t, err)
		require.False(t, fresh, "another call's record is kept")
		require.NoError(t, m.Release(ctx, got))
		_, fresh, err = m.Reserve(ctx, tasks.Sent{MessageID: "m-2", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 10)
		require.NoError(t, err)
		require.True(t, fresh, "a released id is a new message")
	})

	t.Run("message records last the window", func(t *testing.T) {
		ctx := t.Context()
		clk := newClock()
		m := newStore(t, tasks.WithClock(clk.Now))
		s := tasks.Sent{MessageID: "m:{1}%", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}
		_, fresh, err := m.Reserve(ctx, s, window, 10)
		require.NoError(t, err)
		require.True(t, fresh)
		clk.Advance(window - time.Millisecond)
		_, fresh, err = m.Reserve(ctx, tasks.Sent{MessageID: s.MessageID, Owner: alice, Started: clk.Now()}, window, 10)
		require.NoError(t, err)
		require.False(t, fresh, "a millisecond before the window ends")
		clk.Advance(time.Millisecond)
		_, fresh, err = m.Reserve(ctx, tasks.Sent{MessageID: s.MessageID, Owner: alice, Started: clk.Now()}, window, 10)
		require.NoError(t, err)
		require.True(t, fresh, "after the window the id is new again")
	})

	t.Run("message records are bounded per owner", func(t *testing.T) {
		ctx := t.Context()
		clk := newClock()
		m := newStore(t, tasks.WithClock(clk.Now))
		for i := range 5 {
			_, fresh, err := m.Reserve(ctx, tasks.Sent{MessageID: "m" + strconv.Itoa(i), Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 3)
			require.NoError(t, err)
			require.True(t, fresh)
			clk.Advance(time.Millisecond)
		}
		// The three newest are kept; the two oldest were dropped and are new again.
		for i, want := range []bool{true, true, false, false, false} {
			_, fresh, err := m.Reserve(ctx, tasks.Sent{MessageID: "m" + strconv.Itoa(i), Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 100)
			require.NoError(t, err)
			require.Equal(t, want, fresh, "m%d", i)
		}
	})

	t.Run("concurrent reservations of one message id", func(t *testing.T) {
		clk := newClock()
		m := newStore(t, tasks.WithClock(clk.Now))
		var fresh atomic.Int32
		Concurrently(16, func(int) {
			_, ok, err := m.Reserve(t.Context(), tasks.Sent{MessageID: "race", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 10)
			if err == nil && ok {
				fresh.Add(1)
			}
		})
		require.Equal(t, int32(1), fresh.Load(), "exactly one call is the first")
	})
}

// The helpers below are the suite's, exported for a backend's own tests.

// Concurrently runs f(0) … f(n-1) at once and waits for all of them.
func Concurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// RequireBinding compares bindings, times by instant.
func RequireBinding(t *testing.T, want, got tasks.Binding) {
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

// TaskIDs are the task ids of bs, in order.
func TaskIDs(bs []tasks.Binding) []string {
	var ids []string
	for _, b := range bs {
		ids = append(ids, b.TaskID)
	}
	return ids
}

// Clock is a settable clock for WithClock. The suite starts it at the
// store's clock (runAt).
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a Clock at at, truncated to the millisecond (the precision
// the stores keep).
func NewClock(at time.Time) *Clock { return &Clock{now: at.Truncate(time.Millisecond)} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// RunExamples is the conformance suite of the candidate routing examples
// (tasks.Examples): a text counts once more when answered again, each
// capability keeps at most its bound (the least recently seen go), a
// candidate not seen for ttl is gone, and dropped texts are forgotten.
// newExamples returns an empty store for one run, with opts (the clock).
func RunExamples(t *testing.T, newExamples func(t *testing.T, opts ...tasks.Option) tasks.Examples) {
	clock := NewClock(time.Now())
	x := newExamples(t, tasks.WithClock(clock.Now))
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
	clock.Advance(time.Minute)
	require.NoError(t, x.AddExample(ctx, "book", "i need to move my flight", ttl, 3))
	require.NoError(t, x.AddExample(ctx, "cancel", "drop my booking", ttl, 3))
	require.Equal(t, map[string]int{"i need to move my flight": 2}, texts("book"))
	require.Equal(t, map[string]int{"drop my booking": 1}, texts("cancel"))

	// The bound: the least recently seen text goes.
	clock.Advance(time.Minute)
	require.NoError(t, x.AddExample(ctx, "book", "change my seat", ttl, 3))
	clock.Advance(time.Minute)
	require.NoError(t, x.AddExample(ctx, "book", "rebook me", ttl, 3))
	clock.Advance(time.Minute)
	require.NoError(t, x.AddExample(ctx, "book", "i need to move my flight", ttl, 3))
	clock.Advance(time.Minute)
	require.NoError(t, x.AddExample(ctx, "book", "another date please", ttl, 3))
	require.Equal(t, map[string]int{"rebook me": 1, "i need to move my flight": 3, "another date please": 1}, texts("book"))

	require.NoError(t, x.DropExamples(ctx, "book", []string{"rebook me", "not there"}))
	require.Equal(t, map[string]int{"i need to move my flight": 3, "another date please": 1}, texts("book"))

	// Past the TTL nothing is listed.
	clock.Advance(ttl)
	require.Empty(t, texts("book"))
	require.Empty(t, texts("cancel"))
}
