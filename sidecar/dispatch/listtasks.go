package dispatch

import (
	"context"
	stdjson "encoding/json"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/sync/errgroup"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tasks"
)

// ListTasks bounds.
const (
	// DefaultListPageSize is the page size of a ListTasks without pageSize.
	DefaultListPageSize = 50
	// ListConcurrency is how many handler GetTask calls one ListTasks makes
	// at once.
	ListConcurrency = 8
	// ListDeadline bounds one ListTasks answer. One handler call is bounded
	// by half of it (or limits.handler_timeout, if shorter), so a page
	// always gets past at least its first task.
	ListDeadline = 10 * time.Second
	// MaxListScan is how many tasks one ListTasks examines at most: with
	// status filters a page may come back short, with a nextPageToken.
	MaxListScan = 2 * MaxListTasks
)

// listQuery is a ListTasks request's filters, normalised.
type listQuery struct {
	contextID string
	// state is a 1.0 task state (TASK_STATE_…); "" for any.
	state            string
	after            *time.Time
	historyLength    *int
	includeArtifacts bool
	pageSize         int
	pageToken        string
}

// history is the historyLength every task of the list is read with: the request's, 0 when not
// given (a list of whole histories would be as large as all of them). A handler is asked for
// that much (fetchTask), and capgate's own tasks carry as much (ownTask).
func (q listQuery) history() int {
	if q.historyLength != nil {
		return *q.historyLength
	}
	return 0
}

func listQueryOf(p *protocol.ListParams) listQuery {
	q := listQuery{pageSize: DefaultListPageSize}
	if p == nil {
		return q
	}
	q.contextID, q.state, q.pageToken = p.ContextID, normState(p.Status), p.PageToken
	q.historyLength, q.includeArtifacts = p.HistoryLength, p.IncludeArtifacts
	if p.StatusTimestampAfter != "" {
		if t, err := time.Parse(time.RFC3339Nano, p.StatusTimestampAfter); err == nil { // the parser checked it
			q.after = &t
		}
	}
	switch {
	case p.PageSize > MaxListTasks: // AIP-158: a larger page size is coerced to the maximum
		q.pageSize = MaxListTasks
	case p.PageSize > 0:
		q.pageSize = p.PageSize
	}
	return q
}

// handlerFilters reports whether the query filters on what only the
// handler knows (the task's status).
func (q listQuery) handlerFilters() bool { return q.state != "" || q.after != nil }

// matches reports whether a task in state at status time ts passes the
// status filters.
func (q listQuery) matches(state string, ts *time.Time) bool {
	if q.state != "" && normState(state) != q.state {
		return false
	}
	return q.after == nil || (ts != nil && !ts.Before(*q.after))
}

// normState is the 1.0 name of a task state given in 1.0 (TASK_STATE_WORKING)
// or 0.3 (working, input-required) form.
func normState(s string) string {
	if s == "" || strings.HasPrefix(s, "TASK_STATE_") {
		return s
	}
	return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}

// listEntry is one candidate task of a list, at its place in the order.
type listEntry struct {
	b   tasks.Binding
	pos tasks.Position
}

// listCandidates are the bindings of a store page that pass the filter
// capgate answers for the clarification tasks it holds (status), in list
// order.
func listCandidates(owned []tasks.Binding, q listQuery) []listEntry {
	out := make([]listEntry, 0, len(owned))
	for _, b := range owned {
		if b.Pending {
			ts := b.CreatedAt.UTC()
			if !q.matches(string(pendingState), &ts) {
				continue
			}
		}
		out = append(out, listEntry{b: b, pos: tasks.PositionOf(b)})
	}
	return out
}

// listReads bounds the store pages one ListTasks reads (each after the
// last): more are read only when tasks of the ones before were omitted.
const listReads = 4

// listOwned reads the owner's tasks after from (nil: the start) in the
// context the query names, one store page at a time (OwnedPage: the
// store's work is bounded by the page, not by how many tasks the owner
// has), and collects the page from them. It returns the page, the store's
// count of the owner's tasks that match the context (totalSize: an upper
// bound) and where the next page starts (nil: none). A store page is as
// long as what is left of the page — or of MaxListScan, with status
// filters.
func (d *Dispatcher) listOwned(ctx, lctx context.Context, lc *listCall, owner tasks.Owner, from *tasks.Position) ([]stdjson.RawMessage, int, *tasks.Position, error) {
	var out []stdjson.RawMessage
	var next *tasks.Position
	total, scanned := 0, 0
	after := from
	for round := 0; round < listReads && len(out) < lc.q.pageSize && scanned < MaxListScan; round++ {
		if round > 0 && lctx.Err() != nil {
			break
		}
		n := lc.q.pageSize - len(out)
		if lc.q.handlerFilters() {
			n = MaxListScan
		}
		n = min(n, MaxListScan-scanned)
		page, err := d.store.OwnedPage(ctx, owner, after, lc.q.contextID, n)
		if err != nil {
			return nil, 0, nil, err
		}
		if round == 0 {
			total = page.Total
		}
		cands := listCandidates(page.Bindings, lc.q)
		sub := *lc
		sub.q.pageSize = lc.q.pageSize - len(out)
		got, examined := d.collect(lctx, &sub, cands)
		out = append(out, got...)
		scanned += examined
		if examined < len(cands) {
			next = &cands[examined-1].pos
			break
		}
		if next = nil; page.More {
			p := page.Next
			next, after = &p, &p
		}
		if next == nil {
			break
		}
	}
	if out == nil {
		out = []stdjson.RawMessage{}
	}
	return out, total, next, nil
}

// pendingState is the state of a clarification task.
const pendingState = "TASK_STATE_INPUT_REQUIRED"

// capCheck is the entitlement re-check of one capability, decided once per
// list.
type capCheck struct {
	m      *manifest.Capability
	limits map[string]any
	err    *protocol.Error
}

// listed is the outcome of examining one candidate.
type listed struct {
	task  jsontext.Value // nil: not on the page
	err   *protocol.Error
	match bool
}

// fetched reads a handler's GetTask answer for binding b: it must be the
// task b names. The task passes the status filters or not (match), and
// loses its artifacts unless the caller asked for them.
func fetched(raw jsontext.Value, b tasks.Binding, q listQuery) listed {
	var fields map[string]jsontext.Value
	if err := json.Unmarshal(raw, &fields); err != nil {
		return listed{err: protocol.Errorf(protocol.Internal, "the handler's task is not a JSON object")}
	}
	var probe struct {
		ID     string `json:"id"`
		Status struct {
			State     string `json:"state"`
			Timestamp string `json:"timestamp"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &probe, json.RejectUnknownMembers(false)); err != nil || probe.ID != b.TaskID {
		return listed{err: protocol.Errorf(protocol.Internal, "the handler answered with another task")}
	}
	var ts *time.Time
	if t, err := time.Parse(time.RFC3339Nano, probe.Status.Timestamp); err == nil {
		ts = &t
	}
	if !q.matches(probe.Status.State, ts) {
		return listed{}
	}
	if _, ok := fields["artifacts"]; ok && !q.includeArtifacts {
		delete(fields, "artifacts")
		out, err := json.Marshal(fields, json.Deterministic(true))
		if err != nil {
			return listed{err: protocol.Wrap(protocol.Internal, err, "internal")}
		}
		raw = out
	}
	return listed{task: raw, match: true}
}

// examine reads a batch of candidates: clarification tasks from their
// binding, the others from their handlers, ListConcurrency at a time.
// checks caches the entitlement re-check by capability.
func (d *Dispatcher) examine(ctx context.Context, lc *listCall, batch []listEntry) []listed {
	out := make([]listed, len(batch))
	var g errgroup.Group
	g.SetLimit(ListConcurrency)
	for i, e := range batch {
		b := e.b
		if b.Pending {
			task := clarificationTask(b, d.candidates(lc.call, b))
			hist := lc.q.history()
			out[i] = listed{task: ownTask(task, b, lc.call.Request.Version, &hist, false), match: true}
			continue
		}
		chk, ok := lc.checks[b.Capability]
		if !ok {
			m, limits, perr := d.recheck(ctx, lc.call, lc.call.Rev.Router, b.Capability)
			chk = capCheck{m: m, limits: limits, err: perr}
			lc.checks[b.Capability] = chk
		}
		if chk.err != nil {
			out[i] = listed{err: chk.err}
			continue
		}
		g.Go(func() error {
			raw, perr := d.fetchTask(ctx, lc, b, chk)
			if perr != nil {
				out[i] = listed{err: perr}
				return nil
			}
			out[i] = fetched(raw, b, lc.q)
			return nil
		})
	}
	_ = g.Wait() // the goroutines return no errors
	return out
}
