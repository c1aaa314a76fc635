package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/audit"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/router"
	"github.com/capgate/capgate/sidecar/tasks"
)

// Capturing fakes of the dispatcher's three dependencies and its auditor.

type fakeInvoker struct {
	mu     sync.Mutex
	calls  []handler.Request
	result jsontext.Value
	// events, when set, are what Stream yields instead of result.
	events []jsontext.Value
	err    *protocol.Error
}

func (f *fakeInvoker) Call(_ context.Context, req handler.Request) (jsontext.Value, *protocol.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req)
	return f.result, f.err
}

func (f *fakeInvoker) Stream(_ context.Context, req handler.Request, yield func(jsontext.Value) error) *protocol.Error {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	events := f.events
	if events == nil {
		events = []jsontext.Value{f.result}
	}
	for _, e := range events {
		if err := yield(e); err != nil {
			return protocol.AsError(err, protocol.Internal, "stream") // as handler.Stream: a protocol error stays itself
		}
	}
	return nil
}

type fakeTokens struct{ grants []Grant }

func (f *fakeTokens) HandlerToken(_ context.Context, g Grant) (string, error) {
	f.grants = append(f.grants, g)
	return "handler-token", nil
}

type fakeAudit struct{ entries []audit.Entry }

func (f *fakeAudit) Log(e audit.Entry) { f.entries = append(f.entries, e) }

// answered is what a binding's writer receives from an operation: a unary result's JSON, or
// each of a stream's events' JSON (copied: an event is valid only while yield runs), one after
// another; nothing when it fails before the first event.
func answered(res exchange.Result, perr *protocol.Error) ([]byte, *protocol.Error) {
	if perr != nil || res.Stream == nil {
		return res.JSON, perr
	}
	var out []byte
	perr = res.Stream(func(e exchange.Event) error {
		out = append(out, e.JSON...)
		return nil
	})
	return out, perr
}

// failingDelete is a memory store whose Delete fails.
type failingDelete struct{ *tasks.Memory }

func (failingDelete) Delete(context.Context, string) error { return tasks.ErrUnavailable }

type fixture struct {
	rev    *revision.State
	store  tasks.Store
	inv    *fakeInvoker
	tokens *fakeTokens
	audit  *fakeAudit
	logs   *observer.ObservedLogs
	d      *Dispatcher
	// sent numbers the messages call sends, each a new message (messageId).
	sent atomic.Int64
}

var (
	revOnce sync.Once
	finance *revision.State
)

func newFixture(t *testing.T, store tasks.Store) *fixture {
	t.Helper()
	revOnce.Do(func() {
		dep, err := deployment.Load("")
		if err != nil {
			panic(err)
		}
		if finance, err = revision.Build(context.Background(), dep, revision.Options{}); err != nil {
			panic(err)
		}
	})
	if store == nil {
		store = tasks.NewMemory(0)
	}
	core, logs := observer.New(zap.DebugLevel)
	f := &fixture{rev: finance, store: store, logs: logs, tokens: &fakeTokens{}, audit: &fakeAudit{},
		inv: &fakeInvoker{result: jsontext.Value(`{"task":{"id":"t-new","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}`)}}
	f.d = New(store, f.inv, f.tokens, WithAudit(f.audit), WithLogger(zap.New(core)))
	return f
}

var (
	partner = identity.Principal{Authenticated: true, Issuer: "https://idp.example.com", Subject: "partner-1", Tenant: "acme", Scopes: []string{"recon.run"}}
	public  = identity.Principal{Authenticated: true, Issuer: "https://idp.example.com", Subject: "someone", Tenant: "acme"}
)

// call parses a JSON-RPC 1.0 SendMessage with message (a JSON object) as the gateway would hand it
// over after admission.
// Each call is a new message: its messageId ("m-…") is made unique (sameCall keeps it).
func (f *fixture) call(t *testing.T, p identity.Principal, message string, task *tasks.Binding) *exchange.Call {
	t.Helper()
	message = strings.Replace(message, `"messageId":"m-`, `"messageId":"m`+strconv.FormatInt(f.sent.Add(1), 10)+`-`, 1)
	return f.sameCall(t, p, message, task)
}

// sameCall is call with the message's messageId as it is.
func (f *fixture) sameCall(t *testing.T, p identity.Principal, message string, task *tasks.Binding) *exchange.Call {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":` + message + `}}`
	req, perr := jsonrpcwire.ParseJSONRPC(protocol.V1, "application/json", []byte(body), protocol.Limits{})
	require.Nil(t, perr)
	return &exchange.Call{Rev: f.rev, Request: req, Principal: p, DecisionID: "d-1", Task: task, Log: &decisionlog.Entry{}}
}

const (
	lookupText = `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"What is the status of invoice INV-1042?"}]}`
	pdfOnly    = `{"messageId":"m-1","role":"ROLE_USER","parts":[{"raw":"JVBERi0xLjQK","mediaType":"application/pdf"}]}`
	vague      = `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hello there"}]}`
	pdfExtract = `{"messageId":"m-1","role":"ROLE_USER","parts":[{"raw":"JVBERi0xLjQK","mediaType":"application/pdf"},{"text":"extract the fields from this invoice pdf"}]}`
)

func hinted(skill string) string {
	return `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"What is the status of invoice INV-1042?"}],"metadata":{"skillId":"` + skill + `"}}`
}

// routeOf routes call with the request's forwarded params, as send gives them to route.
func routeOf(t *testing.T, d *Dispatcher, call *exchange.Call) (routed, *protocol.Error) {
	t.Helper()
	params, perr := call.Request.ForwardParams()
	require.Nil(t, perr)
	return d.route(t.Context(), call, params)
}

func onTask(id, text string) string {
	return `{"messageId":"m-2","role":"ROLE_USER","taskId":"` + id + `","parts":[{"text":"` + text + `"}]}`
}

// TestHeldFirstMessage: the answer to a clarification is forwarded after
// the parts of the first message the clarification held, and the limits are
// checked against the combined message.
func TestHeldFirstMessage(t *testing.T) {
	f := newFixture(t, nil)
	r, perr := routeOf(t, f.d, f.call(t, public, pdfOnly, nil))
	require.Nil(t, perr)
	require.NotNil(t, r.clarify)
	require.JSONEq(t, `[{"raw":"JVBERi0xLjQK","mediaType":"application/pdf"}]`, string(r.clarify.held))
	pending := &tasks.Binding{TaskID: "capgate-1", ContextID: "c-9", Pending: true, Candidates: []string{"extract-invoice-fields"},
		Issuer: public.Issuer, Subject: public.Subject, Tenant: public.Tenant, Held: r.clarify.held, HeldVersion: r.clarify.heldVersion}
	r, perr = routeOf(t, f.d, f.call(t, public, onTask("capgate-1", "yes"), pending))
	require.Nil(t, perr, "%v", perr)
	require.Equal(t, "extract-invoice-fields", r.decision.Capability)
	require.NotNil(t, r.msg)
	require.Len(t, r.msg.Parts, 2)
	require.Equal(t, "application/pdf", r.msg.Parts[0].MediaType)
	require.Equal(t, "yes", r.msg.Parts[1].Text)
	require.Contains(t, string(r.params), `"raw":"JVBERi0xLjQK"`)
	require.NotContains(t, string(r.params), `"taskId"`)

	// Held in another A2A version than the answer: refused, not mixed.
	pending.HeldVersion = "0.3"
	_, perr = routeOf(t, f.d, f.call(t, public, onTask("capgate-1", "yes"), pending))
	require.NotNil(t, perr)
	require.Equal(t, protocol.InvalidRequest, perr.Code)
}

// TestRoute covers each branch of routing.
func TestRoute(t *testing.T) {
	f := newFixture(t, nil)
	bound := &tasks.Binding{TaskID: "t-1", Capability: "reconcile-invoice", Issuer: partner.Issuer, Subject: partner.Subject, Tenant: partner.Tenant}
	pending := &tasks.Binding{TaskID: "capgate-1", ContextID: "c-9", Pending: true, Candidates: []string{"lookup-invoice", "reconcile-invoice"},
		Issuer: partner.Issuer, Subject: partner.Subject, Tenant: partner.Tenant}
	for _, tc := range []struct {
		name       string
		who        identity.Principal
		msg        string
		task       *tasks.Binding
		layer      router.Layer
		capability string
		clarify    bool
	}{
		{"a bound task stays with its capability", partner, onTask("t-1", "more"), bound, router.LayerTask, "reconcile-invoice", false},
		{"one candidate for the media types, and the message fits it", public, pdfExtract, nil, router.LayerSingle, "extract-invoice-fields", false},
		{"one candidate is asked when the message says nothing of it", public, pdfOnly, nil, router.LayerClarify, "", true},
		{"an entitled hint", partner, hinted("reconcile-invoice"), nil, router.LayerHint, "reconcile-invoice", false},
		{"a hint the caller may not use is ignored", public, hinted("reconcile-invoice"), nil, router.LayerClassifier, "lookup-invoice", false},
		{"the classifier", public, lookupText, nil, router.LayerClassifier, "lookup-invoice", false},
		{"unsure: a clarification", partner, vague, nil, router.LayerClarify, "", true},
		{"the reply to a clarification picks a candidate", partner, onTask("capgate-1", "lookup-invoice"), pending, "", "lookup-invoice", false},
		{"a reply that picks nothing asks again on the same task", partner, onTask("capgate-1", "hmm"), pending, router.LayerClarify, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, perr := routeOf(t, f.d, f.call(t, tc.who, tc.msg, tc.task))
			require.Nil(t, perr, "%v", perr)
			if tc.clarify {
				require.NotNil(t, r.clarify)
				require.Equal(t, tc.layer, r.clarify.decision.Layer)
				if tc.task != nil {
					require.Equal(t, tc.task.TaskID, r.clarify.taskID, "asked again on the same task")
				}
				return
			}
			require.Nil(t, r.clarify)
			if tc.layer != "" {
				require.Equal(t, tc.layer, r.decision.Layer)
			}
			require.Equal(t, tc.capability, r.decision.Capability)
			if tc.task != nil && tc.task.Pending {
				require.Equal(t, tc.task, r.pending)
				require.NotContains(t, string(r.params), "capgate-1", "the handler starts a task of its own")
			}
		})
	}
}

// TestSendTombstone: a hint at a removed capability the caller would have been entitled to is a
// clear failure naming its replacement, not the nearest other skill; nothing is forwarded.
func TestSendTombstone(t *testing.T) {
	f := newFixture(t, nil)
	_, perr := answered(f.d.send(t.Context(), f.call(t, partner, hinted("reconcile-invoice-v0"), nil)))
	require.NotNil(t, perr)
	require.Equal(t, protocol.UnsupportedOperation, perr.Code)
	require.Equal(t, "reconcile-invoice", perr.Metadata["replacedBy"])
	require.Empty(t, f.inv.calls)
}

// TestForwardRecheck: entitlement is decided again at the moment of the call.
func TestForwardRecheck(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name string
		who  identity.Principal
		capa string
		code protocol.Code
	}{
		{"lost the scope", public, "reconcile-invoice", protocol.Unauthorized},
		{"anonymous", identity.Principal{}, "reconcile-invoice", protocol.Unauthenticated},
		{"the capability is gone", partner, "no-such-capability", protocol.TaskNotFound},
		{"internal capability", partner, "purge-invoice-cache", protocol.Unauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := f.call(t, tc.who, lookupText, nil)
			_, perr := answered(f.d.forward(t.Context(), call, routed{decision: router.Decision{Layer: router.LayerHint, Capability: tc.capa}}, nil))
			require.NotNil(t, perr)
			require.Equal(t, tc.code, perr.Code, perr.Message)
		})
	}
	require.Empty(t, f.inv.calls, "nothing reaches a handler")
}

// TestForwardCallsBindsAudits: a forwarded message carries the downscoped grant, binds the task
// the handler answers with to its capability and owner (issuer, subject, tenant), is audited,
// and the answer is written as the handler gave it.
func TestForwardCallsBindsAudits(t *testing.T) {
	f := newFixture(t, nil)
	who := partner
	who.Scopes = []string{"a2a.preview", "recon.run"}
	raw, perr := answered(f.d.send(t.Context(), f.call(t, who, hinted("reconcile-invoice"), nil)))
	require.Nil(t, perr)
	require.Len(t, f.inv.calls, 1)
	c := f.inv.calls[0]
	require.Equal(t, "recon.v3.reconcile", c.Handler)
	require.Equal(t, "SendMessage", c.Method)
	require.Equal(t, "handler-token", c.Token)
	require.Contains(t, string(c.Params), `"skillId":"reconcile-invoice"`)
	require.Equal(t, []string{"recon.run"}, f.tokens.grants[0].Scopes, "the caller's scopes narrowed to the capability's")
	b, ok, err := f.store.Lookup(t.Context(), "t-new")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, tasks.Owner{Issuer: who.Issuer, Subject: who.Subject, Tenant: who.Tenant}, b.Owner())
	require.Equal(t, "reconcile-invoice", b.Capability)
	require.Len(t, f.audit.entries, 1)
	require.Equal(t, audit.OutcomeOK, f.audit.entries[0].Outcome)
	require.JSONEq(t, string(f.inv.result), string(raw))

	// A handler failure is the caller's answer and is audited as such; nothing is bound.
	f.inv.err, f.inv.result = protocol.Errorf(protocol.Internal, "the skill's handler is unavailable"), nil
	_, perr = answered(f.d.send(t.Context(), f.call(t, who, hinted("reconcile-invoice"), nil)))
	require.NotNil(t, perr)
	require.Equal(t, audit.Failed(string(protocol.Internal)), f.audit.entries[1].Outcome)

	// A handler that answers with a task id bound to another owner is an invalid agent response.
	f.inv.err, f.inv.result = nil, jsontext.Value(`{"task":{"id":"t-new","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}`)
	_, perr = answered(f.d.send(t.Context(), f.call(t, public, lookupText, nil)))
	require.NotNil(t, perr)
	require.Equal(t, protocol.InvalidAgentResponse, perr.Code)
}

// TestAnsweredClarificationNotDeleted: when the answered clarification task cannot be dropped,
// the caller still gets the handler's answer; the failure is logged (the task expires with
// limits.pending_ttl).
func TestAnsweredClarificationNotDeleted(t *testing.T) {
	mem := tasks.NewMemory(0)
	f := newFixture(t, failingDelete{mem})
	pending := tasks.Binding{TaskID: "capgate-1", Pending: true, Candidates: []string{"lookup-invoice", "reconcile-invoice"},
		Issuer: partner.Issuer, Subject: partner.Subject, Tenant: partner.Tenant}
	require.NoError(t, mem.BindPending(t.Context(), pending, f.rev.Config().Limits.PendingTTL, 10))
	raw, perr := answered(f.d.send(t.Context(), f.call(t, partner, onTask("capgate-1", "lookup-invoice"), &pending)))
	require.Nil(t, perr)
	require.NotEmpty(t, raw)
	logged := f.logs.FilterMessageSnippet("answered clarification task not deleted").All()
	require.Len(t, logged, 1)
	require.Equal(t, "d-1", logged[0].ContextMap()["decision_id"])
}

// TestTaskOpsUseTheAdmittedBinding: task operations go to the handler the admitted binding names;
// without one (admission did not run) they fail closed.
func TestTaskOpsUseTheAdmittedBinding(t *testing.T) {
	f := newFixture(t, nil)
	f.inv.result = jsontext.Value(`{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}`)
	req, perr := httpjsonwire.ParseHTTP(protocol.V1, "GET", "/tasks/t-1?historyLength=2", "", nil, protocol.Limits{})
	require.Nil(t, perr)
	b := &tasks.Binding{TaskID: "t-1", Capability: "reconcile-invoice", Handler: "recon.v3.reconcile", Issuer: partner.Issuer, Subject: partner.Subject, Tenant: partner.Tenant}
	call := &exchange.Call{Rev: f.rev, Request: req, Principal: partner, DecisionID: "d-2", Task: b}
	_, perr = answered(f.d.Serve(t.Context(), call))
	require.Nil(t, perr)
	require.Len(t, f.inv.calls, 1)
	require.Equal(t, "GetTask", f.inv.calls[0].Method)
	require.JSONEq(t, `{"id":"t-1","historyLength":2}`, string(f.inv.calls[0].Params), "the path's id and the query reach the handler")

	call.Task = nil
	_, perr = answered(f.d.Serve(t.Context(), call))
	require.NotNil(t, perr)
	require.Equal(t, protocol.Internal, perr.Code)
	require.Len(t, f.inv.calls, 1)
}

// TestListSendsTheTenant: the GetTask calls behind ListTasks carry the
// list's tenant, as the caller's own GetTask would, so a handler that keeps
// tasks apart by tenant finds a task created naming it; a list naming none
// sends none.
func TestListSendsTheTenant(t *testing.T) {
	for _, tc := range []struct{ name, params, want string }{
		{"tenant", `{"tenant":"acme"}`, `{"id":"t-1","historyLength":0,"tenant":"acme"}`},
		{"no tenant", `{}`, `{"id":"t-1","historyLength":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.inv.result = jsontext.Value(`{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}`)
			require.NoError(t, f.store.Bind(t.Context(), tasks.Binding{TaskID: "t-1", Capability: "reconcile-invoice", Handler: "recon.v3.reconcile",
				Issuer: partner.Issuer, Subject: partner.Subject, Tenant: partner.Tenant}))
			req, perr := jsonrpcwire.ParseJSONRPC(protocol.V1, "application/json",
				[]byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":`+tc.params+`}`), protocol.Limits{})
			require.Nil(t, perr)
			raw, perr := answered(f.d.Serve(t.Context(), &exchange.Call{Rev: f.rev, Request: req, Principal: partner, DecisionID: "d-3"}))
			require.Nil(t, perr)
			require.Len(t, f.inv.calls, 1)
			require.Equal(t, "GetTask", f.inv.calls[0].Method)
			require.JSONEq(t, tc.want, string(f.inv.calls[0].Params))
			require.Contains(t, string(raw), `"id":"t-1"`, "the task is listed")
		})
	}
}

// TestHandlerAnswersHoldContexts: the context a handler answers in — a task's, a direct
// message reply's, a streamed event's, a clarification's — becomes the caller's, as the task
// does; an answer in a context another owner holds is refused (InvalidAgentResponse), not passed
// on, and binds nothing.
func TestHandlerAnswersHoldContexts(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, nil)
	owner := tasks.Owner{Issuer: partner.Issuer, Subject: partner.Subject, Tenant: partner.Tenant}
	held := func(id string) tasks.Owner {
		t.Helper()
		c, ok, err := f.store.LookupContext(ctx, id)
		require.NoError(t, err)
		require.True(t, ok, "context %s is held", id)
		return c.Owner()
	}

	f.inv.result = jsontext.Value(`{"task":{"id":"t-a","contextId":"c-task","status":{"state":"TASK_STATE_COMPLETED"}}}`)
	_, perr := answered(f.d.send(ctx, f.call(t, partner, hinted("lookup-invoice"), nil)))
	require.Nil(t, perr)
	require.Equal(t, owner, held("c-task"))

	f.inv.result = jsontext.Value(`{"message":{"messageId":"r-1","role":"ROLE_AGENT","contextId":"c-reply","parts":[{"text":"INV-1 is paid"}]}}`)
	_, perr = answered(f.d.send(ctx, f.call(t, partner, hinted("lookup-invoice"), nil)))
	require.Nil(t, perr)
	require.Equal(t, owner, held("c-reply"), "a direct message reply holds its context too")

	f.inv.result = jsontext.Value(`{"statusUpdate":{"taskId":"t-s","contextId":"c-stream","status":{"state":"TASK_STATE_WORKING"}}}`)
	stream := f.call(t, partner, hinted("lookup-invoice"), nil)
	stream.Request.Operation = protocol.SendStreamingMessage
	relayed, perr := answered(f.d.send(ctx, stream))
	require.Nil(t, perr)
	require.Equal(t, owner, held("c-stream"))
	require.Contains(t, string(relayed), "c-stream")

	// A stream that names its context before its task: the task's binding keeps the context.
	f.inv.events = []jsontext.Value{
		jsontext.Value(`{"message":{"messageId":"r-0","role":"ROLE_AGENT","contextId":"c-later","parts":[{"text":"on it"}]}}`),
		jsontext.Value(`{"task":{"id":"t-later","contextId":"c-later","status":{"state":"TASK_STATE_WORKING"}}}`),
		jsontext.Value(`{"statusUpdate":{"taskId":"t-later","contextId":"c-later","status":{"state":"TASK_STATE_COMPLETED"}}}`),
	}
	stream = f.call(t, partner, hinted("lookup-invoice"), nil) // a new message
	stream.Request.Operation = protocol.SendStreamingMessage
	_, perr = answered(f.d.send(ctx, stream))
	require.Nil(t, perr)
	f.inv.events = nil
	require.Equal(t, owner, held("c-later"))
	b, ok, err := f.store.Lookup(ctx, "t-later")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "c-later", b.ContextID)

	_, err = f.store.ClaimContext(ctx, tasks.Context{ContextID: "c-victim", Issuer: partner.Issuer, Subject: "victim", Tenant: "globex"})
	require.NoError(t, err)
	f.inv.result = jsontext.Value(`{"task":{"id":"t-b","contextId":"c-victim","status":{"state":"TASK_STATE_COMPLETED"}}}`)
	raw, perr := answered(f.d.send(ctx, f.call(t, partner, hinted("lookup-invoice"), nil)))
	require.NotNil(t, perr)
	require.Equal(t, protocol.InvalidAgentResponse, perr.Code)
	require.NotContains(t, perr.Message, "victim")
	require.Nil(t, raw, "the answer is not passed on")
	_, ok, err = f.store.Lookup(ctx, "t-b")
	require.NoError(t, err)
	require.False(t, ok, "nothing is bound")
	require.Equal(t, "victim", held("c-victim").Subject)

	f.inv.result = jsontext.Value(`{"message":{"messageId":"r-2","role":"ROLE_AGENT","contextId":"c-victim","parts":[{"text":"history"}]}}`)
	stream = f.call(t, partner, hinted("lookup-invoice"), nil)
	stream.Request.Operation = protocol.SendStreamingMessage
	relayed, perr = answered(f.d.send(ctx, stream))
	require.NotNil(t, perr, "a streamed event in another owner's context ends the stream")
	require.NotContains(t, string(relayed), "history", "and is not relayed")

	// A clarification opens a context of the caller's, which the reply continues in.
	raw, perr = answered(f.d.send(ctx, f.call(t, partner, vague, nil)))
	require.Nil(t, perr)
	var clar struct {
		Task struct {
			ContextID string `json:"contextId"`
		} `json:"task"`
	}
	require.NoError(t, json.Unmarshal(raw, &clar), "%s", raw)
	require.NotEmpty(t, clar.Task.ContextID)
	require.Equal(t, owner, held(clar.Task.ContextID))
}

// countingStore counts the bindings a store hands over to ListTasks.
type countingStore struct {
	*tasks.Memory
	read atomic.Int64
}

func (c *countingStore) Owned(ctx context.Context, o tasks.Owner) ([]tasks.Binding, error) {
	out, err := c.Memory.Owned(ctx, o)
	c.read.Add(int64(len(out)))
	return out, err
}

func (c *countingStore) OwnedPage(ctx context.Context, o tasks.Owner, after *tasks.Position, contextID string, limit int) (tasks.Page, error) {
	p, err := c.Memory.OwnedPage(ctx, o, after, contextID, limit)
	c.read.Add(int64(len(p.Bindings)))
	return p, err
}

// TestListReadsOnePage: a ListTasks of 50 by an owner of 10,000 tasks
// reads about 50 bindings from the store, not 10,000 (issue #22's soak: the
// whole set was read per call), and the next page continues where it
// stopped.
func TestListReadsOnePage(t *testing.T) {
	const owned = 10_000
	store := &countingStore{Memory: tasks.NewMemory(0)}
	f := newFixture(t, store)
	base := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	for i := range owned {
		// Clarification tasks: listed from the store alone.
		require.NoError(t, store.BindPending(t.Context(), tasks.Binding{TaskID: fmt.Sprintf("t-%05d", i), ContextID: "c-1", Pending: true,
			Candidates: []string{"lookup-invoice"}, Issuer: partner.Issuer, Subject: partner.Subject, Tenant: partner.Tenant,
			CreatedAt: base.Add(time.Duration(i) * time.Second)}, time.Hour, owned))
	}
	list := func(params string) (ids []string, next string) {
		req, perr := jsonrpcwire.ParseJSONRPC(protocol.V1, "application/json",
			[]byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":`+params+`}`), protocol.Limits{})
		require.Nil(t, perr)
		raw, perr := answered(f.d.Serve(t.Context(), &exchange.Call{Rev: f.rev, Request: req, Principal: partner, DecisionID: "d-4"}))
		require.Nil(t, perr)
		var res struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
			NextPageToken string `json:"nextPageToken"`
		}
		require.NoError(t, json.Unmarshal(raw, &res), string(raw))
		for _, task := range res.Tasks {
			ids = append(ids, task.ID)
		}
		return ids, res.NextPageToken
	}
	for _, params := range []string{`{"pageSize":50}`, `{"pageSize":50,"contextId":"c-1"}`} {
		store.read.Store(0)
		first, next := list(params)
		require.Len(t, first, 50)
		require.Equal(t, "t-09999", first[0], "newest first")
		require.NotEmpty(t, next)
		require.LessOrEqual(t, store.read.Load(), int64(51), "%s: bindings read for a page of 50", params)

		store.read.Store(0)
		second, _ := list(strings.TrimSuffix(params, "}") + `,"pageToken":"` + next + `"}`)
		require.Len(t, second, 50)
		require.Equal(t, "t-09949", second[0], "the next page continues after the first")
		require.LessOrEqual(t, store.read.Load(), int64(51))
	}
}
