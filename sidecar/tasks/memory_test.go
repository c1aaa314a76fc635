package tasks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMemoryBounded(t *testing.T) {
	m := NewMemory(2)
	ctx := t.Context()
	require.NoError(t, m.Bind(ctx, Binding{TaskID: "a", Subject: "s"}))
	require.NoError(t, m.Bind(ctx, Binding{TaskID: "b", Subject: "s"}))
	require.ErrorIs(t, m.Bind(ctx, Binding{TaskID: "c", Subject: "s"}), ErrUnavailable)
}

// Expired pending bindings give their room back to a full store.
func TestMemoryBoundedSweepsExpired(t *testing.T) {
	now := time.Now()
	m := NewMemory(2, WithClock(func() time.Time { return now }))
	ctx := t.Context()
	require.NoError(t, m.BindPending(ctx, Binding{TaskID: "p", Subject: "s", Pending: true}, time.Minute, 10))
	require.NoError(t, m.Bind(ctx, Binding{TaskID: "a", Subject: "s"}))
	require.ErrorIs(t, m.Bind(ctx, Binding{TaskID: "b", Subject: "s"}), ErrUnavailable)
	now = now.Add(time.Minute)
	require.NoError(t, m.Bind(ctx, Binding{TaskID: "b", Subject: "s"}))
	require.Len(t, m.bindings, 2)
	require.Empty(t, m.pending, "the expired binding left every index")
	require.NotContains(t, m.byOwner[ownerKey{subject: "s"}], "p")
}
