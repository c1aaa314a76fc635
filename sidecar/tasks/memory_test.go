package tasks

import (
	"context"
	"fmt"
	"reflect"
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

// BenchmarkMemoryMessages is one message's round in the memory store as the gateway makes it:
// its messageId reserved, then settled with the task it was answered with, 16 owners in turn
// each holding the per-owner maximum of records already (the steady state of a busy store).
func BenchmarkMemoryMessages(b *testing.B) {
	const owners, perOwner = 16, 10000
	m := NewMemory(1 << 20)
	ctx := context.Background()
	os := make([]Owner, owners)
	for i := range os {
		os[i] = Owner{Issuer: "https://idp.example.com/", Subject: fmt.Sprintf("client-%02d", i), Tenant: "acme"}
	}
	now := time.Now()
	n := 0
	round := func() {
		s := Sent{MessageID: fmt.Sprintf("msg-%09d", n), Owner: os[n%owners], Started: now, Deadline: now.Add(time.Minute),
			Digest: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"}
		n++
		held, fresh, err := m.Reserve(ctx, s, 24*time.Hour, perOwner)
		if err != nil || !fresh {
			b.Fatal(err, fresh)
		}
		held.TaskID, held.ContextID, held.Capability, held.Handler = "task-1", "ctx-1", "cap", "handler"
		if err := m.Settle(ctx, held, 24*time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	for range owners * perOwner {
		round()
	}
	b.ReportAllocs()
	for b.Loop() {
		round()
	}
}

// TestMemoryMessagesBounded: the memory store keeps at most its maximum of message records over
// all owners: a full store refuses an owner with no record of its own, an owner with records
// makes room by dropping its oldest, and a released or pruned record gives its room back.
func TestMemoryMessagesBounded(t *testing.T) {
	now := time.Now()
	m := NewMemory(3, WithClock(func() time.Time { return now }))
	ctx := t.Context()
	a, b, c := Owner{Subject: "a"}, Owner{Subject: "b"}, Owner{Subject: "c"}
	reserve := func(o Owner, id string) (bool, error) {
		_, fresh, err := m.Reserve(ctx, Sent{MessageID: id, Owner: o, Started: now, Deadline: now.Add(time.Minute)}, time.Hour, 10)
		return fresh, err
	}
	for _, r := range []struct {
		o  Owner
		id string
	}{{a, "1"}, {a, "2"}, {b, "1"}} {
		fresh, err := reserve(r.o, r.id)
		require.NoError(t, err)
		require.True(t, fresh)
	}
	_, err := reserve(c, "1")
	require.ErrorIs(t, err, ErrUnavailable, "full, and c has nothing to drop")
	fresh, err := reserve(a, "3")
	require.NoError(t, err)
	require.True(t, fresh)
	fresh, err = reserve(a, "1")
	require.NoError(t, err)
	require.True(t, fresh, "a's oldest was dropped to make room: its id is new again")
	held, fresh, err := m.Reserve(ctx, Sent{MessageID: "1", Owner: b}, time.Hour, 10)
	require.NoError(t, err)
	require.False(t, fresh)
	require.NoError(t, m.Release(ctx, held))
	fresh, err = reserve(c, "1")
	require.NoError(t, err)
	require.True(t, fresh, "b's released record gave its room to c")
	now = now.Add(2 * time.Hour)
	for _, o := range []Owner{a, b} {
		fresh, err = reserve(o, "9")
		require.NoError(t, err, "%v: its own expired records are pruned first", o)
		require.True(t, fresh)
	}
}

// TestSentRecordRoundTrip: the memory store's compact record gives back exactly the Sent it
// was made from (the owner and id from its keys; the deadline's instant and location), for
// deadlines an offset from Started gives back and for those it does not (zero times, other
// locations, a monotonic reading on one side only), and it stays within the 128 bytes a map
// keeps in place.
func TestSentRecordRoundTrip(t *testing.T) {
	now := time.Now() // with a monotonic reading
	wall := now.Round(0)
	utc := time.Date(2031, 5, 6, 7, 8, 9, 10, time.UTC)
	o := Owner{Issuer: "https://idp.example.com/", Subject: "client-1", Tenant: "acme"}
	pairs := [][2]time.Time{
		{now, now.Add(time.Minute)}, {now, now}, {now, now.Add(-time.Hour)}, {wall, wall.Add(30 * time.Second)},
		{now, wall.Add(time.Minute)}, {wall, now.Add(time.Minute)}, {utc, utc.Add(time.Minute)}, {utc, utc.Local()},
		{now, time.Time{}}, {time.Time{}, now}, {time.Time{}, time.Time{}}, {time.Time{}, utc},
		{utc, utc.AddDate(300, 0, 0)}, {utc, time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
	}
	for i, p := range pairs {
		s := Sent{MessageID: fmt.Sprintf("m-%d", i), Owner: o, Started: p[0], Deadline: p[1], Digest: "d", Done: i%2 == 0,
			TaskID: "t", ContextID: "c", Capability: "cap", Handler: "h", Lost: i%3 == 0}
		got := sentOf(ownerKeyOf(o), s.MessageID, recordOf(s))
		require.True(t, got.Deadline.Equal(s.Deadline), "%d: %v, want %v", i, got.Deadline, s.Deadline)
		require.Equal(t, s.Deadline.Location(), got.Deadline.Location(), "%d", i)
		got.Deadline = s.Deadline // the instant and location are the same; a monotonic reading may not be
		require.True(t, got == s, "%d: %+v\n%+v", i, got, s)
	}
	require.LessOrEqual(t, reflect.TypeFor[sentRecord]().Size(), uintptr(128))
}
