package dispatch

import (
	"context"
	stdjson "encoding/json"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/router"
	"github.com/capgate/capgate/sidecar/tasks"
)

// taskOp forwards an operation on an existing task to the handler it is
// bound to — for its owner only, and only while still entitled.
func (d *Dispatcher) taskOp(ctx context.Context, call *exchange.Call) (exchange.Result, *protocol.Error) {
	req := call.Request
	b, perr := bound(call)
	if perr != nil {
		return exchange.Result{}, perr
	}
	if b.Pending {
		return d.pendingOp(ctx, call, b)
	}
	if call.Log != nil {
		call.Log.Capability, call.Log.Layer = b.Capability, "task"
	}
	m, limits, perr := d.recheck(ctx, call, call.Rev.Router, b.Capability)
	if perr != nil {
		return exchange.Result{}, perr
	}
	params, perr := req.ForwardParams()
	if perr != nil {
		return exchange.Result{}, perr
	}
	inv, perr := d.handlerRequest(ctx, call, m, limits, params)
	if perr != nil {
		return exchange.Result{}, perr
	}
	if req.Operation.Streaming() {
		return d.stream(ctx, call, inv, nil, nil), nil
	}
	result, perr := d.callHandler(ctx, inv)
	if perr != nil {
		return exchange.Result{}, perr
	}
	return exchange.Value(resultKind(req.Operation, result), result), nil
}

// resultKind is the kind of a task operation's result: the table's (protocol.Kind), except
// that a JSON null is empty whatever the row says.
func resultKind(op protocol.Operation, result jsontext.Value) protocol.Kind {
	if string(result) == "null" {
		return protocol.KindEmpty
	}
	if k := op.Result(); k != 0 {
		return k
	}
	return protocol.KindTask
}

// pendingOp answers task operations on a clarification task capgate holds.
func (d *Dispatcher) pendingOp(ctx context.Context, call *exchange.Call, b tasks.Binding) (exchange.Result, *protocol.Error) {
	cands := d.candidates(call, b)
	task := clarificationTask(b, cands)
	v := call.Request.Version
	switch call.Request.Operation {
	case protocol.GetTask:
		return exchange.Value(protocol.KindTask, ownTask(task, b, v, call.Request.HistoryLength, false)), nil
	case protocol.SubscribeToTask:
		// A stream event: {"task": …} in 1.0, as SendStreamingMessage sends it.
		return exchange.Events(exchange.Event{Kind: protocol.KindTask, JSON: ownTask(task, b, v, nil, true)}), nil
	case protocol.CancelTask:
		if err := d.store.Delete(ctx, b.TaskID); err != nil {
			return exchange.Result{}, storeError(err)
		}
		now := d.now().UTC()
		task.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled, Timestamp: &now}
		return exchange.Value(protocol.KindTask, ownTask(task, b, v, nil, false)), nil
	}
	return exchange.Result{}, protocol.Errorf(protocol.PushNotificationNotSupported, "push notifications are not supported for a task awaiting clarification")
}

func (d *Dispatcher) candidates(call *exchange.Call, b tasks.Binding) []router.Candidate {
	out := make([]router.Candidate, 0, len(b.Candidates))
	for _, id := range b.Candidates {
		if m, ok := call.Rev.Registry().Get(id); ok {
			out = append(out, router.Candidate{ID: id, Name: m.Skill.Name})
		}
	}
	return out
}

// MaxListTasks bounds one ListTasks answer (the largest pageSize; a larger
// one is coerced to it).
const MaxListTasks = 100

// listCall is one ListTasks in progress.
type listCall struct {
	call *exchange.Call
	q    listQuery
	// checks are the entitlement re-checks made so far, by capability.
	checks map[string]capCheck
	// taskTimeout bounds one handler call.
	taskTimeout time.Duration
}

// list returns a page of the caller's own tasks, newest first: each bound
// task is read from its handler (which keeps the state), clarification
// tasks from the store. An anonymous caller owns none (see owned) and is
// asked for a credential. pageToken continues after the last task the
// previous page examined; it is bound to the caller and the parameters
// (pagetoken.go). totalSize counts the owned tasks that pass the filters
// the store can answer: with status or statusTimestampAfter, or when a
// handler fails, it is an upper bound.
func (d *Dispatcher) list(ctx context.Context, call *exchange.Call) (exchange.Result, *protocol.Error) {
	if !call.Principal.Authenticated {
		return exchange.Result{}, protocol.MissingCredentials()
	}
	owner := ownerOf(call)
	lc := &listCall{call: call, q: listQueryOf(call.Request.List), checks: map[string]capCheck{}, taskTimeout: ListDeadline / 2}
	if ht := call.Rev.Config().Limits.HandlerTimeout; ht > 0 && ht < lc.taskTimeout {
		lc.taskTimeout = ht
	}
	scope := tokenScope(owner, lc.q)
	var from *tasks.Position
	if lc.q.pageToken != "" {
		p, perr := d.openPage(scope, lc.q.pageToken)
		if perr != nil {
			return exchange.Result{}, perr
		}
		from = &p
	}
	lctx, cancel := context.WithTimeout(ctx, ListDeadline)
	defer cancel()
	out, total, next, err := d.listOwned(ctx, lctx, lc, owner, from)
	if err != nil {
		return exchange.Result{}, storeError(err)
	}
	var nextToken string
	if next != nil {
		nextToken = d.sealPage(scope, *next)
	}
	resp := struct {
		Tasks         []stdjson.RawMessage `json:"tasks"`
		TotalSize     int                  `json:"totalSize"`
		PageSize      int                  `json:"pageSize"`
		NextPageToken string               `json:"nextPageToken"`
	}{Tasks: out, TotalSize: total, PageSize: len(out), NextPageToken: nextToken}
	body, merr := stdjson.Marshal(resp)
	if merr != nil {
		return exchange.Result{}, protocol.Wrap(protocol.Internal, merr, "the task list could not be rendered")
	}
	return exchange.Value(protocol.KindTaskList, body), nil
}

// collect examines candidates in order, in batches, until the page is
// full, the candidates run out, MaxListScan are examined or ctx (the list's
// deadline) ends. It returns the page and how many candidates it examined;
// it examines at least one when there is one. A task whose handler fails is
// omitted and logged — unless the deadline had passed and an earlier task
// was examined: then it is left for the next page.
func (d *Dispatcher) collect(ctx context.Context, lc *listCall, cands []listEntry) ([]stdjson.RawMessage, int) {
	out := make([]stdjson.RawMessage, 0, min(lc.q.pageSize, len(cands)))
	examined := 0
	for examined < len(cands) && examined < MaxListScan && len(out) < lc.q.pageSize {
		if examined > 0 && ctx.Err() != nil {
			break
		}
		n := lc.q.pageSize - len(out)
		if lc.q.handlerFilters() {
			n = max(n, ListConcurrency) // some will not match
		}
		batch := cands[examined:min(examined+n, len(cands), MaxListScan)]
		for i, r := range d.examine(ctx, lc, batch) {
			if r.err != nil && examined > 0 && ctx.Err() != nil {
				return out, examined
			}
			examined++
			if r.err != nil {
				d.log.Info("task omitted from list", zap.String("decision_id", lc.call.DecisionID),
					zap.String("task", protocol.ForLog(batch[i].b.TaskID)), zap.String("code", string(r.err.Code)))
				continue
			}
			if r.match {
				out = append(out, stdjson.RawMessage(r.task))
				if len(out) == lc.q.pageSize {
					return out, examined
				}
			}
		}
	}
	return out, examined
}

// fetchTask reads one bound task from its handler (GetTask with the list's
// historyLength, 0 when not given, and the list's tenant), as chk allows.
// A handler may keep tasks apart by the request's tenant (A2A 1.0's tenant
// field; @a2a-js/sdk's task store does): a task created naming a tenant is
// found only by a GetTask naming it, so the list's tenant is sent as a
// GetTask of the caller's would send it.
func (d *Dispatcher) fetchTask(ctx context.Context, lc *listCall, b tasks.Binding, chk capCheck) (jsontext.Value, *protocol.Error) {
	get := map[string]any{"id": b.TaskID, "historyLength": lc.q.history()}
	if t := lc.call.Request.Tenant; t != "" && lc.call.Request.Version == protocol.V1 {
		get["tenant"] = t
	}
	params, err := stdjson.Marshal(get)
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "internal")
	}
	sub := *lc.call
	req := *lc.call.Request
	req.Operation = protocol.GetTask
	sub.Request = &req
	inv, perr := d.handlerRequest(ctx, &sub, chk.m, chk.limits, params)
	if perr != nil {
		return nil, perr
	}
	cctx, cancel := context.WithTimeout(ctx, lc.taskTimeout)
	defer cancel()
	return d.callHandler(cctx, inv)
}
