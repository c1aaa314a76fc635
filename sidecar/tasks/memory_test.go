package tasks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMemoryBindOwnership(t *testing.T) {
	ctx := t.Context()
	m := NewMemory(0)
	b := Binding{TaskID: "t1", Capability: "reconcile-invoice", Handler: "recon", Subject: "alice", Tenant: "acme", CreatedAt: time.Unix(100, 0)}
	require.NoError(t, m.Bind(ctx, b))

	got, ok, err := m.Lookup(ctx, "t1")
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, got.OwnedBy("alice", "acme"))
	require.False(t, got.OwnedBy("alice", "globex"))
	require.False(t, got.OwnedBy("mallory", "acme"))

	// Same owner and target: an update. Another owner or handler: conflict.
	require.NoError(t, m.Bind(ctx, b))
	other := b
	other.Subject = "mallory"
	require.ErrorIs(t, m.Bind(ctx, other), ErrConflict)
	moved := b
	moved.Handler = "elsewhere"
	require.ErrorIs(t, m.Bind(ctx, moved), ErrConflict)

	// A pending clarification task may be re-bound to the chosen capability.
	require.NoError(t, m.Bind(ctx, Binding{TaskID: "c1", Subject: "alice", Tenant: "acme", Pending: true, Candidates: []string{"a", "b"}}))
	require.NoError(t, m.Bind(ctx, Binding{TaskID: "c1", Subject: "alice", Tenant: "acme", Capability: "a", Handler: "h"}))

	owned, err := m.Owned(ctx, "alice", "acme")
	require.NoError(t, err)
	require.Len(t, owned, 2)
	none, err := m.Owned(ctx, "mallory", "acme")
	require.NoError(t, err)
	require.Empty(t, none)

	require.NoError(t, m.Delete(ctx, "t1"))
	_, ok, err = m.Lookup(ctx, "t1")
	require.NoError(t, err)
	require.False(t, ok)
}

func TestMemoryBounded(t *testing.T) {
	m := NewMemory(2)
	ctx := t.Context()
	require.NoError(t, m.Bind(ctx, Binding{TaskID: "a", Subject: "s"}))
	require.NoError(t, m.Bind(ctx, Binding{TaskID: "b", Subject: "s"}))
	require.ErrorIs(t, m.Bind(ctx, Binding{TaskID: "c", Subject: "s"}), ErrUnavailable)
}

func TestMemoryUsageWindow(t *testing.T) {
	ctx := t.Context()
	m := NewMemory(0)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, m.RecordCall(ctx, "old", now.Add(-40*24*time.Hour)))
	require.NoError(t, m.RecordCall(ctx, "recent", now.Add(-2*24*time.Hour)))
	require.NoError(t, m.RecordCall(ctx, "recent", now.Add(-1*time.Hour)))

	u, err := m.Usage(ctx, "old", now)
	require.NoError(t, err)
	require.Equal(t, int64(0), u.Calls30d)
	require.Equal(t, int64(1), u.Total)

	u, err = m.Usage(ctx, "recent", now)
	require.NoError(t, err)
	require.Equal(t, int64(2), u.Calls30d)
	require.Equal(t, now.Add(-time.Hour), u.LastUsed)

	u, err = m.Usage(ctx, "never", now)
	require.NoError(t, err)
	require.Zero(t, u.Total)
	require.True(t, u.LastUsed.IsZero())
}
