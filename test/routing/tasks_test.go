package routing_test

import (
	"context"
	"github.com/capgate/capgate/policy/config"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/test/testutil"
)

// taskOps are every operation that names a task, run by the caller tok on
// id against srv; each returns the operation's error. The unary ones use the
// a2a-go client. The streaming ones are sent raw: capgate answers a refused
// streaming call with a plain JSON-RPC error response, which a2a-go's
// v2.3.1 client reads as an empty stream without an error.
func taskOps(t testing.TB, srv *testutil.Server, tok testutil.TokenOptions) map[string]func(ctx context.Context, id a2a.TaskID) error {
	c := jsonrpc(t, srv, tok)
	bearer := "Bearer " + testutil.Token(t, tok)
	stream := func(method string, params func(id a2a.TaskID) any) func(ctx context.Context, id a2a.TaskID) error {
		return func(_ context.Context, id a2a.TaskID) error {
			return rawStreamError(t, srv, bearer, method, params(id))
		}
	}
	return map[string]func(ctx context.Context, id a2a.TaskID) error{
		"GetTask": func(ctx context.Context, id a2a.TaskID) error {
			_, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
			return err
		},
		"CancelTask": func(ctx context.Context, id a2a.TaskID) error {
			_, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
			return err
		},
		"CreateTaskPushConfig": func(ctx context.Context, id a2a.TaskID) error {
			_, err := c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: id, ID: "cfg-1", URL: "https://hooks.example.com/a2a"})
			return err
		},
		"GetTaskPushConfig": func(ctx context.Context, id a2a.TaskID) error {
			_, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: id, ID: "cfg-1"})
			return err
		},
		"ListTaskPushConfigs": func(ctx context.Context, id a2a.TaskID) error {
			_, err := c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: id})
			return err
		},
		"DeleteTaskPushConfig": func(ctx context.Context, id a2a.TaskID) error {
			return c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: id, ID: "cfg-1"})
		},
		"SendMessage": func(ctx context.Context, id a2a.TaskID) error {
			_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: continuing(text("and the due date?"), id)})
			return err
		},
		"SubscribeToTask": stream("SubscribeToTask", func(id a2a.TaskID) any { return map[string]any{"id": id} }),
		"SendStreamingMessage": stream("SendStreamingMessage", func(id a2a.TaskID) any {
			return map[string]any{"message": continuing(text("and the due date?"), id)}
		}),
	}
}

// TestOtherCallersTask: a task id of another owner (other subject, or the
// same subject in another tenant) is answered exactly like an unknown id,
// for every operation that names a task.
func TestOtherCallersTask(t *testing.T) {
	d := testutil.LoadDeployment(t, "")
	// Push on, so that the push-config operations reach the ownership check.
	d.Config.Push = config.Push{Enabled: true, AllowedURLs: []string{"https://hooks.example.com/"}}
	srv := testutil.Start(t, d)
	owner := jsonrpc(t, srv, partner)
	bound := sendTask(t, owner, referenceMessage())
	clar := sendTask(t, owner, text("hello there"))
	require.Equal(t, a2a.TaskStateInputRequired, clar.Status.State)

	const unknown = a2a.TaskID("no-such-task")
	intruders := map[string]testutil.TokenOptions{
		"other subject": other,
		"other tenant":  {Subject: "partner-1", Tenant: "globex", Scopes: []string{"recon.run"}},
		"no tenant":     {Subject: "partner-1", Scopes: []string{"recon.run"}},
	}
	for who, tok := range intruders {
		ops := taskOps(t, srv, tok)
		for name, op := range ops {
			for kind, id := range map[string]a2a.TaskID{"bound": bound.ID, "clarification": clar.ID} {
				t.Run(who+"/"+name+"/"+kind, func(t *testing.T) {
					err := op(t.Context(), id)
					require.ErrorIs(t, err, a2a.ErrTaskNotFound)
					want := op(t.Context(), unknown)
					require.ErrorIs(t, want, a2a.ErrTaskNotFound)
					require.Equal(t, strings.ReplaceAll(want.Error(), string(unknown), "ID"), strings.ReplaceAll(err.Error(), string(id), "ID"),
						"another caller's task must be indistinguishable from an unknown one")
				})
			}
		}
	}

	// The owner still has both, untouched by the attempts.
	got, err := owner.GetTask(t.Context(), &a2a.GetTaskRequest{ID: bound.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	got, err = owner.GetTask(t.Context(), &a2a.GetTaskRequest{ID: clar.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateInputRequired, got.Status.State)
}

// TestListTasks: ListTasks returns the caller's own tasks only, bound and
// awaiting clarification, read from their handlers.
func TestListTasks(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	a := jsonrpc(t, srv, partner)
	b := jsonrpc(t, srv, other)
	globex := jsonrpc(t, srv, testutil.TokenOptions{Subject: "partner-1", Tenant: "globex"})

	a1 := sendTask(t, a, referenceMessage())
	a2 := sendTask(t, a, text("What is the status of invoice INV-1042?"))
	a3 := sendTask(t, a, text("hello there"))
	require.Equal(t, a2a.TaskStateInputRequired, a3.Status.State)
	b1 := sendTask(t, b, referenceMessage())

	ids := func(c *a2aclient.Client) []a2a.TaskID {
		t.Helper()
		res, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{})
		require.NoError(t, err)
		out := []a2a.TaskID{}
		for _, task := range res.Tasks {
			out = append(out, task.ID)
		}
		require.Equal(t, len(out), res.TotalSize)
		return out
	}
	require.ElementsMatch(t, []a2a.TaskID{a1.ID, a2.ID, a3.ID}, ids(a))
	require.ElementsMatch(t, []a2a.TaskID{b1.ID}, ids(b))
	require.Empty(t, ids(globex), "same subject, other tenant: none of partner-1@acme's tasks")
}

// TestEntitlementRecheck: entitlement is decided again at every call on a
// task. The owner who has lost the scope is refused as unauthorized (it is
// their task: not TaskNotFound); the task is theirs again once the scope is
// back.
func TestEntitlementRecheck(t *testing.T) {
	d := testutil.LoadDeployment(t, "")
	d.Config.Push = config.Push{Enabled: true, AllowedURLs: []string{"https://hooks.example.com/"}}
	srv := testutil.Start(t, d)
	task := sendTask(t, jsonrpc(t, srv, partner), referenceMessage())
	require.Equal(t, "reconcile-invoice", reportOf(t, task).Capability)

	lostOps := taskOps(t, srv, public) // partner-1@acme without recon.run
	for name, op := range lostOps {
		if strings.Contains(name, "PushConfig") {
			continue // forwarded to the handler only after the same re-check; covered by GetTask
		}
		t.Run(name, func(t *testing.T) {
			err := op(t.Context(), task.ID)
			require.ErrorIs(t, err, a2a.ErrUnauthorized)
			require.Contains(t, err.Error(), "not entitled to capability reconcile-invoice")
		})
	}
	t.Run("push config ops", func(t *testing.T) {
		for name, op := range lostOps {
			if strings.Contains(name, "PushConfig") {
				require.ErrorIs(t, op(t.Context(), task.ID), a2a.ErrUnauthorized, name)
			}
		}
	})
	t.Run("entitled again", func(t *testing.T) {
		got, err := jsonrpc(t, srv, partner).GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		require.NoError(t, err)
		require.Equal(t, task.ID, got.ID)
	})
	t.Run("a clarification reply choosing a capability no longer entitled", func(t *testing.T) {
		clar := sendTask(t, jsonrpc(t, srv, partner), text("hello there"))
		res := sendTask(t, jsonrpc(t, srv, public), continuing(text("reconcile-invoice"), clar.ID))
		// Either asked again (the reply fits nothing still offered) or routed
		// elsewhere — never to the capability the caller lost.
		if res.Status.State == a2a.TaskStateInputRequired {
			require.Equal(t, clar.ID, res.ID, "the same clarification task asks again")
			return
		}
		require.NotEqual(t, "reconcile-invoice", reportOf(t, res).Capability)
	})
}

// TestBoundTaskOfRemovedCapability: a deployment removes the capability a
// task is bound to (replaced_by a new manifest); calls on the task then
// fail with UnsupportedOperation naming the replacement, not a guess.
func TestBoundTaskOfRemovedCapability(t *testing.T) {
	store := tasks.NewMemory(0)
	before := startWithStore(t, testutil.LoadDeployment(t, ""), store)
	task := sendTask(t, jsonrpc(t, before, partner), referenceMessage())
	require.Equal(t, "reconcile-invoice", reportOf(t, task).Capability)

	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capabilities/reconcile-invoice.yaml", func(s string) string {
		require.Equal(t, 1, strings.Count(s, "state: ga\n"))
		return strings.Replace(s, "state: ga\n", "state: removed\nreplaced_by: reconcile-invoice-v4\n", 1)
	})
	// The older tombstone must now point at a capability callers can use too.
	testutil.EditFile(t, cfg, "capabilities/reconcile-invoice-v0.yaml", func(s string) string {
		require.Equal(t, 1, strings.Count(s, "replaced_by: reconcile-invoice\n"))
		return strings.Replace(s, "replaced_by: reconcile-invoice\n", "replaced_by: reconcile-invoice-v4\n", 1)
	})
	testutil.WriteFile(t, cfg, "capabilities/reconcile-invoice-v4.yaml", `id: reconcile-invoice-v4
state: ga
visibility: extended
skill:
  name: Reconcile an invoice (v4)
  description: Matches an invoice to its purchase order line by line, with tolerances.
  tags: [finance, invoices, purchase-orders, reconciliation]
  examples:
    - "Reconcile this invoice against the purchase order"
  inputModes: [text/plain, application/pdf]
  outputModes: [application/json]
requires_scopes: [recon.run]
tenants: "*"
handler: recon.v3.reconcile
owner: finance-agents-team
`)
	after := startWithStore(t, testutil.LoadDeployment(t, cfg), store)
	c := jsonrpc(t, after, partner)
	for name, op := range taskOps(t, after, partner) {
		if strings.Contains(name, "PushConfig") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			err := op(t.Context(), task.ID)
			require.ErrorIs(t, err, a2a.ErrUnsupportedOperation)
			require.Contains(t, err.Error(), "capability reconcile-invoice has been removed; use reconcile-invoice-v4 instead")
			require.Equal(t, map[string]string{"capabilityId": "reconcile-invoice", "replacedBy": "reconcile-invoice-v4"}, errorInfo(t, err))
		})
	}
	t.Run("a new message: the replacement or a failure naming it, never another skill", func(t *testing.T) {
		require.Equal(t, "reconcile-invoice-v4", routedTo(t, c, hinted(referenceMessage(), "reconcile-invoice-v4")))
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: referenceMessage()})
		if err != nil {
			// The classifier matched the tombstone.
			require.ErrorIs(t, err, a2a.ErrUnsupportedOperation)
			require.Equal(t, "reconcile-invoice-v4", errorInfo(t, err)["replacedBy"])
			return
		}
		task, ok := res.(*a2a.Task)
		require.True(t, ok)
		require.Equal(t, "reconcile-invoice-v4", reportOf(t, task).Capability)
	})
	t.Run("another caller still gets TaskNotFound", func(t *testing.T) {
		_, err := jsonrpc(t, after, other).GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
	})
}
