// Package dispatch carries message and task operations from the gateway to
// skill handlers: it resolves continuing tasks (owner only), asks the router
// for new messages, re-checks entitlement at the moment of the call, mints
// the caller's downscoped token for the handler, binds the task the handler
// creates to its capability and owner, and counts usage.
package dispatch

import (
	"context"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/audit"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/delegation"
	"github.com/capgate/capgate/sidecar/gateway"
	"github.com/capgate/capgate/sidecar/handler"
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
	Call       *gateway.Call
	Capability *manifest.Capability
	Scopes     []string
	// Limits are the capability's limits from the policy decision.
	Limits map[string]any
}

// Auditor records handler invocations on the audit stream.
type Auditor interface {
	Log(e audit.Entry)
}

// Dispatcher implements gateway.Operations.
type Dispatcher struct {
	store   tasks.Store
	invoker Invoker
	tokens  Tokens
	audit   Auditor
	log     *zap.Logger
	m       *metrics.Metrics
	now     func() time.Time
	// keepAlive is the SSE keep-alive interval of relayed streams (0: none).
	keepAlive time.Duration
	// pageKey is the HMAC key of ListTasks page tokens (WithPageTokenKey).
	pageKey []byte
}

var _ gateway.Operations = (*Dispatcher)(nil)

// Option configures a Dispatcher.
type Option func(*Dispatcher)

// WithLogger sets the logger.
func WithLogger(l *zap.Logger) Option { return func(d *Dispatcher) { d.log = l } }

// WithMetrics sets the collectors.
func WithMetrics(m *metrics.Metrics) Option { return func(d *Dispatcher) { d.m = m } }

// WithAudit records every handler invocation (nil: none).
func WithAudit(a Auditor) Option { return func(d *Dispatcher) { d.audit = a } }

// WithStreamKeepAlive sends an SSE comment on a relayed stream that has been
// quiet for every (config limits.stream_keepalive; 0, the default: none).
func WithStreamKeepAlive(every time.Duration) Option {
	return func(d *Dispatcher) { d.keepAlive = every }
}

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) Option { return func(d *Dispatcher) { d.now = now } }

// New returns a dispatcher. All three dependencies are required.
func New(store tasks.Store, invoker Invoker, tokens Tokens, opts ...Option) *Dispatcher {
	d := &Dispatcher{store: store, invoker: invoker, tokens: tokens, now: time.Now}
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

// Serve implements gateway.Operations.
func (d *Dispatcher) Serve(ctx context.Context, call *gateway.Call, w gateway.Responder) *protocol.Error {
	if call.Log == nil {
		call.Log = &decisionlog.Entry{} // a call made without the gateway's entry (tests, embedders)
	}
	req := call.Request
	switch req.Operation {
	case protocol.SendMessage, protocol.SendStreamingMessage:
		return d.send(ctx, call, w)
	case protocol.ListTasks:
		return d.list(ctx, call, w)
	case protocol.ExtensionMethod:
		return d.extensionMethod(ctx, call, w)
	}
	if req.Operation.TargetsTask() {
		return d.taskOp(ctx, call, w)
	}
	return protocol.Errorf(protocol.UnsupportedOperation, "%s is not supported by this agent", req.Operation)
}

// bound is the task admission found the caller owns (gateway.Call.Task). Ownership is
// admission's rule alone: the dispatcher never decides it again.
func bound(call *gateway.Call) (tasks.Binding, *protocol.Error) {
	if call.Task == nil {
		return tasks.Binding{}, protocol.Errorf(protocol.Internal, "the task was not admitted")
	}
	return *call.Task, nil
}

// ownerOf is the owner tasks the caller creates are bound to.
func ownerOf(call *gateway.Call) tasks.Owner {
	return admission.OwnerOf(call.Rev, call.Principal)
}

func storeError(err error) *protocol.Error { return admission.StoreError(err) }

// recheck re-decides entitlement for a capability at the moment of the call
// (at the revision served now; the engine caches the decision per class),
// with reasons for the decision log. It returns the capability and the
// limits the decision carries.
func (d *Dispatcher) recheck(ctx context.Context, call *gateway.Call, rt *router.Index, capID string) (*manifest.Capability, map[string]any, *protocol.Error) {
	if err := rt.Tombstone(capID); err != nil {
		return nil, nil, err
	}
	m, ok := call.Rev.Registry().Get(capID)
	if !ok {
		return nil, nil, protocol.Errorf(protocol.TaskNotFound, "the capability of this task no longer exists").Decided(decisionlog.RuleRemoved, capID)
	}
	dec, err := call.Rev.Engine.Decide(ctx, call.Principal.Caller(), capID)
	if err != nil {
		return nil, nil, protocol.Wrap(protocol.Internal, err, "the policy could not be evaluated")
	}
	if call.Log != nil {
		call.Log.Rules = dec.EntitledReasons // the rules that decided, for the decision log
		call.Log.Decided, call.Log.Entitled = true, dec.Entitled
	}
	if !dec.Entitled {
		if !call.Principal.Authenticated {
			return nil, nil, protocol.MissingCredentials()
		}
		return nil, nil, protocol.Errorf(protocol.Unauthorized, "the caller is not entitled to capability %s", capID)
	}
	return m, dec.Limits, nil
}

// grantedScopes is the caller's scopes ∩ the capability's requires_scopes,
// sorted; never nil, so reports show an empty list rather than null.
func grantedScopes(callerScopes, required []string) []string {
	if s := delegation.Narrow(callerScopes, required); s != nil {
		return s
	}
	return []string{}
}
