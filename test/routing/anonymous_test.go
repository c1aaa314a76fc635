package routing_test

import (
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/test/testutil"
)

// With anonymous_public, an anonymous caller may run public capabilities
// that need no scopes. When its message is unclear it gets a clarification
// as a message, never a task: a task owned by "nobody" would be shared by
// every anonymous caller.
func TestAnonymousClarificationIsAMessage(t *testing.T) {
	cfg := financeCopy(t, "anonymous_public: false", "anonymous_public: true")
	store := tasks.NewMemory(0)
	srv := startWithStore(t, testutil.LoadDeployment(t, cfg), store)
	c := srv.Client(t, a2a.TransportProtocolJSONRPC)

	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: text("what can you do")})
	require.NoError(t, err)
	msg, ok := res.(*a2a.Message)
	require.True(t, ok, "a message, not a task: %T", res)
	require.Empty(t, msg.TaskID)
	require.Equal(t, a2a.MessageRoleAgent, msg.Role)
	require.Len(t, msg.Parts, 2)
	require.Contains(t, msg.Parts[0].Text(), "metadata.skillId")
	data, ok := msg.Parts[1].Data().(map[string]any)
	require.True(t, ok)
	require.NotEmpty(t, data["candidates"])

	owned, err := store.Owned(t.Context(), tasks.Owner{})
	require.NoError(t, err)
	require.Empty(t, owned, "no task is bound to the anonymous caller")

	// Resent with the hint, it routes; the handler's token names "anonymous".
	task := sendTask(t, c, hinted(text("what can you do"), "lookup-invoice"))
	r := reportOf(t, task)
	require.Equal(t, "lookup-invoice", r.Capability)
	require.Equal(t, "anonymous", r.Principal)
	require.Empty(t, r.Scopes)
}

// An anonymous caller owns no task, not even one its own message created:
// bound to nobody, it would be every anonymous caller's. Reading, listing
// or continuing tasks asks for a credential.
func TestAnonymousOwnsNoTask(t *testing.T) {
	cfg := financeCopy(t, "anonymous_public: false", "anonymous_public: true")
	srv := startWithStore(t, testutil.LoadDeployment(t, cfg), tasks.NewMemory(0))
	c := srv.Client(t, a2a.TransportProtocolJSONRPC)

	task := sendTask(t, c, hinted(text("Show me invoice INV-20931"), "lookup-invoice"))
	_, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
	require.ErrorIs(t, err, a2a.ErrUnauthenticated)
	_, err = c.ListTasks(t.Context(), &a2a.ListTasksRequest{})
	require.ErrorIs(t, err, a2a.ErrUnauthenticated)
	_, err = c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID})
	require.ErrorIs(t, err, a2a.ErrUnauthenticated)
	_, err = c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: continuing(text("and the PO?"), task.ID)})
	require.ErrorIs(t, err, a2a.ErrUnauthenticated)
}
