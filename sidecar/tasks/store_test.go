package tasks

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clockOffsets are where the conformance suite sets the store's clock
// (WithClock) against the real one, and so against the clock of a Redis,
// which expires keys by its own: a store must not compare a time taken from
// its clock with another machine's (docs/operations.md, "Clocks").
var clockOffsets = []struct {
	name   string
	offset time.Duration
}{
	{"clock now", 0},
	{"clock a year behind", -365 * 24 * time.Hour},
	{"clock a year ahead", 365 * 24 * time.Hour},
}

// testStore is the conformance suite every Store passes, run with the
// store's clock at each of clockOffsets. newStore returns an empty store
// for one subtest.
func testStore(t *testing.T, newStore func(t *testing.T, opts ...Option) Store) {
	for _, c := range clockOffsets {
		t.Run(c.name, func(t *testing.T) {
			now := func() time.Time { return time.Now().Add(c.offset) }
			testStoreAt(t, now, func(t *testing.T, opts ...Option) Store {
				return newStore(t, append([]Option{WithClock(now)}, opts...)...)
			})
		})
	}
}

// testStoreAt is the conformance suite with the store's clock at now: every
// time the suite gives a store is taken from now, never a calendar date.
func testStoreAt(t *testing.T, now func() time.Time, newStore func(t *testing.T, opts ...Option) Store) {
	newClock := func() *clock { return &clock{now: now().Truncate(time.Millisecond)} }
	testMessages(t, newClock, newStore)
	t.Run("bind ownership", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		b := Binding{TaskID: "t1", Capability: "reconcile-invoice", Handler: "recon", Subject: "alice", Tenant: "acme", CreatedAt: time.Unix(100, 0)}
		require.NoError(t, m.Bind(ctx, b))

		got, ok, err := m.Lookup(ctx, "t1")
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, got.OwnedBy(Owner{Subject: "alice", Tenant: "acme"}))
		require.False(t, got.OwnedBy(Owner{Subject: "alice", Tenant: "globex"}))
		require.False(t, got.OwnedBy(Owner{Subject: "mallory", Tenant: "acme"}))

		// Same owner and target: an update. Another owner or handler: conflict.
		require.NoError(t, m.Bind(ctx, b))
		other := b
		other.Subject = "mallory"
		require.ErrorIs(t, m.Bind(ctx, other), ErrConflict)
		otherTenant := b
		otherTenant.Tenant = "globex"
		require.ErrorIs(t, m.Bind(ctx, otherTenant), ErrConflict)
		moved := b
		moved.Handler = "elsewhere"
		require.ErrorIs(t, m.Bind(ctx, moved), ErrConflict)
		recap := b
		recap.Capability = "lookup-invoice"
		require.ErrorIs(t, m.Bind(ctx, recap), ErrConflict)
		got, _, err = m.Lookup(ctx, "t1")
		require.NoError(t, err)
		requireBinding(t, b, got) // a refused Bind changed nothing

		// A pending clarification task may be re-bound to the chosen capability.
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "c1", Subject: "alice", Tenant: "acme", Pending: true, Candidates: []string{"a", "b"}}))
		require.ErrorIs(t, m.Bind(ctx, Binding{TaskID: "c1", Subject: "mallory", Tenant: "acme", Capability: "a", Handler: "h"}), ErrConflict)
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "c1", Subject: "alice", Tenant: "acme", Capability: "a", Handler: "h"}))
		got, ok, err = m.Lookup(ctx, "c1")
		require.NoError(t, err)
		require.True(t, ok)
		require.False(t, got.Pending)
		require.Empty(t, got.Candidates)
		// Once bound, it is no longer pending: it cannot move again.
		require.ErrorIs(t, m.Bind(ctx, Binding{TaskID: "c1", Subject: "alice", Tenant: "acme", Capability: "b", Handler: "h"}), ErrConflict)

		owned, err := m.Owned(ctx, Owner{Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		require.Len(t, owned, 2)
		none, err := m.Owned(ctx, Owner{Subject: "mallory", Tenant: "acme"})
		require.NoError(t, err)
		require.Empty(t, none)
		none, err = m.Owned(ctx, Owner{Subject: "alice", Tenant: "globex"})
		require.NoError(t, err)
		require.Empty(t, none)

		require.NoError(t, m.Delete(ctx, "t1"))
		_, ok, err = m.Lookup(ctx, "t1")
		require.NoError(t, err)
		require.False(t, ok)
		owned, err = m.Owned(ctx, Owner{Subject: "alice", Tenant: "acme"})
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

		b := Binding{TaskID: "task:with spaces/ünïcode", ContextID: "ctx-1", Subject: "user:1 with space", Tenant: "acme:eu",
			Pending: true, Candidates: []string{"lookup-invoice", "reconcile-invoice"}, CreatedAt: now().Truncate(time.Second).Add(123456789)}
		require.NoError(t, m.Bind(ctx, b))
		got, ok, err := m.Lookup(ctx, b.TaskID)
		require.NoError(t, err)
		require.True(t, ok)
		requireBinding(t, b, got)

		// A rebind without a created time keeps the first one.
		b2 := b
		b2.CreatedAt = time.Time{}
		b2.Pending, b2.Candidates = false, nil
		b2.Capability, b2.Handler = "lookup-invoice", "invoices.lookup"
		require.NoError(t, m.Bind(ctx, b2))
		got, _, err = m.Lookup(ctx, b.TaskID)
		require.NoError(t, err)
		b2.CreatedAt = b.CreatedAt
		requireBinding(t, b2, got)

		// Owners whose names would collide if joined naively stay apart.
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "x1", Subject: "a:b", Tenant: "c"}))
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "x2", Subject: "b", Tenant: "c:a"}))
		owned, err := m.Owned(ctx, Owner{Subject: "a:b", Tenant: "c"})
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
		model := map[string]Binding{}
		bind := func(b Binding) {
			require.NoError(t, m.Bind(ctx, b))
			if old, ok := model[b.TaskID]; ok && b.CreatedAt.IsZero() {
				b.CreatedAt = old.CreatedAt
			}
			model[b.TaskID] = b
		}
		contexts := []string{"", "ctx-a", "ctx-b:x{y}"}
		for i := range 90 {
			b := Binding{TaskID: fmt.Sprintf("t%02d", i), ContextID: contexts[i%3], Capability: "x", Handler: "h",
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
		owners := []Owner{{Issuer: "i", Subject: "alice", Tenant: "acme"}, {Issuer: "i", Subject: "alice", Tenant: "acme", Legacy: true},
			{Subject: "alice", Tenant: "acme"}, {Issuer: "i", Subject: "bob", Tenant: "acme"}}
		for _, o := range owners {
			for _, contextID := range contexts {
				var want []Binding
				for _, b := range model {
					if b.OwnedBy(o) && (contextID == "" || b.ContextID == contextID) {
						want = append(want, b)
					}
				}
				slices.SortFunc(want, func(a, b Binding) int { return PositionOf(a).Compare(PositionOf(b)) })
				for _, limit := range []int{1, 7, 100} {
					var got []Binding
					var after *Position
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
					require.Equal(t, taskIDs(want), taskIDs(got), "%+v in %q by %d", o, contextID, limit)
					for i := range got {
						requireBinding(t, want[i], got[i])
					}
				}
			}
		}
		none, err := m.OwnedPage(ctx, Owner{Tenant: "acme"}, nil, "", 10)
		require.NoError(t, err)
		require.Empty(t, none.Bindings)
	})

	t.Run("owned newest first", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		base := now().Add(-30 * 24 * time.Hour).Truncate(time.Second)
		for i, id := range []string{"b", "a", "d", "c"} {
			require.NoError(t, m.Bind(ctx, Binding{TaskID: id, Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h",
				CreatedAt: base.Add(time.Duration(i/2) * time.Hour)}))
		}
		owned, err := m.Owned(ctx, Owner{Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		var ids []string
		for _, b := range owned {
			ids = append(ids, b.TaskID)
		}
		byDigest := func(x, y string) []string { // same created time: the task id's digest orders
			if PositionOf(Binding{TaskID: x}).Compare(PositionOf(Binding{TaskID: y})) > 0 {
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
				errs[i] = m.Bind(ctx, Binding{TaskID: "race", Subject: fmt.Sprintf("caller-%d", i), Tenant: "acme", Capability: "x", Handler: "h"})
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
			require.ErrorIs(t, err, ErrConflict)
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
		alice := Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}
		b := Binding{TaskID: "t1", Capability: "x", Handler: "h", Issuer: alice.Issuer, Subject: "alice", Tenant: "acme", CreatedAt: time.Unix(100, 0)}
		require.NoError(t, m.Bind(ctx, b))
		for name, issuer := range map[string]string{"another issuer": "https://idp-b", "no issuer": "", "issuer differing in case": "https://IDP-A"} {
			other := b
			other.Issuer = issuer
			require.ErrorIs(t, m.Bind(ctx, other), ErrConflict, name)
			require.ErrorIs(t, m.BindPending(ctx, Binding{TaskID: "t1", Issuer: issuer, Subject: "alice", Tenant: "acme", Pending: true}, time.Minute, 10), ErrConflict, name)
		}
		require.NoError(t, m.Bind(ctx, b), "the same owner re-binds")
		got, ok, err := m.Lookup(ctx, "t1")
		require.NoError(t, err)
		require.True(t, ok)
		requireBinding(t, b, got)
		require.Equal(t, alice, got.Owner())

		owned, err := m.Owned(ctx, alice)
		require.NoError(t, err)
		require.Equal(t, []string{"t1"}, taskIDs(owned))
		for _, o := range []Owner{
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
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "y1", Issuer: "i:s", Subject: "t", Tenant: "u"}))
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "y2", Issuer: "i", Subject: "t", Tenant: "s:u"}))
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "y3", Issuer: "i", Subject: "s:t", Tenant: "u"}))
		for o, want := range map[Owner]string{
			{Issuer: "i:s", Subject: "t", Tenant: "u"}: "y1",
			{Issuer: "i", Subject: "t", Tenant: "s:u"}: "y2",
			{Issuer: "i", Subject: "s:t", Tenant: "u"}: "y3",
		} {
			owned, err := m.Owned(ctx, o)
			require.NoError(t, err)
			require.Equal(t, []string{want}, taskIDs(owned), "%+v", o)
		}
	})

	t.Run("legacy bindings", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		base := now().Add(-30 * 24 * time.Hour).Truncate(time.Second)
		// Bindings without an issuer, as written before issuers were recorded.
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "old1", Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h", CreatedAt: base}))
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "old2", Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h", CreatedAt: base.Add(2 * time.Hour)}))
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "old-globex", Subject: "alice", Tenant: "globex", Capability: "x", Handler: "h", CreatedAt: base}))
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "new", Issuer: "https://idp-a", Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h", CreatedAt: base.Add(time.Hour)}))

		tests := []struct {
			name  string
			owner Owner
			want  []string
		}{
			{"issuer, not legacy", Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}, []string{"new"}},
			{"issuer and legacy", Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme", Legacy: true}, []string{"old2", "new", "old1"}},
			{"another issuer, legacy", Owner{Issuer: "https://idp-b", Subject: "alice", Tenant: "acme", Legacy: true}, []string{"old2", "old1"}},
			{"legacy, other tenant", Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "globex", Legacy: true}, []string{"old-globex"}},
			{"legacy, other subject", Owner{Issuer: "https://idp-a", Subject: "bob", Tenant: "acme", Legacy: true}, nil},
			{"no subject", Owner{Issuer: "https://idp-a", Tenant: "acme", Legacy: true}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				owned, err := m.Owned(ctx, tt.owner)
				require.NoError(t, err)
				require.Equal(t, tt.want, taskIDs(owned))
			})
		}

		// A legacy binding is re-bound with the issuer it has ("").
		require.ErrorIs(t, m.Bind(ctx, Binding{TaskID: "old1", Issuer: "https://idp-a", Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h"}), ErrConflict)
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "old1", Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h"}))
		require.NoError(t, m.Delete(ctx, "old2"))
		owned, err := m.Owned(ctx, Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme", Legacy: true})
		require.NoError(t, err)
		require.Equal(t, []string{"new", "old1"}, taskIDs(owned))
	})

	t.Run("anonymous bindings are owned by nobody", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "anon", Capability: "x", Handler: "h"}))
		got, ok, err := m.Lookup(ctx, "anon")
		require.NoError(t, err)
		require.True(t, ok)
		require.False(t, got.OwnedBy(Owner{}))
		require.False(t, got.OwnedBy(Owner{Legacy: true}))
		owned, err := m.Owned(ctx, Owner{})
		require.NoError(t, err)
		require.Empty(t, owned)
		require.ErrorIs(t, m.BindPending(ctx, Binding{TaskID: "p", Pending: true}, time.Minute, 10), ErrTooManyPending, "anonymous callers hold no pending task")
		_, ok, err = m.Lookup(ctx, "p")
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("pending bindings expire", func(t *testing.T) {
		ctx := t.Context()
		clk := newClock()
		m := newStore(t, WithClock(clk.Now))
		alice := Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}
		p := Binding{TaskID: "p1", ContextID: "ctx", Issuer: alice.Issuer, Subject: "alice", Tenant: "acme", Pending: true, Candidates: []string{"a", "b"}, CreatedAt: clk.Now()}
		require.NoError(t, m.BindPending(ctx, p, 10*time.Minute, 10))
		got, ok, err := m.Lookup(ctx, "p1")
		require.NoError(t, err)
		require.True(t, ok)
		p.ExpiresAt = clk.Now().Add(10 * time.Minute)
		requireBinding(t, p, got)
		require.True(t, p.ExpiresAt.Equal(got.ExpiresAt), "expires %s, want %s", got.ExpiresAt, p.ExpiresAt)

		// A second pending task, resolved (plain Bind) before it expires: it
		// loses its expiry.
		require.NoError(t, m.BindPending(ctx, Binding{TaskID: "p2", Issuer: alice.Issuer, Subject: "alice", Tenant: "acme", Pending: true, CreatedAt: clk.Now()}, 10*time.Minute, 10))
		resolved := Binding{TaskID: "p2", Issuer: alice.Issuer, Subject: "alice", Tenant: "acme", Capability: "a", Handler: "h"}
		require.NoError(t, m.Bind(ctx, resolved))
		got, _, err = m.Lookup(ctx, "p2")
		require.NoError(t, err)
		require.False(t, got.Pending)
		require.True(t, got.ExpiresAt.IsZero())

		clk.Advance(10*time.Minute - time.Millisecond)
		_, ok, err = m.Lookup(ctx, "p1")
		require.NoError(t, err)
		require.True(t, ok, "not expired a millisecond before")
		owned, err := m.Owned(ctx, alice)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"p1", "p2"}, taskIDs(owned), "p2 re-bound without a created time keeps its place")

		clk.Advance(time.Millisecond)
		_, ok, err = m.Lookup(ctx, "p1")
		require.NoError(t, err)
		require.False(t, ok, "expired")
		owned, err = m.Owned(ctx, alice)
		require.NoError(t, err)
		require.Equal(t, []string{"p2"}, taskIDs(owned), "the resolved task stays")

		// An expired task id is free again, for anyone.
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "p1", Issuer: "https://idp-b", Subject: "mallory", Tenant: "acme", Capability: "a", Handler: "h"}))
		got, ok, err = m.Lookup(ctx, "p1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "mallory", got.Subject)
		require.True(t, got.ExpiresAt.IsZero())
		owned, err = m.Owned(ctx, alice)
		require.NoError(t, err)
		require.Equal(t, []string{"p2"}, taskIDs(owned))
	})

	t.Run("pending bindings are capped per owner", func(t *testing.T) {
		ctx := t.Context()
		clk := newClock()
		m := newStore(t, WithClock(clk.Now))
		const ttl, limit = time.Minute, 3
		pending := func(id, issuer string) Binding {
			return Binding{TaskID: id, Issuer: issuer, Subject: "alice", Tenant: "acme", Pending: true, Candidates: []string{"a", "b"}}
		}
		const a = "https://idp-a"
		for _, id := range []string{"p1", "p2", "p3"} {
			require.NoError(t, m.BindPending(ctx, pending(id, a), ttl, limit))
		}
		require.ErrorIs(t, m.BindPending(ctx, pending("p4", a), ttl, limit), ErrTooManyPending)
		_, ok, err := m.Lookup(ctx, "p4")
		require.NoError(t, err)
		require.False(t, ok, "a refused BindPending writes nothing")

		require.NoError(t, m.BindPending(ctx, pending("p1", a), ttl, limit), "re-asking on a held task is not a new one")
		require.NoError(t, m.BindPending(ctx, pending("p4", "https://idp-b"), ttl, limit), "another issuer's user is another owner")
		require.NoError(t, m.BindPending(ctx, Binding{TaskID: "p5", Issuer: a, Subject: "alice", Tenant: "globex", Pending: true}, ttl, limit), "another tenant is another owner")
		require.ErrorIs(t, m.BindPending(ctx, pending("p4", a), ttl, limit), ErrConflict, "another owner's task id")

		// Resolving or deleting a pending task frees its place.
		require.NoError(t, m.Bind(ctx, Binding{TaskID: "p1", Issuer: a, Subject: "alice", Tenant: "acme", Capability: "a", Handler: "h"}))
		require.NoError(t, m.BindPending(ctx, pending("p6", a), ttl, limit))
		require.ErrorIs(t, m.BindPending(ctx, pending("p7", a), ttl, limit), ErrTooManyPending)
		require.NoError(t, m.Delete(ctx, "p2"))
		require.NoError(t, m.BindPending(ctx, pending("p7", a), ttl, limit))
		require.ErrorIs(t, m.BindPending(ctx, pending("p8", a), ttl, limit), ErrTooManyPending)

		// So does expiry.
		clk.Advance(ttl)
		for _, id := range []string{"p8", "p9", "p10"} {
			require.NoError(t, m.BindPending(ctx, pending(id, a), ttl, limit))
		}
		require.ErrorIs(t, m.BindPending(ctx, pending("p11", a), ttl, limit), ErrTooManyPending)
		owned, err := m.Owned(ctx, Owner{Issuer: a, Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"p1", "p8", "p9", "p10"}, taskIDs(owned))

		// Misuse is refused.
		require.ErrorIs(t, m.BindPending(ctx, pending("q1", "https://idp-c"), ttl, 0), ErrTooManyPending)
		err = m.BindPending(ctx, Binding{TaskID: "q2", Issuer: a, Subject: "bob", Capability: "a", Handler: "h"}, ttl, limit)
		require.Error(t, err, "not pending")
		require.NotErrorIs(t, err, ErrTooManyPending)
		require.Error(t, m.BindPending(ctx, Binding{TaskID: "q3", Issuer: a, Subject: "bob", Pending: true}, 0, limit), "no ttl")
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
				errs[i] = m.BindPending(ctx, Binding{TaskID: fmt.Sprintf("c%d", i), Issuer: "i", Subject: "alice", Tenant: "acme", Pending: true}, time.Minute, limit)
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
				continue
			}
			require.ErrorIs(t, err, ErrTooManyPending)
		}
		require.Equal(t, limit, ok)
		owned, err := m.Owned(ctx, Owner{Issuer: "i", Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		require.Len(t, owned, limit)
	})

	t.Run("contexts have owners", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		alice := Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}
		_, ok, err := m.LookupContext(ctx, "ctx-1")
		require.NoError(t, err)
		require.False(t, ok, "an unknown context is nobody's")

		mine := Context{ContextID: "ctx-1", Issuer: alice.Issuer, Subject: alice.Subject, Tenant: alice.Tenant, CreatedAt: time.Unix(100, 0).UTC()}
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
		for _, o := range []Owner{
			{Issuer: alice.Issuer, Subject: "mallory", Tenant: "acme"},
			{Issuer: alice.Issuer, Subject: "alice", Tenant: "globex"},
			{Issuer: "https://idp-b", Subject: "alice", Tenant: "acme"},
			{Subject: "alice", Tenant: "acme"},
		} {
			held, err := m.ClaimContext(ctx, Context{ContextID: "ctx-1", Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant})
			require.NoError(t, err)
			require.Equal(t, mine, held)
			require.False(t, held.OwnedBy(o), "%+v", o)
			require.False(t, held.OwnedBy(Owner{Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant, Legacy: true}))
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
		held, err = m.ClaimContext(ctx, Context{ContextID: "ctx-anon"})
		require.NoError(t, err)
		require.False(t, held.OwnedBy(Owner{}))
		held, err = m.ClaimContext(ctx, Context{ContextID: "ctx-anon", Issuer: alice.Issuer, Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		require.Empty(t, held.Subject)
		require.False(t, held.OwnedBy(alice))

		// A context held without an issuer is a Legacy owner's, as a binding is.
		held, err = m.ClaimContext(ctx, Context{ContextID: "ctx-old", Subject: "alice", Tenant: "acme"})
		require.NoError(t, err)
		require.False(t, held.OwnedBy(alice))
		require.True(t, held.OwnedBy(Owner{Issuer: alice.Issuer, Subject: "alice", Tenant: "acme", Legacy: true}))
	})

	t.Run("concurrent claims of one new context", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		const n = 16
		held := make([]Context, n)
		errs := make([]error, n)
		concurrently(n, func(i int) {
			held[i], errs[i] = m.ClaimContext(ctx, Context{ContextID: "race", Issuer: "i", Subject: fmt.Sprintf("caller-%d", i), Tenant: "acme"})
		})
		won := 0
		for i := range n {
			require.NoError(t, errs[i])
			require.Equal(t, held[0].Subject, held[i].Subject, "every claimant is told the same holder")
			if held[i].OwnedBy(Owner{Issuer: "i", Subject: fmt.Sprintf("caller-%d", i), Tenant: "acme"}) {
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
// at its own clock (testStoreAt); other tests at the current time.
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
