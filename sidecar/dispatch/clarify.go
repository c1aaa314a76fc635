package dispatch

import (
	"context"
	"encoding/base64"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/router"
	"github.com/capgate/capgate/sidecar/tasks"
)

// clarify answers with a task in TASK_STATE_INPUT_REQUIRED that names the
// candidates (or, for a confirmation, the one capability), held by capgate
// until the caller's reply resolves it, with the first message's parts. The
// clarification's taskID is reused when the caller's reply was itself too
// vague.
func (d *Dispatcher) clarify(ctx context.Context, call *exchange.Call, c clarification) (exchange.Result, *protocol.Error) {
	dec, taskID, contextID := c.decision, c.taskID, c.contextID
	if len(dec.Candidates) == 0 {
		return exchange.Result{}, protocol.Errorf(protocol.Unauthorized, "no capability of this agent is available to the caller").Decided(decisionlog.RuleNoCandidate, "")
	}
	if !call.Principal.Authenticated {
		// Nobody can own a task for an anonymous caller (any other anonymous
		// caller would share it): answer with a message naming the choices
		// instead, to be resent with metadata.skillId.
		return d.clarifyAnonymous(call, dec, contextID)
	}
	if taskID == "" {
		taskID = "capgate-" + string(a2a.NewTaskID())
	}
	if contextID == "" {
		contextID = a2a.NewContextID()
	}
	ids := make([]string, len(dec.Candidates))
	for i, c := range dec.Candidates {
		ids[i] = c.ID
	}
	o := ownerOf(call)
	if call.Task != nil && call.Task.TaskID == taskID {
		o = call.Task.Owner() // asked again on the same clarification task
	}
	if perr := d.holdContext(ctx, call, o, contextID); perr != nil {
		return exchange.Result{}, perr // the caller's reply continues in this context: it must be the caller's
	}
	b := tasks.Binding{TaskID: taskID, ContextID: contextID, Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant,
		Pending: true, Candidates: ids, CreatedAt: d.now(), Held: c.held, HeldVersion: c.heldVersion, HeldMessageID: c.heldMessageID}
	lim := call.Rev.Config().Limits
	if err := d.store.BindPending(ctx, b, lim.PendingTTL, lim.PendingPerCaller); err != nil {
		if errors.Is(err, tasks.ErrTooManyPending) {
			return exchange.Result{}, protocol.Errorf(protocol.InvalidRequest,
				"too many of your tasks await clarification (limit %d); answer or cancel one, or name the skill in metadata.skillId", lim.PendingPerCaller)
		}
		return exchange.Result{}, storeError(err)
	}
	d.countQuestion(call, dec)
	return answer(call, protocol.KindTask, ownResult(questionTask(b, dec), b, call.Request)), nil
}

// countQuestion counts a clarification or confirmation and logs its layer.
func (d *Dispatcher) countQuestion(call *exchange.Call, dec router.Decision) {
	layer := router.LayerClarify
	if dec.Layer == router.LayerConfirm {
		layer = router.LayerConfirm
	}
	d.m.Routes.WithLabelValues(string(layer)).Inc()
	if call.Log != nil {
		call.Log.Layer, call.Log.Confidence = string(layer), dec.Confidence
	}
}

// clarifyAnonymous answers an anonymous caller's unclear message with an
// agent message listing the candidates; no task is created.
func (d *Dispatcher) clarifyAnonymous(call *exchange.Call, dec router.Decision, contextID string) (exchange.Result, *protocol.Error) {
	if contextID == "" {
		contextID = a2a.NewContextID()
	}
	ask := "Resend your message with metadata.skillId set to the id you mean:"
	switch {
	case dec.Layer == router.LayerConfirm && len(dec.Candidates) == 1:
		ask = fmt.Sprintf("%s? To go ahead, resend your message with metadata.skillId set to %s:", dec.Candidates[0].Name, dec.Candidates[0].ID)
	case len(dec.Candidates) == 1:
		ask = fmt.Sprintf("This agent can only do one thing for you, and it may not be what you asked: %s. If it is, resend your message with metadata.skillId set to %s:",
			dec.Candidates[0].Name, dec.Candidates[0].ID)
	}
	msg := clarificationMessage(dec.Candidates, ask)
	msg.ContextID = contextID
	d.countQuestion(call, dec)
	return d.writeMessage(call, msg)
}

// writeMessage answers with an agent message (a SendMessage result in the
// request's version; one event on a stream).
func (d *Dispatcher) writeMessage(call *exchange.Call, msg *a2a.Message) (exchange.Result, *protocol.Error) {
	var (
		b   []byte
		err error
	)
	if call.Request.Version == protocol.V03 {
		b, err = stdjson.Marshal(a2av0.FromV1Message(msg))
	} else {
		b, err = stdjson.Marshal(a2a.StreamResponse{Event: msg})
	}
	if err != nil {
		return exchange.Result{}, protocol.Wrap(protocol.Internal, err, "the clarification could not be rendered")
	}
	return answer(call, protocol.KindMessage, b), nil
}

// decline answers a caller's "no" to a question offering one capability:
// the clarification task ends canceled, and nothing runs.
func (d *Dispatcher) decline(ctx context.Context, call *exchange.Call, b *tasks.Binding) (exchange.Result, *protocol.Error) {
	if err := d.store.Delete(ctx, b.TaskID); err != nil {
		return exchange.Result{}, storeError(err)
	}
	d.m.Routes.WithLabelValues(string(router.LayerDeclined)).Inc()
	if call.Log != nil {
		call.Log.Layer = string(router.LayerDeclined)
	}
	msg := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("Nothing was done."))
	msg.TaskID, msg.ContextID = a2a.TaskID(b.TaskID), b.ContextID
	ts := d.now().UTC()
	task := &a2a.Task{ID: a2a.TaskID(b.TaskID), ContextID: b.ContextID,
		Status: a2a.TaskStatus{State: a2a.TaskStateCanceled, Message: msg, Timestamp: &ts}}
	return answer(call, protocol.KindTask, ownResult(task, *b, call.Request)), nil
}

// clarificationMessage is the agent's question: a text part listing the
// candidates and a data part {"candidates":[{"id","name"}]}.
func clarificationMessage(cands []router.Candidate, ask string) *a2a.Message {
	var text strings.Builder
	text.WriteString(ask)
	list := make([]map[string]string, len(cands))
	for i, c := range cands {
		fmt.Fprintf(&text, "\n%d. %s (%s)", i+1, c.Name, c.ID)
		list[i] = map[string]string{"id": c.ID, "name": c.Name}
	}
	return a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(text.String()), a2a.NewDataPart(map[string]any{"candidates": list}))
}

// clarificationTask renders a pending binding as an input-required task
// (GetTask, ListTasks): which of the candidates, or whether the one offered
// may go ahead.
func clarificationTask(b tasks.Binding, cands []router.Candidate) *a2a.Task {
	layer := router.LayerClarify
	if len(cands) == 1 {
		layer = router.LayerConfirm
	}
	return questionTask(b, router.Decision{Layer: layer, Candidates: cands})
}

// questionTask renders the question of dec as an input-required task: which
// of the candidates, whether the one capability may go ahead (LayerConfirm),
// or, when the caller has only one capability and the message did not fit
// it, whether that one is meant.
func questionTask(b tasks.Binding, dec router.Decision) *a2a.Task {
	ask := "I can do several things with this message. Which one do you mean? Reply with its number, name or id:"
	switch {
	case dec.Layer == router.LayerConfirm && len(dec.Candidates) == 1:
		ask = fmt.Sprintf("%s? Reply yes to go ahead, or no to drop it:", dec.Candidates[0].Name)
	case len(dec.Candidates) == 1:
		ask = fmt.Sprintf("This agent can only do one thing for you, and it may not be what you asked: %s. Reply yes if it is, or no to drop it:", dec.Candidates[0].Name)
	}
	msg := clarificationMessage(dec.Candidates, ask)
	msg.TaskID = a2a.TaskID(b.TaskID)
	msg.ContextID = b.ContextID
	ts := b.CreatedAt.UTC()
	return &a2a.Task{
		ID:        a2a.TaskID(b.TaskID),
		ContextID: b.ContextID,
		Status:    a2a.TaskStatus{State: a2a.TaskStateInputRequired, Message: msg, Timestamp: &ts},
	}
}

// ownResult renders capgate's own task (of the pending binding b) as the SendMessage result
// (or stream event) answering req: in req's version, with the first message b holds as its
// history, as much of it as req's historyLength asks for (ownTask).
func ownResult(task *a2a.Task, b tasks.Binding, req *protocol.Request) []byte {
	return ownTask(task, b, req.Version, req.HistoryLength, true)
}

// ownTask renders capgate's own task (of the pending binding b) in version v, with the first
// message b holds as its history, kept as protocol.HistoryKept says for historyLength: as a
// SendMessage result or stream event (event), else as a bare task (GetTask, CancelTask, a
// ListTasks entry). The history is the caller's message as b holds it: to a reader of the
// version it was sent in, its parts as sent; to a reader of the other version, converted by
// a2a-go's a2av0 — or, when they cannot be, no history rather than a part of the wrong shape.
func ownTask(task *a2a.Task, b tasks.Binding, v protocol.Version, historyLength *int, event bool) []byte {
	var first *a2a.Message // nil: no history
	if protocol.HistoryKept(v, historyLength, 1) > 0 {
		first = heldMessage(b, task)
	}
	if v == protocol.V03 {
		lt := a2av0.FromV1Task(task)
		if first != nil {
			if parts := held03Parts(b); parts != nil {
				m := a2av0.FromV1Message(first)
				m.Parts = parts // as sent, not through a2a-go's conversion and back
				lt.History = []*a2alegacy.Message{m}
			}
		}
		return marshalled(lt)
	}
	if first != nil {
		if first.Parts = heldV1Parts(b); first.Parts != nil {
			cp := *task
			cp.History = []*a2a.Message{first}
			task = &cp
		}
	}
	if event {
		return streamResult(task, v)
	}
	return taskJSON(task, v)
}

// heldMessage is the first message the pending binding b holds, without its parts, as the
// history of task (whose task and context it is in): role user and the caller's messageId. It
// is nil when b keeps no message id (a binding written before ids were kept: none is made up).
func heldMessage(b tasks.Binding, task *a2a.Task) *a2a.Message {
	if b.HeldMessageID == "" {
		return nil
	}
	return &a2a.Message{ID: b.HeldMessageID, Role: a2a.MessageRoleUser, TaskID: task.ID, ContextID: task.ContextID}
}

// heldV1Parts is the parts b holds as a 1.0 reader is given them: as held from a 1.0 message,
// converted by a2av0 from a 0.3 one when it converts them as they are (convertible03); nil when
// there are none, or they do not read as their version's or cannot be converted.
func heldV1Parts(b tasks.Binding) a2a.ContentParts {
	switch protocol.Version(b.HeldVersion) {
	case protocol.V1:
		return readParts[a2a.ContentParts](b.Held)
	case protocol.V03:
		if parts := readParts[a2alegacy.ContentParts](b.Held); parts != nil && convertible03(parts) {
			v1, _ := a2av0.ToV1Parts(parts) // never fails
			return v1
		}
	}
	return nil
}

// held03Parts is the parts b holds as a 0.3 reader is given them: as held from a 0.3 message,
// converted by a2av0 from a 1.0 one; nil when there are none or they do not read as their
// version's.
func held03Parts(b tasks.Binding) a2alegacy.ContentParts {
	switch protocol.Version(b.HeldVersion) {
	case protocol.V03:
		return readParts[a2alegacy.ContentParts](b.Held)
	case protocol.V1:
		if parts := readParts[a2a.ContentParts](b.Held); parts != nil {
			return a2av0.FromV1Parts(parts)
		}
	}
	return nil
}

// readParts reads held parts as their version's ContentParts (a2a-go's 1.0
// a2a.ContentParts or 0.3 a2alegacy.ContentParts): nil when they do not
// read, are none, or hold a null (a nil part, the zero of either's element).
func readParts[S ~[]E, E comparable](held []byte) S {
	var parts S
	var null E
	if stdjson.Unmarshal(held, &parts) != nil || len(parts) == 0 || slices.Contains(parts, null) {
		return nil
	}
	return parts
}

// convertible03 reports whether a2av0 converts the 0.3 parts to 1.0 as they are: every file's
// bytes are standard base64 (a2av0 would otherwise keep the base64 text itself as the bytes).
func convertible03(parts a2alegacy.ContentParts) bool {
	for _, p := range parts {
		if f, ok := p.(a2alegacy.FilePart); ok {
			if fb, ok := f.File.(a2alegacy.FileBytes); ok {
				if _, err := base64.StdEncoding.DecodeString(fb.Bytes); err != nil {
					return false
				}
			}
		}
	}
	return true
}

// streamResult renders a task as a SendMessage result in the request's
// version: {"task": …} in 1.0, the 0.3 task object otherwise.
func streamResult(task *a2a.Task, v protocol.Version) []byte {
	return renderTask(task, v, a2a.StreamResponse{Event: task})
}

// taskJSON renders a bare task (GetTask result) in the request's version.
func taskJSON(task *a2a.Task, v protocol.Version) []byte {
	return renderTask(task, v, task)
}

// renderTask marshals the 0.3 form of task, or v1 for 1.0.
func renderTask(task *a2a.Task, v protocol.Version, v1 any) []byte {
	if v == protocol.V03 {
		return marshalled(a2av0.FromV1Task(task))
	}
	return marshalled(v1)
}

// marshalled is out as JSON. The types are a2a-go's own; marshalling them cannot fail.
func marshalled(out any) []byte {
	b, err := stdjson.Marshal(out)
	if err != nil {
		return []byte(`null`)
	}
	return b
}

// answer is capgate's own answer to a message: the SendMessage result b of kind k, or, to
// SendStreamingMessage, a stream of that one event.
func answer(call *exchange.Call, k protocol.Kind, b []byte) exchange.Result {
	if call.Request.Operation == protocol.SendStreamingMessage {
		return exchange.Events(exchange.Event{Kind: k, JSON: b})
	}
	return exchange.Value(k, b)
}
