package routing_test

import (
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// TestPendingPerCaller: an owner holds at most limits.pending_per_caller clarification tasks; one
// more is refused until one is answered, while other owners are unaffected.
func TestPendingPerCaller(t *testing.T) {
	d := testutil.LoadDeployment(t, "")
	d.Config.Limits.PendingPerCaller = 2
	srv := testutil.Start(t, d)
	c := jsonrpc(t, srv, partner)
	first := sendTask(t, c, text("hello there"))
	require.Equal(t, a2a.TaskStateInputRequired, first.Status.State)
	second := sendTask(t, c, text("good morning"))
	require.Equal(t, a2a.TaskStateInputRequired, second.Status.State)
	_, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: text("hi again")})
	require.ErrorIs(t, err, a2a.ErrInvalidRequest)
	require.Contains(t, err.Error(), "too many of your tasks await clarification (limit 2)")

	// Asked again on the same clarification task: not a new one.
	again := sendTask(t, c, continuing(text("hmm"), first.ID))
	require.Equal(t, first.ID, again.ID)

	// Answering one frees its place.
	done := sendTask(t, c, continuing(text("lookup-invoice"), second.ID))
	require.NotEqual(t, a2a.TaskStateInputRequired, done.Status.State)
	third := sendTask(t, c, text("hi again"))
	require.Equal(t, a2a.TaskStateInputRequired, third.Status.State)

	// Another owner has places of its own.
	other := jsonrpc(t, srv, testutil.TokenOptions{Subject: "partner-2", Tenant: "acme", Scopes: []string{"recon.run"}})
	require.Equal(t, a2a.TaskStateInputRequired, sendTask(t, other, text("hello there")).Status.State)
}
