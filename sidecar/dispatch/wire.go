package dispatch

import (
	"bytes"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
	"github.com/capgate/capgate/sidecar/tasks"
)

// probe reads a SendMessage result or stream event once: its task id, context id and kind
// (0: neither a task with an id, a message nor a task update).
func probe(result jsontext.Value, v protocol.Version) (taskID, contextID string, kind protocol.Kind) {
	var p struct {
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
	if err := json.Unmarshal(result, &p, json.RejectUnknownMembers(false)); err != nil {
		return "", "", 0
	}
	switch {
	case p.Task != nil:
		return p.Task.ID, p.Task.ContextID, kindIf(p.Task.ID != "", protocol.KindTask)
	case p.Message != nil:
		return p.Message.TaskID, p.Message.ContextID, protocol.KindMessage
	case p.StatusUpdate != nil:
		return p.StatusUpdate.TaskID, p.StatusUpdate.ContextID, protocol.KindStatusUpdate
	case p.ArtifactUpdate != nil:
		return p.ArtifactUpdate.TaskID, p.ArtifactUpdate.ContextID, protocol.KindArtifactUpdate
	}
	if v == protocol.V03 {
		switch p.Kind {
		case "task":
			return p.ID, p.ContextID, kindIf(p.ID != "", protocol.KindTask)
		case "message":
			return p.TaskID, p.ContextID, protocol.KindMessage
		case "status-update":
			return p.TaskID, p.ContextID, protocol.KindStatusUpdate
		case "artifact-update":
			return p.TaskID, p.ContextID, protocol.KindArtifactUpdate
		}
	}
	return "", "", 0
}

func kindIf(ok bool, k protocol.Kind) protocol.Kind {
	if ok {
		return k
	}
	return 0
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
func withHeld(call *exchange.Call, params jsontext.Value, b tasks.Binding) (jsontext.Value, *protocol.MessageInfo, *protocol.Error) {
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
	env, err := jsonrpcwire.MarshalRequest("1", protocol.MethodName(v, protocol.SendMessage), out)
	if err != nil {
		return nil, nil, protocol.Wrap(protocol.Internal, err, "the message could not be combined")
	}
	cfg := call.Rev.Config().Limits
	req, perr := jsonrpcwire.ParseJSONRPC(v, "application/json", env, protocol.Limits{MaxBodyBytes: cfg.MaxBodyBytes, MaxDepth: cfg.MaxDepth})
	if perr != nil {
		return nil, nil, protocol.Errorf(perr.Code, "your first message with this answer is not a message this agent accepts: %s", perr.Message)
	}
	return out, req.Message, nil
}
