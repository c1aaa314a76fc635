package tasks

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testMessages is the conformance suite of Messages (run by testStore on every store).
func testMessages(t *testing.T, newClock func() *clock, newStore func(t *testing.T, opts ...Option) Store) {
	const window = time.Hour
	alice := Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}

	t.Run("a message id is reserved once per owner", func(t *testing.T) {
		ctx := t.Context()
		clk := newClock()
		m := newStore(t, WithClock(clk.Now))
		s := Sent{MessageID: "m-1", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}
		got, fresh, err := m.Reserve(ctx, s, window, 10)
		require.NoError(t, err)
		require.True(t, fresh)
		require.Equal(t, InProgress, got.State(clk.Now()))

		again, fresh, err := m.Reserve(ctx, Sent{MessageID: "m-1", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Hour)}, window, 10)
		require.NoError(t, err)
		require.False(t, fresh, "the same owner's same id is the same message")
		require.True(t, again.Deadline.Equal(s.Deadline), "the first record answers")
		require.Equal(t, InProgress, again.State(clk.Now()))

		// Every other owner — another issuer, subject or tenant — sends another message.
		for _, o := range []Owner{{Issuer: "https://idp-b", Subject: "alice", Tenant: "acme"}, {Issuer: alice.Issuer, Subject: "bob", Tenant: "acme"},
			{Issuer: alice.Issuer, Subject: "alice", Tenant: "other"}, {Subject: "alice", Tenant: "acme"}} {
			_, fresh, err := m.Reserve(ctx, Sent{MessageID: "m-1", Owner: o, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 10)
			require.NoError(t, err)
			require.True(t, fresh, "owner %+v", o)
		}
		_, _, err = m.Reserve(ctx, Sent{MessageID: "m-1", Owner: Owner{Tenant: "acme"}}, window, 10)
		require.ErrorIs(t, err, ErrNoOwner, "an anonymous caller reserves nothing")

		// Settled: the record names the task; past its deadline unsettled: unknown.
		require.NoError(t, m.Settle(ctx, Sent{MessageID: "m-1", Owner: alice, Started: s.Started, Deadline: s.Deadline, TaskID: "t-1", ContextID: "c-1",
			Capability: "pay", Handler: "billing"}, window))
		got, fresh, err = m.Reserve(ctx, s, window, 10)
		require.NoError(t, err)
		require.False(t, fresh)
		require.Equal(t, Answered, got.State(clk.Now()))
		require.Equal(t, Sent{MessageID: "m-1", Owner: alice, Done: true, TaskID: "t-1", ContextID: "c-1", Capability: "pay", Handler: "billing"},
			Sent{MessageID: got.MessageID, Owner: got.Owner, Done: got.Done, TaskID: got.TaskID, ContextID: got.ContextID, Capability: got.Capability, Handler: got.Handler})
		require.True(t, got.Started.Equal(s.Started))

		// Settled as lost: unknown, whatever the deadline.
		_, fresh, err = m.Reserve(ctx, Sent{MessageID: "m-3", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Hour)}, window, 10)
		require.NoError(t, err)
		require.True(t, fresh)
		require.NoError(t, m.Settle(ctx, Sent{MessageID: "m-3", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Hour), Lost: true}, window))
		got, _, err = m.Reserve(ctx, Sent{MessageID: "m-3", Owner: alice, Started: clk.Now()}, window, 10)
		require.NoError(t, err)
		require.Equal(t, Unknown, got.State(clk.Now()))

		_, fresh, err = m.Reserve(ctx, Sent{MessageID: "m-2", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 10)
		require.NoError(t, err)
		require.True(t, fresh)
		clk.Advance(time.Minute)
		got, _, err = m.Reserve(ctx, Sent{MessageID: "m-2", Owner: alice, Started: clk.Now()}, window, 10)
		require.NoError(t, err)
		require.Equal(t, Unknown, got.State(clk.Now()), "never settled, past its deadline")

		// Released by another call than the one that reserved it: kept. By its own: the id
		// is free again.
		require.NoError(t, m.Release(ctx, Sent{MessageID: "m-2", Owner: alice, Started: clk.Now()}))
		_, fresh, err = m.Reserve(ctx, Sent{MessageID: "m-2", Owner: alice, Started: clk.Now()}, window, 10)
		require.NoError(t, err)
		require.False(t, fresh, "another call's record is kept")
		require.NoError(t, m.Release(ctx, got))
		_, fresh, err = m.Reserve(ctx, Sent{MessageID: "m-2", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 10)
		require.NoError(t, err)
		require.True(t, fresh, "a released id is a new message")
	})

	t.Run("message records last the window", func(t *testing.T) {
		ctx := t.Context()
		clk := newClock()
		m := newStore(t, WithClock(clk.Now))
		s := Sent{MessageID: "m:{1}%", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}
		_, fresh, err := m.Reserve(ctx, s, window, 10)
		require.NoError(t, err)
		require.True(t, fresh)
		clk.Advance(window - time.Millisecond)
		_, fresh, err = m.Reserve(ctx, Sent{MessageID: s.MessageID, Owner: alice, Started: clk.Now()}, window, 10)
		require.NoError(t, err)
		require.False(t, fresh, "a millisecond before the window ends")
		clk.Advance(time.Millisecond)
		_, fresh, err = m.Reserve(ctx, Sent{MessageID: s.MessageID, Owner: alice, Started: clk.Now()}, window, 10)
		require.NoError(t, err)
		require.True(t, fresh, "after the window the id is new again")
	})

	t.Run("message records are bounded per owner", func(t *testing.T) {
		ctx := t.Context()
		clk := newClock()
		m := newStore(t, WithClock(clk.Now))
		for i := range 5 {
			_, fresh, err := m.Reserve(ctx, Sent{MessageID: "m" + strconv.Itoa(i), Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 3)
			require.NoError(t, err)
			require.True(t, fresh)
			clk.Advance(time.Millisecond)
		}
		// The three newest are kept; the two oldest were dropped and are new again.
		for i, want := range []bool{true, true, false, false, false} {
			_, fresh, err := m.Reserve(ctx, Sent{MessageID: "m" + strconv.Itoa(i), Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 100)
			require.NoError(t, err)
			require.Equal(t, want, fresh, "m%d", i)
		}
	})

	t.Run("concurrent reservations of one message id", func(t *testing.T) {
		clk := newClock()
		m := newStore(t, WithClock(clk.Now))
		var fresh atomic.Int32
		concurrently(16, func(int) {
			_, ok, err := m.Reserve(t.Context(), Sent{MessageID: "race", Owner: alice, Started: clk.Now(), Deadline: clk.Now().Add(time.Minute)}, window, 10)
			if err == nil && ok {
				fresh.Add(1)
			}
		})
		require.Equal(t, int32(1), fresh.Load(), "exactly one call is the first")
	})
}
