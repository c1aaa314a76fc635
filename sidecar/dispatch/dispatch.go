// Package dispatch carries message and task operations, once admission
// admitted them (ownership of every task and context is admission's), from
// the gateway to skill handlers: it reserves a message's id before any
// handler runs (a retry is answered from the first call), continues the task
// admission resolved or asks the router for a new message's capability,
// re-checks entitlement at the moment of the call, mints the caller's
// downscoped token for the handler, refuses an answer in another context than
// the message's, binds the task the handler creates to its capability and
// owner, and counts usage. It answers with binding-neutral values
// (exchange.Result: a result or a stream of events); the gateway writes them
// in the caller's binding.
package dispatch

import (
	"context"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/audit"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/delegation"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/metering"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/router"
	"github.com/capgate/capgate/sidecar/tasks"
)

// Invoker calls a skill handler (builtin or upstream). Stream's yield gets
// each event's result for the duration of the call only (the invoker reads
// the next event into the same buffer).
type Invoker interface {
	Call(ctx context.Context, req handler.Request) (jsontext.Value, *protocol.Error)
	Stream(ctx context.Context, req handler.Request, yield func(result jsontext.Value) error) *protocol.Error
}

// Tokens issues the credential a handler call carries.
type Tokens interface {
	HandlerToken(ctx context.Context, g Grant) (string, error)
}

// Grant is what a handler call is allowed: this caller, this capability,
// the caller's scopes narrowed to the capability's requires_scopes.
type Grant struct {
	Call       *exchange.Call
	Capability *manifest.Capability
	Scopes     []string
	// Limits are the capability's limits from the policy decision.
	Limits map[string]any
}

// Auditor records handler invocations on the audit stream.
type Auditor interface {
	Log(e audit.Entry)
}

// Dispatcher implements exchange.Server.
type Dispatcher struct {
	store   tasks.Store
	invoker Invoker
	tokens  Tokens
	audit   Auditor
	log     *zap.Logger
	m       *metrics.Metrics
	now     func() time.Time
	// pageKey is the HMAC key of ListTasks page tokens (WithPageTokenKey).
	pageKey []byte
	// learner keeps candidate routing examples: the store, when it can (learn.go).
	learner Learner
	// quotas counts routed messages against their quotas (WithQuotas).
	quotas *metering.Enforcer
}

var _ exchange.Server = (*Dispatcher)(nil)

// Option configures a Dispatcher.
type Option func(*Dispatcher)

// WithLogger sets the logger.
func WithLogger(l *zap.Logger) Option { return func(d *Dispatcher) { d.log = l } }

// WithMetrics sets the collectors.
func WithMetrics(m *metrics.Metrics) Option { return func(d *Dispatcher) { d.m = m } }

// WithAudit records every handler invocation (nil: none).
func WithAudit(a Auditor) Option { return func(d *Dispatcher) { d.audit = a } }

// WithQuotas counts each routed message against its quotas before its handler is called (nil:
// not enforced). Calls whose capability admission knows are charged there (admission.ChargedHere).
func WithQuotas(e *metering.Enforcer) Option { return func(d *Dispatcher) { d.quotas = e } }

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) Option { return func(d *Dispatcher) { d.now = now } }

// New returns a dispatcher. All three dependencies are required.
func New(store tasks.Store, invoker Invoker, tokens Tokens, opts ...Option) *Dispatcher {
	d := &Dispatcher{store: store, invoker: invoker, tokens: tokens, now: time.Now}
	d.learner, _ = store.(Learner)
	for _, o := range opts {
		o(d)
	}
	if d.log == nil {
		d.log = zap.NewNop()
	}
	if d.m == nil {
		d.m = metrics.New()
	}
	if d.pageKey == nil {
		d.pageKey = newPageKey()
	}
	return d
}

// Serve implements exchange.Server.
func (d *Dispatcher) Serve(ctx context.Context, call *exchange.Call) (exchange.Result, *protocol.Error) {
	if call.Log == nil {
		call.Log = &decisionlog.Entry{} // a call made without the gateway's entry (tests, embedders)
	}
	req := call.Request
	switch req.Operation {
	case protocol.SendMessage, protocol.SendStreamingMessage:
		return d.send(ctx, call)
	case protocol.ListTasks:
		return d.list(ctx, call)
	case protocol.ExtensionMethod:
		return d.extensionMethod(ctx, call)
	}
	if req.Operation.TargetsTask() {
		return d.taskOp(ctx, call)
	}
	return exchange.Result{}, protocol.Errorf(protocol.UnsupportedOperation, "%s is not supported by this agent", req.Operation)
}

// bound is the task admission found the caller owns (exchange.Call.Task). Ownership is
// admission's rule alone: the dispatcher never decides it again.
func bound(call *exchange.Call) (tasks.Binding, *protocol.Error) {
	if call.Task == nil {
		return tasks.Binding{}, protocol.Errorf(protocol.Internal, "the task was not admitted")
	}
	return *call.Task, nil
}

// ownerOf is the owner tasks the caller creates are bound to.
func ownerOf(call *exchange.Call) tasks.Owner {
	return admission.OwnerOf(call.Rev, call.Principal)
}

func storeError(err error) *protocol.Error { return admission.StoreError(err) }

// recheck re-decides entitlement for a capability at the moment of the call
// (at the revision served now; the engine caches the decision per class),
// with reasons for the decision log. It returns the capability and the
// limits the decision carries.
func (d *Dispatcher) recheck(ctx context.Context, call *exchange.Call, rt *router.Index, capID string) (*manifest.Capability, map[string]any, *protocol.Error) {
	m, dec, perr := d.recheckDecision(ctx, call, rt, capID)
	return m, dec.Limits, perr
}

// recheckDecision is recheck with the whole decision: its quotas are what a routed message is
// charged (charge), without deciding a second time.
func (d *Dispatcher) recheckDecision(ctx context.Context, call *exchange.Call, rt *router.Index, capID string) (*manifest.Capability, engine.Decision, *protocol.Error) {
	if err := rt.Tombstone(capID); err != nil {
		return nil, engine.Decision{}, err
	}
	m, ok := call.Rev.Registry().Get(capID)
	if !ok {
		return nil, engine.Decision{}, protocol.Errorf(protocol.TaskNotFound, "the capability of this task no longer exists").Decided(decisionlog.RuleRemoved, capID)
	}
	dec, err := call.Rev.Engine.Decide(ctx, call.Principal.Caller(), capID)
	if err != nil {
		return nil, engine.Decision{}, protocol.Wrap(protocol.Internal, err, "the policy could not be evaluated")
	}
	if call.Log != nil {
		call.Log.Rules = dec.EntitledReasons // the rules that decided, for the decision log
		call.Log.Decided, call.Log.Entitled = true, dec.Entitled
		if dec.Entitled {
			call.Log.Limits = dec.Limits
		}
	}
	if !dec.Entitled {
		return nil, engine.Decision{}, admission.NotEntitled(call.Principal, "capability "+capID)
	}
	return m, dec, nil
}

// grantedScopes is the caller's scopes ∩ the scopes the capability requires
// of it (requires_scopes and the requires_any_of alternatives it holds, see
// manifest.Capability.ScopesFor), sorted; never nil, so reports show an empty list rather than null.
func grantedScopes(callerScopes, required []string) []string {
	if s := delegation.Narrow(callerScopes, required); s != nil {
		return s
	}
	return []string{}
}
