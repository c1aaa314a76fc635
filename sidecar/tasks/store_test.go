package tasks

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testStore is the conformance suite every Store passes. newStore returns
// an empty store for one subtest.
func testStore(t *testing.T, newStore func(t *testing.T) Store) {
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

		owned, err := m.Owned(ctx, "alice", "acme")
		require.NoError(t, err)
		require.Len(t, owned, 2)
		none, err := m.Owned(ctx, "mallory", "acme")
		require.NoError(t, err)
		require.Empty(t, none)
		none, err = m.Owned(ctx, "alice", "globex")
		require.NoError(t, err)
		require.Empty(t, none)

		require.NoError(t, m.Delete(ctx, "t1"))
		_, ok, err = m.Lookup(ctx, "t1")
		require.NoError(t, err)
		require.False(t, ok)
		owned, err = m.Owned(ctx, "alice", "acme")
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
			Pending: true, Candidates: []string{"lookup-invoice", "reconcile-invoice"}, CreatedAt: time.Date(2026, 5, 1, 10, 0, 0, 123456789, time.UTC)}
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
		owned, err := m.Owned(ctx, "a:b", "c")
		require.NoError(t, err)
		require.Len(t, owned, 1)
		require.Equal(t, "x1", owned[0].TaskID)
	})

	t.Run("owned newest first", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		for i, id := range []string{"b", "a", "d", "c"} {
			require.NoError(t, m.Bind(ctx, Binding{TaskID: id, Subject: "alice", Tenant: "acme", Capability: "x", Handler: "h",
				CreatedAt: base.Add(time.Duration(i/2) * time.Hour)}))
		}
		owned, err := m.Owned(ctx, "alice", "acme")
		require.NoError(t, err)
		var ids []string
		for _, b := range owned {
			ids = append(ids, b.TaskID)
		}
		require.Equal(t, []string{"c", "d", "a", "b"}, ids, "newest first, then by id")
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

	t.Run("usage window", func(t *testing.T) {
		ctx := t.Context()
		m := newStore(t)
		now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
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
}

// requireBinding compares bindings, times by instant.
func requireBinding(t *testing.T, want, got Binding) {
	t.Helper()
	require.True(t, want.CreatedAt.Equal(got.CreatedAt), "created %s, want %s", got.CreatedAt, want.CreatedAt)
	want.CreatedAt, got.CreatedAt = time.Time{}, time.Time{}
	if len(want.Candidates) == 0 {
		want.Candidates = nil
	}
	if len(got.Candidates) == 0 {
		got.Candidates = nil
	}
	require.Equal(t, want, got)
}
