package dispatch

import (
	"bytes"
	"slices"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/gateway"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tasks"
)

// methodName is the JSON-RPC method of an operation in a protocol version.
func methodName(v protocol.Version, op protocol.Operation) string {
	return protocol.MethodName(v, op)
}

// taskOf finds the task id and context id in a SendMessage result or stream
// event. ok is false when the value is neither a task, a message nor a task
// event. A message reply has no task id.
func taskOf(result jsontext.Value, v protocol.Version) (taskID, contextID string, ok bool) {
	var probe struct {
		Task *struct {
			ID        string `json:"id"`
			ContextID string `json:"contextId"`
		} `json:"task"`
		Message *struct {
			TaskID    string `json:"taskId"`
			ContextID string `json:"contextId"`
		} `json:"message"`
		StatusUpdate *struct {
			TaskID    string `json:"taskId"`
			ContextID string `json:"contextId"`
		} `json:"statusUpdate"`
		ArtifactUpdate *struct {
			TaskID    string `json:"taskId"`
			ContextID string `json:"contextId"`
		} `json:"artifactUpdate"`
		// 0.3 shapes: a kind-discriminated object.
		Kind      string `json:"kind"`
		ID        string `json:"id"`
		TaskID    string `json:"taskId"`
		ContextID string `json:"contextId"`
	}
	if err := json.Unmarshal(result, &probe, json.RejectUnknownMembers(false)); err != nil {
		return "", "", false
	}
	switch {
	case probe.Task != nil:
		return probe.Task.ID, probe.Task.ContextID, probe.Task.ID != ""
	case probe.Message != nil:
		return probe.Message.TaskID, probe.Message.ContextID, true
	case probe.StatusUpdate != nil:
		return probe.StatusUpdate.TaskID, probe.StatusUpdate.ContextID, true
	case probe.ArtifactUpdate != nil:
		return probe.ArtifactUpdate.TaskID, probe.ArtifactUpdate.ContextID, true
	}
	if v == protocol.V03 {
		switch probe.Kind {
		case "task":
			return probe.ID, probe.ContextID, probe.ID != ""
		case "message", "status-update", "artifact-update":
			return probe.TaskID, probe.ContextID, true
		}
	}
	return "", "", false
}

// withoutTaskID removes params.message.taskId (a clarification reply starts
// a new task at the handler).
func withoutTaskID(params jsontext.Value, _ protocol.Version) (jsontext.Value, error) {
	var p map[string]jsontext.Value
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	var msg map[string]jsontext.Value
	if err := json.Unmarshal(p["message"], &msg); err != nil {
		return nil, err
	}
	delete(msg, "taskId")
	mb, err := json.Marshal(msg, json.Deterministic(true))
	if err != nil {
		return nil, err
	}
	p["message"] = bytes.TrimSpace(mb)
	return json.Marshal(p, json.Deterministic(true))
}

// heldParts is message.parts of params (as the handler reads them), kept
// with a clarification so that the capability the caller then chooses
// receives them.
func heldParts(params jsontext.Value) ([]byte, *protocol.Error) {
	var p struct {
		Message struct {
			Parts jsontext.Value `json:"parts"`
		} `json:"message"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, protocol.Wrap(protocol.InvalidParams, err, "params.message could not be read")
	}
	return bytes.Clone(p.Message.Parts), nil
}

// withHeld puts the parts a clarification held before the parts of the
// caller's answer, in params (already without taskId), and reads the
// combined message back through the request parser with the gateway's
// limits: the handler receives, and the capability's limits are checked
// against, exactly what any message of that size and shape would be.
func withHeld(call *gateway.Call, params jsontext.Value, b tasks.Binding) (jsontext.Value, *protocol.MessageInfo, *protocol.Error) {
	v := call.Request.Version
	if b.HeldVersion != string(v) {
		return nil, nil, protocol.Errorf(protocol.InvalidRequest,
			"answer the clarification in the A2A version of your first message (%s), or resend it with metadata.skillId", b.HeldVersion)
	}
	var p map[string]jsontext.Value
	var msg map[string]jsontext.Value
	var held, answer []jsontext.Value
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p["message"], &msg) != nil ||
		json.Unmarshal(b.Held, &held) != nil || json.Unmarshal(msg["parts"], &answer) != nil {
		return nil, nil, protocol.Errorf(protocol.InvalidParams, "params.message could not be combined with your first message")
	}
	parts, err := json.Marshal(append(held, answer...), json.Deterministic(true))
	if err != nil {
		return nil, nil, protocol.Wrap(protocol.Internal, err, "the message could not be combined")
	}
	msg["parts"] = parts
	mb, err := json.Marshal(msg, json.Deterministic(true))
	if err != nil {
		return nil, nil, protocol.Wrap(protocol.Internal, err, "the message could not be combined")
	}
	p["message"] = mb
	out, err := json.Marshal(p, json.Deterministic(true))
	if err != nil {
		return nil, nil, protocol.Wrap(protocol.Internal, err, "the message could not be combined")
	}
	method, err := json.Marshal(protocol.MethodName(v, protocol.SendMessage))
	if err != nil {
		return nil, nil, protocol.Wrap(protocol.Internal, err, "the message could not be combined")
	}
	env := slices.Concat([]byte(`{"jsonrpc":"2.0","id":1,"method":`), method, []byte(`,"params":`), out, []byte(`}`))
	cfg := call.Rev.Config().Limits
	req, perr := protocol.ParseJSONRPC(v, "application/json", env, protocol.Limits{MaxBodyBytes: cfg.MaxBodyBytes, MaxDepth: cfg.MaxDepth})
	if perr != nil {
		return nil, nil, protocol.Errorf(perr.Code, "your first message with this answer is not a message this agent accepts: %s", perr.Message)
	}
	return out, req.Message, nil
}
