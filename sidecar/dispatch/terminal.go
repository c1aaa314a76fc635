package dispatch

import (
	"context"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/protocol"
)

// replyRefused is the caller's error for a message the handler refused (perr). A reply to a
// task in a terminal state is UnsupportedOperation (A2A 1.0 §3.1.1), whatever the handler said
// (a2a-go answers InvalidParams with its executor's internals): when the refused message
// continues a task the caller owns, the handler is asked for that task, with the same
// credential, and a terminal state answers for the refusal. Any other refusal, or a failure to
// learn the state, is perr unchanged.
func (d *Dispatcher) replyRefused(ctx context.Context, call *exchange.Call, inv invocation, perr *protocol.Error) *protocol.Error {
	req := call.Request
	msg := req.Message
	if msg == nil || msg.TaskID == "" || !req.Operation.Message() || perr.Code == protocol.TaskNotFound ||
		call.Task == nil || call.Task.Pending || call.Task.TaskID != msg.TaskID {
		return perr
	}
	q := inv.req
	q.Method = protocol.MethodName(req.Version, protocol.GetTask)
	q.Params = getTaskParams(req.Version, msg.TaskID, req.Tenant)
	result, gerr := d.invoker.Call(context.WithoutCancel(ctx), q)
	if gerr != nil {
		return perr
	}
	state, ok := terminalState(result)
	if !ok {
		return perr
	}
	out := protocol.Errorf(protocol.UnsupportedOperation,
		"the task is in a terminal state (%s) and accepts no further messages; send a new message without its taskId", state)
	if call.DecisionID != "" {
		out.Message += " (decision " + call.DecisionID + ")"
		out = out.WithMetadata("decision_id", call.DecisionID)
	}
	return out
}

// getTaskParams are the params of a GetTask for id with no history, in version v (a 1.0
// request's tenant included).
func getTaskParams(v protocol.Version, id, tenant string) jsontext.Value {
	p := map[string]any{"id": id, "historyLength": 0}
	if v == protocol.V1 && tenant != "" {
		p["tenant"] = tenant
	}
	b, _ := json.Marshal(p, json.Deterministic(true))
	return b
}

// terminalState reads the state of a GetTask result, and whether it is terminal (completed,
// failed, canceled, rejected; 1.0 or 0.3 spelling).
func terminalState(result jsontext.Value) (string, bool) {
	var t struct {
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if json.Unmarshal(result, &t, json.RejectUnknownMembers(false)) != nil {
		return "", false
	}
	switch s := t.Status.State; s {
	case "TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED",
		"completed", "failed", "canceled", "rejected":
		return s, true
	}
	return "", false
}
