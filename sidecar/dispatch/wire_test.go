package dispatch

import (
	stdjson "encoding/json"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/router"
	"github.com/capgate/capgate/sidecar/tasks"
)

func TestTaskOf(t *testing.T) {
	tests := []struct {
		name      string
		v         protocol.Version
		result    string
		task, ctx string
		ok        bool
	}{
		{"1.0 task", protocol.V1, `{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`, "t1", "c1", true},
		{"1.0 task without id", protocol.V1, `{"task":{"contextId":"c1"}}`, "", "c1", false},
		{"1.0 message on a task", protocol.V1, `{"message":{"messageId":"m","taskId":"t1","contextId":"c1","role":"ROLE_AGENT","parts":[]}}`, "t1", "c1", true},
		{"1.0 direct message reply", protocol.V1, `{"message":{"messageId":"m","contextId":"c1","role":"ROLE_AGENT","parts":[]}}`, "", "c1", true},
		{"1.0 status update", protocol.V1, `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`, "t1", "c1", true},
		{"1.0 artifact update", protocol.V1, `{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a","parts":[]}}}`, "t1", "c1", true},
		{"1.0 ignores 0.3 kinds", protocol.V1, `{"kind":"task","id":"t1","contextId":"c1"}`, "", "", false},
		{"1.0 unknown members are ignored", protocol.V1, `{"task":{"id":"t1","contextId":"c1","extra":1},"x":true}`, "t1", "c1", true},
		{"0.3 task", protocol.V03, `{"kind":"task","id":"t1","contextId":"c1","status":{"state":"completed"}}`, "t1", "c1", true},
		{"0.3 task without id", protocol.V03, `{"kind":"task","contextId":"c1"}`, "", "c1", false},
		{"0.3 message on a task", protocol.V03, `{"kind":"message","messageId":"m","taskId":"t1","contextId":"c1","role":"agent","parts":[]}`, "t1", "c1", true},
		{"0.3 direct message", protocol.V03, `{"kind":"message","messageId":"m","role":"agent","parts":[]}`, "", "", true},
		{"0.3 status update", protocol.V03, `{"kind":"status-update","taskId":"t1","contextId":"c1","final":true}`, "t1", "c1", true},
		{"0.3 artifact update", protocol.V03, `{"kind":"artifact-update","taskId":"t1","contextId":"c1"}`, "t1", "c1", true},
		{"0.3 unknown kind", protocol.V03, `{"kind":"thing","id":"t1"}`, "", "", false},
		{"0.3 no kind", protocol.V03, `{"id":"t1","contextId":"c1"}`, "", "", false},
		{"neither", protocol.V1, `{}`, "", "", false},
		{"not an object", protocol.V1, `[1,2]`, "", "", false},
		{"null", protocol.V1, `null`, "", "", false},
		{"not JSON", protocol.V03, `<html>`, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, ctx, ok := taskOf(jsontext.Value(tt.result), tt.v)
			require.Equal(t, tt.ok, ok)
			if ok || tt.task != "" || tt.ctx != "" {
				require.Equal(t, tt.task, task)
				require.Equal(t, tt.ctx, ctx)
			}
		})
	}

	t.Run("a2a-go's own renderings", func(t *testing.T) {
		task := &a2a.Task{ID: "t9", ContextID: "c9", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		b, err := stdjson.Marshal(a2a.StreamResponse{Event: task})
		require.NoError(t, err)
		id, ctx, ok := taskOf(b, protocol.V1)
		require.True(t, ok)
		require.Equal(t, "t9", id)
		require.Equal(t, "c9", ctx)

		b, err = stdjson.Marshal(a2av0.FromV1Task(task))
		require.NoError(t, err)
		id, ctx, ok = taskOf(b, protocol.V03)
		require.True(t, ok)
		require.Equal(t, "t9", id)
		require.Equal(t, "c9", ctx)

		ev := &a2a.TaskStatusUpdateEvent{TaskID: "t9", ContextID: "c9", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
		b, err = stdjson.Marshal(a2a.StreamResponse{Event: ev})
		require.NoError(t, err)
		id, _, ok = taskOf(b, protocol.V1)
		require.True(t, ok)
		require.Equal(t, "t9", id)
	})
}

func TestWithoutTaskID(t *testing.T) {
	for _, v := range []protocol.Version{protocol.V1, protocol.V03} {
		t.Run(string(v), func(t *testing.T) {
			in := `{"message":{"messageId":"m1","taskId":"capgate-1","contextId":"c1","role":"ROLE_USER","parts":[{"text":"2"}],"metadata":{"skillId":"x"}},` +
				`"configuration":{"acceptedOutputModes":["application/json"]},"metadata":{"k":"v"}}`
			out, err := withoutTaskID(jsontext.Value(in), v)
			require.NoError(t, err)
			require.JSONEq(t, `{"message":{"messageId":"m1","contextId":"c1","role":"ROLE_USER","parts":[{"text":"2"}],"metadata":{"skillId":"x"}},`+
				`"configuration":{"acceptedOutputModes":["application/json"]},"metadata":{"k":"v"}}`, string(out))
		})
	}
	t.Run("no taskId: unchanged", func(t *testing.T) {
		in := `{"message":{"messageId":"m1","parts":[]}}`
		out, err := withoutTaskID(jsontext.Value(in), protocol.V1)
		require.NoError(t, err)
		require.JSONEq(t, in, string(out))
	})
	t.Run("deterministic", func(t *testing.T) {
		in := jsontext.Value(`{"z":1,"message":{"taskId":"t","b":2,"a":1},"a":0}`)
		first, err := withoutTaskID(in, protocol.V1)
		require.NoError(t, err)
		for range 10 {
			again, err := withoutTaskID(in, protocol.V1)
			require.NoError(t, err)
			require.Equal(t, string(first), string(again))
		}
	})
	for name, in := range map[string]string{
		"params not an object":  `[1]`,
		"message not an object": `{"message":"hi"}`,
		"no message":            `{}`,
		"not JSON":              `{`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := withoutTaskID(jsontext.Value(in), protocol.V1)
			require.Error(t, err)
		})
	}
}

func TestClarificationTask(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	b := tasks.Binding{TaskID: "capgate-1", ContextID: "ctx-1", Subject: "partner-1", Tenant: "acme", Pending: true,
		Candidates: []string{"reconcile-invoice", "extract-invoice-fields"}, CreatedAt: created}
	cands := []router.Candidate{
		{ID: "reconcile-invoice", Name: "Reconcile an invoice", Score: 0.4},
		{ID: "extract-invoice-fields", Name: "Extract invoice fields", Score: 0.3},
	}
	task := clarificationTask(b, cands)

	require.Equal(t, a2a.TaskID("capgate-1"), task.ID)
	require.Equal(t, "ctx-1", task.ContextID)
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
	require.NotNil(t, task.Status.Timestamp)
	require.Equal(t, time.UTC, task.Status.Timestamp.Location())
	require.True(t, created.Equal(*task.Status.Timestamp))
	require.Empty(t, task.Artifacts)

	msg := task.Status.Message
	require.NotNil(t, msg)
	require.Equal(t, a2a.MessageRoleAgent, msg.Role)
	require.Equal(t, a2a.TaskID("capgate-1"), msg.TaskID)
	require.Equal(t, "ctx-1", msg.ContextID)
	require.NotEmpty(t, msg.ID)
	require.Len(t, msg.Parts, 2)
	require.Equal(t, a2a.Text("I can do several things with this message. Which one do you mean? Reply with its number, name or id:"+
		"\n1. Reconcile an invoice (reconcile-invoice)"+
		"\n2. Extract invoice fields (extract-invoice-fields)"), msg.Parts[0].Content)
	data, ok := msg.Parts[1].Content.(a2a.Data)
	require.True(t, ok)
	raw, err := stdjson.Marshal(data.Value)
	require.NoError(t, err)
	require.JSONEq(t, `{"candidates":[{"id":"reconcile-invoice","name":"Reconcile an invoice"},{"id":"extract-invoice-fields","name":"Extract invoice fields"}]}`, string(raw),
		"scores are not shown to the caller")

	t.Run("rendered per version", func(t *testing.T) {
		var v1 struct {
			Task struct {
				ID     string `json:"id"`
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"task"`
		}
		require.NoError(t, stdjson.Unmarshal(streamResult(task, protocol.V1), &v1))
		require.Equal(t, "capgate-1", v1.Task.ID)
		require.Equal(t, "TASK_STATE_INPUT_REQUIRED", v1.Task.Status.State)

		var v03 struct {
			Kind   string `json:"kind"`
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}
		require.NoError(t, stdjson.Unmarshal(streamResult(task, protocol.V03), &v03))
		require.Equal(t, "task", v03.Kind)
		require.Equal(t, "capgate-1", v03.ID)
		require.Equal(t, "input-required", v03.Status.State)

		var bare struct {
			ID string `json:"id"`
		}
		require.NoError(t, stdjson.Unmarshal(taskJSON(task, protocol.V1), &bare))
		require.Equal(t, "capgate-1", bare.ID)

		// Each rendering reads back as the task it names.
		id, _, ok := taskOf(streamResult(task, protocol.V1), protocol.V1)
		require.True(t, ok)
		require.Equal(t, "capgate-1", id)
		id, _, ok = taskOf(streamResult(task, protocol.V03), protocol.V03)
		require.True(t, ok)
		require.Equal(t, "capgate-1", id)
	})

	t.Run("no candidates", func(t *testing.T) {
		task := clarificationTask(b, nil)
		data, ok := task.Status.Message.Parts[1].Content.(a2a.Data)
		require.True(t, ok)
		raw, err := stdjson.Marshal(data.Value)
		require.NoError(t, err)
		require.JSONEq(t, `{"candidates":[]}`, string(raw))
	})
}

func TestGrantedScopes(t *testing.T) {
	tests := []struct {
		name             string
		caller, required []string
		want             []string
	}{
		{"intersection, sorted", []string{"recon.run", "invoices.read", "a2a.preview"}, []string{"recon.run", "invoices.read"}, []string{"invoices.read", "recon.run"}},
		{"caller lacks one", []string{"recon.run"}, []string{"recon.run", "forecast.read"}, []string{"recon.run"}},
		{"nothing required: nothing granted", []string{"recon.run", "ops.admin"}, nil, []string{}},
		{"caller has none", nil, []string{"recon.run"}, []string{}},
		{"duplicates collapsed", []string{"recon.run", "recon.run"}, []string{"recon.run", "recon.run"}, []string{"recon.run"}},
		{"exact match only", []string{"recon", "recon.run.all", "RECON.RUN"}, []string{"recon.run"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := grantedScopes(tt.caller, tt.required)
			require.NotNil(t, got)
			require.Equal(t, tt.want, got)
		})
	}
}

// taskOf is probe as the tests read it: the task id and context id of a
// SendMessage result or stream event; ok is false when the value is neither
// a task, a message nor a task event. A message reply has no task id.
func taskOf(result jsontext.Value, v protocol.Version) (taskID, contextID string, ok bool) {
	taskID, contextID, kind := probe(result, v)
	return taskID, contextID, kind != 0
}
