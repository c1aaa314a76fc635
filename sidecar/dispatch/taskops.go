package dispatch

import (
	"context"
	stdjson "encoding/json"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/gateway"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/router"
	"github.com/capgate/capgate/sidecar/tasks"
)

// taskOp forwards an operation on an existing task to the handler it is
// bound to — for its owner only, and only while still entitled.
func (d *Dispatcher) taskOp(ctx context.Context, call *gateway.Call, w gateway.Responder) *protocol.Error {
	req := call.Request
	b, perr := bound(call)
	if perr != nil {
		return perr
	}
	if b.Pending {
		return d.pendingOp(ctx, call, w, b)
	}
	if call.Log != nil {
		call.Log.Capability, call.Log.Layer = b.Capability, "task"
	}
	m, limits, perr := d.recheck(ctx, call, call.Rev.Router, b.Capability)
	if perr != nil {
		return perr
	}
	params, perr := req.ForwardParams()
	if perr != nil {
		return perr
	}
	inv, perr := d.handlerRequest(ctx, call, m, limits, params)
	if perr != nil {
		return perr
	}
	if req.Operation.Streaming() {
		return d.stream(ctx, call, w, inv, nil)
	}
	result, perr := d.callHandler(ctx, inv)
	if perr != nil {
		return perr
	}
	if w.Binding() == protocol.HTTPJSON && string(result) == "null" {
		result = jsontext.Value("{}") // google.protobuf.Empty over HTTP+JSON
	}
	return writeResult(w, result)
}

// pendingOp answers task operations on a clarification task capgate holds.
func (d *Dispatcher) pendingOp(ctx context.Context, call *gateway.Call, w gateway.Responder, b tasks.Binding) *protocol.Error {
	cands := d.candidates(call, b)
	task := clarificationTask(b, cands)
	switch call.Request.Operation {
	case protocol.GetTask:
		return writeResult(w, taskJSON(task, call.Request.Version))
	case protocol.SubscribeToTask:
		// A stream event: {"task": …} in 1.0, as SendStreamingMessage sends it.
		return d.writeEvents(call, w, [][]byte{streamResult(task, call.Request.Version)})
	case protocol.CancelTask:
		if err := d.store.Delete(ctx, b.TaskID); err != nil {
			return storeError(err)
		}
		now := d.now().UTC()
		task.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled, Timestamp: &now}
		return writeResult(w, taskJSON(task, call.Request.Version))
	}
	return protocol.Errorf(protocol.PushNotificationNotSupported, "push notifications are not supported for a task awaiting clarification")
}

func (d *Dispatcher) candidates(call *gateway.Call, b tasks.Binding) []router.Candidate {
	out := make([]router.Candidate, 0, len(b.Candidates))
	for _, id := range b.Candidates {
		if m, ok := call.Rev.Registry().Get(id); ok {
			out = append(out, router.Candidate{ID: id, Name: m.Skill.Name})
		}
	}
	return out
}

// MaxListTasks bounds one ListTasks answer.
const MaxListTasks = 100

// list returns the caller's own tasks only: each bound task is read from its
// handler (which keeps the state), clarification tasks from the store. An
// anonymous caller owns none (see owned) and is asked for a credential.
func (d *Dispatcher) list(ctx context.Context, call *gateway.Call, w gateway.Responder) *protocol.Error {
	if !call.Principal.Authenticated {
		return protocol.MissingCredentials()
	}
	owned, err := d.store.Owned(ctx, ownerOf(call))
	if err != nil {
		return storeError(err)
	}
	if len(owned) > MaxListTasks {
		owned = owned[:MaxListTasks]
	}
	out := make([]stdjson.RawMessage, 0, len(owned))
	for _, b := range owned {
		if b.Pending {
			out = append(out, taskJSON(clarificationTask(b, d.candidates(call, b)), call.Request.Version))
			continue
		}
		raw, perr := d.fetchTask(ctx, call, b)
		if perr != nil {
			d.log.Info("task omitted from list", zap.String("decision_id", call.DecisionID), zap.String("task", protocol.ForLog(b.TaskID)), zap.String("code", string(perr.Code)))
			continue
		}
		out = append(out, stdjson.RawMessage(raw))
	}
	resp := struct {
		Tasks         []stdjson.RawMessage `json:"tasks"`
		TotalSize     int                  `json:"totalSize"`
		PageSize      int                  `json:"pageSize"`
		NextPageToken string               `json:"nextPageToken"`
	}{Tasks: out, TotalSize: len(out), PageSize: len(out)}
	body, merr := stdjson.Marshal(resp)
	if merr != nil {
		return protocol.Wrap(protocol.Internal, merr, "the task list could not be rendered")
	}
	return writeResult(w, body)
}

// fetchTask reads one bound task from its handler (GetTask, no history).
func (d *Dispatcher) fetchTask(ctx context.Context, call *gateway.Call, b tasks.Binding) (jsontext.Value, *protocol.Error) {
	m, limits, perr := d.recheck(ctx, call, call.Rev.Router, b.Capability)
	if perr != nil {
		return nil, perr
	}
	params, err := stdjson.Marshal(map[string]any{"id": b.TaskID, "historyLength": 0})
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "internal")
	}
	sub := *call
	req := *call.Request
	req.Operation = protocol.GetTask
	sub.Request = &req
	inv, perr := d.handlerRequest(ctx, &sub, m, limits, params)
	if perr != nil {
		return nil, perr
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return d.callHandler(cctx, inv)
}
