package dispatch

import (
	stdjson "encoding/json"
	"fmt"
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

// heldShapes are one message's parts — text, inline file, data, file by URL — in each version's
// JSON: what a pending binding holds for a message of that version, and what its history must
// show a reader of that version.
var heldShapes = map[protocol.Version]string{
	protocol.V1: `[{"text":"Book me on flight BA304"},{"raw":"JVBERi0xLjQK","mediaType":"application/pdf","filename":"a.pdf"},` +
		`{"data":{"seat":"12A"}},{"url":"https://files.example.com/x.pdf","mediaType":"application/pdf"}]`,
	protocol.V03: `[{"kind":"text","text":"Book me on flight BA304"},{"kind":"file","file":{"bytes":"JVBERi0xLjQK","mimeType":"application/pdf","name":"a.pdf"}},` +
		`{"kind":"data","data":{"seat":"12A"}},{"kind":"file","file":{"uri":"https://files.example.com/x.pdf","mimeType":"application/pdf"}}]`,
}

// historyOf is the history of a rendered task: a SendMessage result or stream event (event),
// else a bare task, in version v. absent reports that the task has no history member.
func historyOf(t *testing.T, out []byte, v protocol.Version, event bool) (history []map[string]stdjson.RawMessage, absent bool) {
	t.Helper()
	var task map[string]stdjson.RawMessage
	if event && v == protocol.V1 {
		var wrapped struct {
			Task map[string]stdjson.RawMessage `json:"task"`
		}
		require.NoError(t, stdjson.Unmarshal(out, &wrapped))
		task = wrapped.Task
	} else {
		require.NoError(t, stdjson.Unmarshal(out, &task))
	}
	require.NotNil(t, task)
	raw, ok := task["history"]
	if !ok {
		return nil, true
	}
	require.NoError(t, stdjson.Unmarshal(raw, &history))
	return history, false
}

// TestOwnTaskHistory: capgate's own task carries the first message its binding holds as its
// history — role user, the caller's messageId, the parts, the task's id and context — for every
// version the message was held in × every version it is read in × every historyLength × both
// forms (a SendMessage result or stream event, a bare task); a binding without a message id,
// with parts that do not read, or whose parts cannot be converted to the reader's version is
// rendered without history.
func TestOwnTaskHistory(t *testing.T) {
	b := tasks.Binding{TaskID: "capgate-1", ContextID: "ctx-1", Subject: "partner-1", Tenant: "acme", Pending: true,
		Candidates: []string{"reconcile-invoice"}, CreatedAt: time.Unix(1e9, 0), HeldMessageID: "m-first/ünï"}
	cands := []router.Candidate{{ID: "reconcile-invoice", Name: "Reconcile an invoice"}}
	n := func(i int) *int { return &i }
	versions := []protocol.Version{protocol.V1, protocol.V03}
	for _, held := range versions {
		for _, reader := range versions {
			for _, hl := range []*int{nil, n(0), n(1), n(5)} {
				for _, event := range []bool{true, false} {
					name := fmt.Sprintf("held %s/read %s/historyLength %v/event %v", held, reader, hl, event)
					if hl != nil {
						name = fmt.Sprintf("held %s/read %s/historyLength %d/event %v", held, reader, *hl, event)
					}
					t.Run(name, func(t *testing.T) {
						b := b
						b.Held, b.HeldVersion = []byte(heldShapes[held]), string(held)
						task := clarificationTask(b, cands)
						out := ownTask(task, b, reader, hl, event)
						require.Empty(t, task.History, "the task given is not changed")
						history, absent := historyOf(t, out, reader, event)
						if protocol.HistoryKept(reader, hl, 1) == 0 {
							require.True(t, absent, "historyLength 0 in %s: no history", reader)
							return
						}
						require.Len(t, history, 1)
						first := history[0]
						var id, role, taskID, contextID string
						for k, dst := range map[string]*string{"messageId": &id, "role": &role, "taskId": &taskID, "contextId": &contextID} {
							require.NoError(t, stdjson.Unmarshal(first[k], dst), k)
						}
						require.Equal(t, "m-first/ünï", id, "the caller's own messageId")
						require.Equal(t, "capgate-1", taskID)
						require.Equal(t, "ctx-1", contextID)
						require.JSONEq(t, heldShapes[reader], string(first["parts"]))
						if reader == protocol.V03 {
							require.Equal(t, "user", role)
							require.JSONEq(t, `"message"`, string(first["kind"]))
						} else {
							require.Equal(t, "ROLE_USER", role)
							require.NotContains(t, first, "kind")
						}
					})
				}
			}
		}
	}

	noHistory := func(t *testing.T, b tasks.Binding, reader protocol.Version) {
		t.Helper()
		for _, event := range []bool{true, false} {
			_, absent := historyOf(t, ownTask(clarificationTask(b, cands), b, reader, nil, event), reader, event)
			require.True(t, absent)
		}
	}
	t.Run("a binding of the previous release: no id, no history", func(t *testing.T) {
		for _, v := range versions {
			old := b
			old.HeldMessageID, old.Held, old.HeldVersion = "", []byte(heldShapes[v]), string(v)
			noHistory(t, old, protocol.V1)
			noHistory(t, old, protocol.V03)
		}
	})
	t.Run("parts that do not read as their version's", func(t *testing.T) {
		for _, tc := range []struct{ version, held string }{
			{"1.0", heldShapes[protocol.V03]}, {"0.3", heldShapes[protocol.V1]}, {"0.3", `[{"kind":"video"}]`}, {"1.0", `[{}]`},
			{"1.0", `{"text":"x"}`}, {"1.0", `[]`}, {"2.0", heldShapes[protocol.V1]}, {"1.0", `[{"raw":"not base64!"}]`},
			{"1.0", `[null]`}, {"0.3", `[null]`}, {"1.0", heldShapes[protocol.V1][:len(heldShapes[protocol.V1])-1] + `,null]`},
		} {
			bad := b
			bad.Held, bad.HeldVersion = []byte(tc.held), tc.version
			noHistory(t, bad, protocol.V1)
			noHistory(t, bad, protocol.V03)
		}
	})
	t.Run("0.3 bytes a2av0 cannot convert: none to a 1.0 reader, as sent to a 0.3 one", func(t *testing.T) {
		odd := b
		odd.Held, odd.HeldVersion = []byte(`[{"kind":"file","file":{"bytes":"JVBERi0xLjQK_-","mimeType":"application/pdf"}}]`), "0.3"
		noHistory(t, odd, protocol.V1)
		history, absent := historyOf(t, ownTask(clarificationTask(odd, cands), odd, protocol.V03, nil, false), protocol.V03, false)
		require.False(t, absent)
		require.JSONEq(t, string(odd.Held), string(history[0]["parts"]))
	})
}
