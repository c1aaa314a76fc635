package dispatch

import (
	"bytes"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
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
