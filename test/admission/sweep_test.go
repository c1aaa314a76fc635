package admission_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/positionstest"
)

// TestSweep drives every position of the request model (every binding × version × operation ×
// place a task id, context id or tenant can appear) with every caller class: the owner; the same
// subject in another tenant; the same subject and tenant from another trusted issuer; anonymous.
// The value at the position is the owner's task (or context, or tenant); anything else the
// request needs is the caller's own. Both doors must give the same verdict. At a target
// position only a caller to whom everything the request names belongs gets through; another
// owner's context is refused as a task that does not exist is. At a filter position (ListTasks'
// contextId) every authenticated caller gets through and is answered from its own tasks: the
// owner's list holds its task, anyone else's is empty and byte for byte the answer to a context
// nobody holds. gRPC requests go to the gateway over h2c; the gateway
// serves the A2A 1.0 gRPC service only, so an admitted 0.3 gRPC request is answered
// VERSION_NOT_SUPPORTED there (after the same admission) and reaches no handler.
func TestSweep(t *testing.T) {
	e := startBoth(t)
	cs := classes(t, e)
	owner := cs[0]
	all := positionstest.All()
	require.Greater(t, len(all), 150, "the catalogue looks truncated")
	counts := map[string]int{}
	sent := 0 // each request is a new message: its own messageId
	for _, p := range all {
		for _, c := range cs {
			t.Run(p.Name()+"/"+c.name, func(t *testing.T) {
				swept := owner.task
				switch p.Kind {
				case positionstest.Tenant:
					swept = owner.tenant
				case positionstest.Context:
					swept = owner.context
				}
				ownTask, ownTenant := c.task, c.tenant
				if c.anonymous {
					ownTask, ownTenant = owner.task, owner.tenant
				}
				sent++
				method, target, h, body, err := positionstest.RequestFor(p, swept, ownTask, ownTenant, hook, "sweep-"+strconv.Itoa(sent))
				require.NoError(t, err)
				if !c.anonymous {
					h.Set("Authorization", "Bearer "+c.token)
				}
				// Only a caller to whom everything named belongs is admitted.
				want := c.authenticated && (p.Filter ||
					(p.Kind == positionstest.Task || p.Kind == positionstest.Context) && c == owner ||
					p.Kind == positionstest.Tenant && c.tenant == owner.tenant)
				if want && (p.Operation == protocol.GetTaskPushNotificationConfig || p.Operation == protocol.DeleteTaskPushNotificationConfig) {
					e.pushConfig(t, c, ownTaskOf(p, swept, ownTask))
				}
				az := e.extauthz(t, method, target, h.Clone(), body)
				require.Equal(t, want, az.allowed, "ext_authz: %s\n%s %s\n%s", az, method, target, az.body)
				counts["extauthz"]++
				gw := e.gateway(t, method, target, h.Clone(), body)
				counts["gateway"]++
				if p.Binding == protocol.GRPC {
					counts["gateway/grpc"]++
				}
				if !want {
					require.False(t, gw.allowed, "gateway admitted what ext_authz refused: %s %s\n%s", method, target, gw.body)
					require.Equal(t, az.reason, gw.reason, "the doors disagree on why: %s %s", method, target)
					require.Equal(t, az.status, gw.status, "the doors disagree on the status: %s %s", method, target)
					if c.anonymous {
						require.Equal(t, "UNAUTHENTICATED", gw.reason, "an anonymous caller is asked for a credential")
					} else if p.Kind == positionstest.Context {
						require.Equal(t, "TASK_NOT_FOUND", gw.reason, "another owner's context is answered as a task that does not exist")
					}
					require.False(t, e.forwarded(gw.decision), "a refused request reached a handler")
					return
				}
				if p.Binding == protocol.GRPC && p.Version == protocol.V03 {
					require.Equal(t, "VERSION_NOT_SUPPORTED", gw.reason, "%s %s: %s", method, target, gw.body)
					require.False(t, e.forwarded(gw.decision), "a 0.3 gRPC request reached a handler")
					return
				}
				if p.Filter {
					counts["filter"]++
					requireNarrowed(t, e, p, c == owner, owner.task, gw, ownTask, ownTenant, h)
					return
				}
				requireServed(t, e, p, gw, method, target)
			})
		}
	}
	t.Logf("checks: %v", counts)
}

// ownTaskOf is the task a filled request targets.
func ownTaskOf(p positionstest.Position, swept, own string) string {
	if p.Kind == positionstest.Task && !strings.Contains(p.Where, "referenceTaskIds") && !strings.Contains(p.Where, "reference_task_ids") {
		return swept
	}
	return own
}

// requireServed checks an admitted request reached its handler (an audit line for its decision)
// and was answered: a success, or the handler's own answer about the task's state — the echo's
// tasks are complete, so a2a-go refuses to cancel them (TASK_NOT_CANCELABLE), to continue them
// (which capgate answers as UNSUPPORTED_OPERATION: a terminal task takes no more messages) or
// to subscribe to them (TASK_NOT_FOUND: no execution).
func requireServed(t *testing.T, e *env, p positionstest.Position, gw outcome, method, target string) {
	t.Helper()
	require.NotEmpty(t, gw.decision)
	if p.Operation == protocol.GetExtendedAgentCard {
		require.True(t, gw.allowed, "the owner was not served: %s %s: %s\n%s", method, target, gw, gw.body)
		return // served by the gateway itself
	}
	if !gw.allowed {
		handlerAnswers := map[protocol.Operation]string{
			protocol.CancelTask:           "TASK_NOT_CANCELABLE",
			protocol.SubscribeToTask:      "TASK_NOT_FOUND",
			protocol.SendMessage:          "UNSUPPORTED_OPERATION",
			protocol.SendStreamingMessage: "UNSUPPORTED_OPERATION",
		}
		continuing := p.Kind == positionstest.Task && (strings.HasSuffix(p.Where, "message.taskId") || strings.HasSuffix(p.Where, "message.task_id")) ||
			p.Kind == positionstest.Context && strings.Contains(p.Body, positionstest.OwnTask) // the owner's task, in its context
		ok := handlerAnswers[p.Operation] == gw.reason &&
			(p.Operation == protocol.CancelTask || p.Operation == protocol.SubscribeToTask || continuing)
		require.True(t, ok, "the owner was not served: %s %s: %s\n%s", method, target, gw, gw.body)
	}
	require.Eventually(t, func() bool { return e.forwarded(gw.decision) }, 5*time.Second, 10*time.Millisecond,
		"the owner's request did not reach a handler: %s %s", method, target)
}

// requireNarrowed checks an admitted request at a filter position was answered from the caller's
// own results: the owner's page lists its task; another caller's page is empty and the same,
// byte for byte, as the answer to a context nobody holds — "not yours" and "does not exist" look
// alike.
func requireNarrowed(t *testing.T, e *env, p positionstest.Position, isOwner bool, ownerTask string, gw outcome, ownTask, ownTenant string, h http.Header) {
	t.Helper()
	require.True(t, gw.allowed, "%s", gw.body)
	got := listedTasks(t, p, gw.body)
	if isOwner {
		require.Contains(t, got, ownerTask, "the owner's page lacks its task in its context: %s", gw.body)
		return
	}
	require.Empty(t, got, "another caller's page lists tasks: %s", gw.body)
	method, target, _, body, err := positionstest.Request(p, "ctx-nobody-holds", ownTask, ownTenant, hook)
	require.NoError(t, err)
	unknown := e.gateway(t, method, target, h.Clone(), body)
	require.Equal(t, unknown.status, gw.status)
	require.Equal(t, unknown.body, gw.body, "a context of another owner answers otherwise than one nobody holds")
}

// listedTasks reads the task ids of a ListTasks answer of p's binding.
func listedTasks(t *testing.T, p positionstest.Position, body string) []string {
	t.Helper()
	var ids []string
	switch p.Binding {
	case protocol.GRPC:
		b := []byte(body)
		require.GreaterOrEqual(t, len(b), 5, "no gRPC message")
		var m a2apb.ListTasksResponse
		require.NoError(t, proto.Unmarshal(b[5:], &m))
		for _, task := range m.GetTasks() {
			ids = append(ids, task.GetId())
		}
		return ids
	case protocol.JSONRPC:
		var out struct {
			Result *struct {
				Tasks []struct{ ID string } `json:"tasks"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &out), "%s", body)
		require.NotNil(t, out.Result, "%s", body)
		require.NotNil(t, out.Result.Tasks, "a page without tasks: %s", body)
		for _, task := range out.Result.Tasks {
			ids = append(ids, task.ID)
		}
		return ids
	}
	var out struct {
		Tasks []struct{ ID string } `json:"tasks"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out), "%s", body)
	require.NotNil(t, out.Tasks, "a page without tasks: %s", body)
	for _, task := range out.Tasks {
		ids = append(ids, task.ID)
	}
	return ids
}
