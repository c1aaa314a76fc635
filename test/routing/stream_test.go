package routing_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// TestStreaming: SendStreamingMessage passes the handler's events through
// (task, artifact update, status update), each as soon as it is produced,
// and binds the streamed task to its owner.
func TestStreaming(t *testing.T) {
	t.Run("builtin echo, 1.0", func(t *testing.T) {
		srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
		require.True(t, srv.PublicCard(t).Capabilities.Streaming)
		c := jsonrpc(t, srv, partner)
		var events []a2a.Event
		for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: referenceMessage()}) {
			require.NoError(t, err)
			events = append(events, ev)
		}
		task := checkEvents(t, events)
		require.Equal(t, "reconcile-invoice", reportOfParts(t, events[1].(*a2a.TaskArtifactUpdateEvent).Artifact.Parts).Capability)

		got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		require.NoError(t, err)
		require.Equal(t, a2a.TaskStateCompleted, got.Status.State)
		_, err = jsonrpc(t, srv, other).GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
	})

	t.Run("builtin echo, 0.3", func(t *testing.T) {
		srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
		tr := a2av0.NewJSONRPCTransport(a2av0.JSONRPCTransportConfig{URL: srv.URL, Client: srv.HTTP})
		params := a2aclient.ServiceParams{"authorization": {"Bearer " + testutil.Token(t, partner)}}
		var events []a2a.Event
		for ev, err := range tr.SendStreamingMessage(t.Context(), params, &a2a.SendMessageRequest{Message: referenceMessage()}) {
			require.NoError(t, err)
			events = append(events, ev)
		}
		task := checkEvents(t, events)
		got, err := tr.GetTask(t.Context(), params, &a2a.GetTaskRequest{ID: task.ID})
		require.NoError(t, err)
		require.Equal(t, task.ID, got.ID)
	})

	t.Run("upstream events arrive one by one", func(t *testing.T) {
		up := newUpstream(t, a2a.TaskStateCompleted)
		up.pace = make(chan struct{})
		cfg := financeCopy(t, "recon.v3.reconcile: builtin:echo", "recon.v3.reconcile: "+up.URL)
		srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
		up.trust(t, srv, "recon.v3.reconcile")
		c := jsonrpc(t, srv, partner)

		// Each event after the first is produced only once the previous one
		// has reached the client: a buffered relay would never see the first.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		next, stop := iter.Pull2(c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: referenceMessage()}))
		defer stop()
		var events []a2a.Event
		for i := range 3 {
			if i > 0 {
				select {
				case up.pace <- struct{}{}:
				case <-ctx.Done():
					require.FailNow(t, "the upstream did not ask for its next event", "after %d events", i)
				}
			}
			ev, err, ok := next()
			require.True(t, ok, "the stream ended after %d events", i)
			require.NoError(t, err, "event %d", i)
			events = append(events, ev)
		}
		_, _, ok := next()
		require.False(t, ok, "no event after the final status update")
		checkEvents(t, events)
		require.Equal(t, "reconcile-invoice", reportOfParts(t, events[1].(*a2a.TaskArtifactUpdateEvent).Artifact.Parts).Capability)
	})
}

// checkEvents requires task, artifact update, completed status update, all
// on one task, and returns the task.
func checkEvents(t testing.TB, events []a2a.Event) *a2a.Task {
	t.Helper()
	require.Len(t, events, 3, "%v", events)
	task, ok := events[0].(*a2a.Task)
	require.True(t, ok, "first event is the task, got %T", events[0])
	art, ok := events[1].(*a2a.TaskArtifactUpdateEvent)
	require.True(t, ok, "second event is an artifact update, got %T", events[1])
	st, ok := events[2].(*a2a.TaskStatusUpdateEvent)
	require.True(t, ok, "third event is a status update, got %T", events[2])
	require.Equal(t, task.ID, art.TaskID)
	require.Equal(t, task.ID, st.TaskID)
	require.Equal(t, a2a.TaskStateCompleted, st.Status.State)
	return task
}
