package admission_test

import (
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/test/testutil"
)

// TestOwnerTaskOperations: the owner of a task can read, cancel, subscribe to and manage push
// configs of it, and go on in its context, with the official a2a-go v2 client on both bindings — against the builtin echo
// and against an upstream a2a-go server capgate forwards to. (HTTP+JSON task operations once
// forwarded no params at all: every handler answered a parse error.)
func TestOwnerTaskOperations(t *testing.T) {
	for _, handlers := range []string{"builtin echo", "upstream a2a-go server"} {
		d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
		d.Config.Push = config.Push{Enabled: true, AllowedURLs: []string{"https://hooks.example.com/"}}
		if handlers == "upstream a2a-go server" {
			testutil.NewUpstream(t, d).Use(d)
		}
		srv := testutil.Start(t, d)
		tok := testutil.Token(t, testutil.TokenOptions{Subject: "alice", Tenant: "acme"})
		for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolJSONRPC} {
			t.Run(handlers+"/"+string(binding), func(t *testing.T) {
				c := srv.Client(t, binding, testutil.Bearer(tok))
				ctx := t.Context()
				msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("look up invoice INV-1"))
				msg.Metadata = map[string]any{"skillId": "lookup-invoice"}
				res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
				require.NoError(t, err)
				task, ok := res.(*a2a.Task)
				require.True(t, ok, "%T", res)

				got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
				require.NoError(t, err)
				require.Equal(t, task.ID, got.ID)
				require.Equal(t, a2a.TaskStateCompleted, got.Status.State)

				_, err = c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
				require.ErrorIs(t, err, a2a.ErrTaskNotCancelable, "the handler was asked about this task")

				for _, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
					// A completed task has no execution to follow: a2a-go's handler says so
					// about this very task.
					if err != nil {
						testutil.RequireStreamRefused(t, binding, err, a2a.ErrTaskNotFound)
					}
				}

				cfg, err := c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "c-1", URL: "https://hooks.example.com/a2a"})
				require.NoError(t, err)
				require.Equal(t, task.ID, cfg.TaskID)
				one, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "c-1"})
				require.NoError(t, err)
				require.Equal(t, "https://hooks.example.com/a2a", one.URL)
				list, err := c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
				require.NoError(t, err)
				require.True(t, slices.ContainsFunc(list, func(p *a2a.PushConfig) bool { return p.ID == "c-1" }))
				require.NoError(t, c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "c-1"}))
				list, err = c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
				require.NoError(t, err)
				require.Empty(t, list)

				// The owner goes on in the task's context: a new message in it, and the list of
				// the context's tasks.
				require.NotEmpty(t, task.ContextID)
				next := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("look up invoice INV-2"))
				next.ContextID, next.Metadata = task.ContextID, map[string]any{"skillId": "lookup-invoice"}
				res, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: next})
				require.NoError(t, err)
				second, ok := res.(*a2a.Task)
				require.True(t, ok, "%T", res)
				require.Equal(t, task.ContextID, second.ContextID)
				listed, err := c.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: task.ContextID})
				require.NoError(t, err)
				require.Len(t, listed.Tasks, 2)

				// Another caller gets the task's not-found answer for each of them, and for a
				// message in the task's context.
				other := srv.Client(t, binding, testutil.Bearer(testutil.Token(t, testutil.TokenOptions{Subject: "alice", Tenant: "globex"})))
				_, err = other.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
				require.ErrorIs(t, err, a2a.ErrTaskNotFound)
				_, err = other.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "c-1"})
				require.ErrorIs(t, err, a2a.ErrTaskNotFound)
				intrude := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("look up invoice INV-3"))
				intrude.ContextID, intrude.Metadata = task.ContextID, map[string]any{"skillId": "lookup-invoice"}
				_, err = other.SendMessage(ctx, &a2a.SendMessageRequest{Message: intrude})
				require.ErrorIs(t, err, a2a.ErrTaskNotFound)
				// A filter naming the context narrows the other caller's own tasks: an empty
				// list, as for a context that does not exist.
				theirs, err := other.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: task.ContextID})
				require.NoError(t, err)
				require.Empty(t, theirs.Tasks)
				none, err := other.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: "ctx-nobody-holds"})
				require.NoError(t, err)
				require.Equal(t, none, theirs)
			})
		}
	}
}
