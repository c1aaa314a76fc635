package dispatch

import (
	"context"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/audit"
	"github.com/capgate/capgate/sidecar/enforce"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/router"
	"github.com/capgate/capgate/sidecar/tasks"
)

// send routes a message and forwards it to the chosen capability's handler.
// Admission has already decided who may send it (and owns every task it
// names); send decides only where it goes.
//
// Before anything else the message is reserved for its owner (reserve): a message the store
// cannot record is refused before any handler call, and a retry of one already sent is
// answered with the first call's task, never sent to the handler again.
func (d *Dispatcher) send(ctx context.Context, call *exchange.Call) (exchange.Result, *protocol.Error) {
	if call.Request.Message == nil {
		return exchange.Result{}, protocol.Errorf(protocol.InvalidParams, "params.message is required")
	}
	// The params the handler is sent, as admission read them: the reservation fingerprints
	// them (a retry repeats them) and the route forwards them.
	params, perr := call.Request.ForwardParams()
	if perr != nil {
		return exchange.Result{}, perr
	}
	rsv, replayed, perr := d.reserve(ctx, call, params)
	if perr != nil {
		return exchange.Result{}, perr
	}
	if replayed != nil {
		return *replayed, nil
	}
	r, perr := d.route(ctx, call, params)
	if perr != nil {
		rsv.release(ctx)
		return exchange.Result{}, perr
	}
	if r.clarify != nil {
		// capgate answers itself; no handler is called, and a retry asks again.
		rsv.release(ctx)
		if r.clarify.decision.Layer == router.LayerDeclined {
			return d.decline(ctx, call, r.pending)
		}
		return d.clarify(ctx, call, *r.clarify)
	}
	return d.forward(ctx, call, r, rsv)
}

// routed is where a message goes: the routing decision, the params to send,
// and the clarification task it answers, if any; or, instead, the
// clarification to ask.
type routed struct {
	decision router.Decision
	params   jsontext.Value
	// msg is the message the handler receives when it is not the request's
	// (the first message's parts held by a clarification, with the answer).
	msg     *protocol.MessageInfo
	pending *tasks.Binding
	clarify *clarification
	// example is the text of the first message a clarification held, when
	// this message answers it (a candidate routing example: learn.go).
	example string
}

// clarification is a question back to the caller: which of the candidates
// (or, LayerConfirm, this one?). taskID is the clarification task asked
// again ("" for a new one); held the first message's parts to keep, with
// its version and messageId.
type clarification struct {
	decision                   router.Decision
	taskID, contextID          string
	held                       []byte
	heldVersion, heldMessageID string
}

// route decides where a message goes, cheapest layer first: the task it
// continues (bound by admission), the reply to a clarification (resolved
// among the offered candidates), else the router's layers (hint, single
// candidate, structured data, classifier) and, when unsure, the optional
// model router; still unsure, a clarification.
func (d *Dispatcher) route(ctx context.Context, call *exchange.Call, params jsontext.Value) (routed, *protocol.Error) {
	req := call.Request
	msg := req.Message
	rev := call.Rev
	rg, err := router.NewRights(ctx, rev.Engine, call.Principal.Caller())
	if err != nil {
		return routed{}, protocol.Wrap(protocol.Internal, err, "the policy could not be evaluated")
	}
	var perr *protocol.Error
	if msg.TaskID != "" {
		b, perr := bound(call)
		if perr != nil {
			return routed{}, perr
		}
		if !b.Pending {
			return routed{decision: router.Decision{Layer: router.LayerTask, Capability: b.Capability, Confidence: 1}, params: params}, nil
		}
		// The reply to a clarification: resolve it among the offered
		// capabilities; the handler starts a task of its own.
		dec, perr := rev.Router.Resolve(msg, b.Candidates, rg)
		if perr != nil {
			return routed{}, perr
		}
		if dec.Capability == "" {
			return routed{pending: &b, clarify: &clarification{decision: dec, taskID: b.TaskID, contextID: b.ContextID,
				held: b.Held, heldVersion: b.HeldVersion, heldMessageID: b.HeldMessageID}}, nil
		}
		if params, err = withoutTaskID(params, req.Version); err != nil {
			return routed{}, protocol.Wrap(protocol.InvalidParams, err, "params.message could not be rewritten")
		}
		r := routed{decision: dec, params: params, pending: &b}
		if len(b.Held) > 0 {
			if r.params, r.msg, perr = withHeld(call, params, b); perr != nil {
				return routed{}, perr
			}
			r.example = heldText(r.msg, b.Held)
		}
		return r, nil
	}
	dec, perr := rev.Router.Route(msg, rg)
	if perr != nil || dec.Capability != msg.SkillHint {
		d.noteRequested(ctx, call, msg.SkillHint)
	}
	if perr != nil {
		return routed{}, perr
	}
	if dec.IgnoredHint != "" {
		// A hint is client text: it is named only when it is a capability id.
		if _, known := rev.Registry().Get(dec.IgnoredHint); known {
			d.log.Info("skill hint ignored", zap.String("decision_id", call.DecisionID), zap.String("hint", dec.IgnoredHint))
		} else {
			d.log.Info("skill hint ignored", zap.String("decision_id", call.DecisionID), zap.Bool("hint_known", false), zap.Int("hint_bytes", len(dec.IgnoredHint)))
		}
	}
	if dec.Layer == router.LayerClarify {
		if dec = d.askModel(ctx, call, msg, dec); dec.Layer == router.LayerModel {
			dec = rev.Router.Policy(dec) // the model's pick is the router's: confirm and explicit hold
		}
	}
	if dec.Capability == "" { // a clarification or a confirmation
		held, perr := heldParts(params)
		if perr != nil {
			return routed{}, perr
		}
		return routed{clarify: &clarification{decision: dec, contextID: msg.ContextID, held: held, heldVersion: string(req.Version),
			heldMessageID: msg.MessageID}}, nil
	}
	return routed{decision: dec, params: params}, nil
}

// noteRequested records, for the decision log, the policy's answer on a
// capability the caller named by skill hint but was not routed to: the
// question `capgate access replay` asks again. A hint that is not a known
// capability id is client text and is not recorded.
func (d *Dispatcher) noteRequested(ctx context.Context, call *exchange.Call, hint string) {
	if hint == "" || call.Log == nil {
		return
	}
	if _, known := call.Rev.Registry().Get(hint); !known {
		return
	}
	dec, err := call.Rev.Engine.Decide(ctx, call.Principal.Caller(), hint)
	if err != nil {
		return // the decision log only misses the hint's answer
	}
	call.Log.Requested, call.Log.RequestedEntitled, call.Log.RequestedRules = hint, dec.Entitled, dec.EntitledReasons
}

// forward re-checks entitlement to the routed capability at the moment of the
// call, enforces its limits, calls its handler with the caller's downscoped
// credential, binds the task the handler answers with to the capability and
// its owner (and the context it answers in to the same owner), and answers
// with the handler's result. An answer in another context than the message's
// (answerContext) is refused and binds nothing (inContext).
//
// rsv is the message's reservation: released when no handler is called or the handler refuses
// the message, settled with the task it answers with before that task is bound (so that a
// retry finds it even when the binding fails), marked lost when the handler's effect is
// unknown.
func (d *Dispatcher) forward(ctx context.Context, call *exchange.Call, r routed, rsv *reservation) (exchange.Result, *protocol.Error) {
	res, called, perr := d.forwardOnce(ctx, call, r, rsv)
	if perr != nil && !called {
		rsv.release(ctx)
	}
	return res, perr
}

// forwardOnce is forward; called reports whether the handler was called (a stream's handler is
// called by the stream, which keeps the reservation itself).
func (d *Dispatcher) forwardOnce(ctx context.Context, call *exchange.Call, r routed, rsv *reservation) (_ exchange.Result, called bool, _ *protocol.Error) {
	req, decision := call.Request, r.decision
	d.m.Routes.WithLabelValues(string(decision.Layer)).Inc()
	if call.Log != nil {
		call.Log.Capability, call.Log.Layer, call.Log.Confidence = decision.Capability, string(decision.Layer), decision.Confidence
	}
	capability, dec, perr := d.recheckDecision(ctx, call, call.Rev.Router, decision.Capability)
	if perr != nil {
		return exchange.Result{}, false, perr
	}
	limits := dec.Limits
	msg := req.Message
	if r.msg != nil {
		msg = r.msg
	}
	if perr := enforce.Limits(capability.ID, limits, msg, len(r.params)); perr != nil {
		return exchange.Result{}, false, perr
	}
	if perr := d.charge(ctx, call, capability.ID, dec.Quotas); perr != nil {
		return exchange.Result{}, false, perr
	}
	inv, perr := d.handlerRequest(ctx, call, capability, limits, r.params)
	if perr != nil {
		return exchange.Result{}, false, perr
	}
	if ce := d.log.Check(zap.DebugLevel, "routed"); ce != nil { // no fields built when debug is off
		ce.Write(zap.String("decision_id", call.DecisionID), zap.String("capability", capability.ID),
			zap.String("layer", string(decision.Layer)), zap.Float64("confidence", decision.Confidence))
	}
	want, pending := answerContext(call), r.pending // the closures below keep these, not all of r
	bind := func(taskID, contextID string) *protocol.Error {
		o := ownerOf(call)
		if t := call.Task; t != nil && !t.Pending && (taskID == t.TaskID || taskID == "") {
			o = t.Owner() // the task continues under the owner it was bound to
		}
		if contextID != "" {
			if perr := d.holdContext(ctx, call, o, contextID); perr != nil {
				return perr
			}
		}
		if taskID == "" {
			return nil // a direct message reply creates no task
		}
		b := tasks.Binding{TaskID: taskID, ContextID: contextID, Capability: capability.ID, Handler: capability.Handler,
			Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant, CreatedAt: d.now()}
		if err := d.bindTask(ctx, rsv, b); err != nil {
			return storeError(err)
		}
		if pending != nil && pending.TaskID != taskID {
			// The clarification is answered. A failure to drop it is not the
			// caller's: it expires with limits.pending_ttl.
			if err := d.store.Delete(ctx, pending.TaskID); err != nil {
				d.log.Warn("answered clarification task not deleted; it expires with limits.pending_ttl",
					zap.String("decision_id", call.DecisionID), zap.Error(err))
			}
		}
		return nil
	}
	// record settles the reservation with the task the handler answered with, then binds it:
	// a binding that fails after the handler's call leaves the outcome unknown to the caller.
	record := func(taskID, contextID string) *protocol.Error {
		// An answer in another context than the message's is neither settled nor bound: a
		// retry must not find it, and its context must not become the caller's.
		if perr := d.inContext(call, want, contextID); perr != nil {
			return perr
		}
		// A task bound without its settled record is the caller's all the same: only a retry
		// of the message would find it in progress, then unknown.
		// With a task, a store that can settles the record in the bind's round trip (settleWithBind, bindTask).
		if taskID == "" || !rsv.settleWithBind(taskID, contextID, capability.ID, capability.Handler) {
			_ = rsv.settle(ctx, taskID, contextID, capability.ID, capability.Handler)
		}
		return handled(bind(taskID, contextID))
	}
	example := d.candidateExample(call, r, capability)
	if req.Operation == protocol.SendStreamingMessage {
		d.countCall(ctx, capability, nil) // a stream keeps its reservation itself
		return d.learnFromStream(ctx, call, d.stream(ctx, call, inv, record, rsv), capability.ID, example), true, nil
	}
	d.countCall(ctx, capability, rsv)
	result, perr := d.callHandler(ctx, inv)
	if perr != nil {
		rsv.failed(ctx, perr)
		return exchange.Result{}, true, d.replyRefused(ctx, call, inv, perr)
	}
	taskID, contextID, kind := probe(result, req.Version)
	if kind == 0 {
		rsv.lose(ctx)
		return exchange.Result{}, true, protocol.Errorf(protocol.InvalidAgentResponse, "the handler's answer is not a task or message")
	}
	if perr := record(taskID, contextID); perr != nil {
		rsv.lose(ctx)
		return exchange.Result{}, true, perr
	}
	if example != "" && !unsuccessful(result) { // the answer is read only when there is an example to keep
		d.keepExample(ctx, call, capability.ID, example)
	}
	return exchange.Value(kind, result), true, nil
}

// holdContext records that the context a handler answered in (or capgate's
// clarification opened) is o's, as a binding records a task's owner. A context
// another owner holds means the handler filed this caller's work in someone
// else's conversation: the answer is not passed on.
func (d *Dispatcher) holdContext(ctx context.Context, call *exchange.Call, o tasks.Owner, contextID string) *protocol.Error {
	held, err := d.store.ClaimContext(ctx, tasks.Context{ContextID: contextID, Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant, CreatedAt: d.now()})
	if err != nil {
		return storeError(err)
	}
	if held.Owner() == o || held.OwnedBy(ownerOf(call)) {
		return nil
	}
	d.log.Warn("handler answered in another owner's context; answer refused", zap.String("decision_id", call.DecisionID),
		zap.String("context", protocol.ForLog(contextID)))
	return protocol.Errorf(protocol.InvalidAgentResponse, "the handler returned a context id that is already bound elsewhere")
}

// invocation is one handler call and what it was granted.
type invocation struct {
	call       *exchange.Call
	capability *manifest.Capability
	scopes     []string
	req        handler.Request
	// accepted and produced are the output modes of a refused answer.
	accepted, produced []string
}

// handlerRequest builds the call to the capability's handler with the
// caller's downscoped credential.
func (d *Dispatcher) handlerRequest(ctx context.Context, call *exchange.Call, m *manifest.Capability, limits map[string]any, params jsontext.Value) (invocation, *protocol.Error) {
	scopes := grantedScopes(call.Principal.Scopes, m.ScopesFor(call.Principal.Scopes))
	tok, err := d.tokens.HandlerToken(ctx, Grant{Call: call, Capability: m, Scopes: scopes, Limits: limits})
	if err != nil {
		perr := protocol.Wrap(protocol.Unauthorized, err, "a credential for the handler could not be obtained")
		d.record(invocation{call: call, capability: m, scopes: scopes}, 0, perr)
		return invocation{}, perr
	}
	method := protocol.MethodName(call.Request.Version, call.Request.Operation)
	if call.Request.Operation == protocol.ExtensionMethod {
		method = call.Request.Method // the extension's own method, as sent
	}
	req := handler.Request{
		Handler:    m.Handler,
		Version:    call.Request.Version,
		Method:     method,
		Params:     params,
		Token:      tok,
		Extensions: call.Extensions,
		DecisionID: call.DecisionID,
	}
	if call.Rev.Config().Identity.ForwardCallerToken {
		req.CallerAuthorization = call.Header.Get("Authorization")
	}
	return invocation{call: call, capability: m, scopes: scopes, req: req}, nil
}

// callHandler makes a unary handler call and audits it. A SendMessage
// answer with no part in a mode the caller accepts is refused
// (enforce.OutputModes) and audited as such.
func (d *Dispatcher) callHandler(ctx context.Context, inv invocation) (jsontext.Value, *protocol.Error) {
	start := d.now()
	result, perr := d.invoker.Call(ctx, inv.req)
	if msg := inv.call.Request.Message; perr == nil && msg != nil && inv.call.Request.Operation == protocol.SendMessage {
		if produced, oerr := enforce.OutputModes(inv.capability.ID, msg.AcceptedOutputModes, result, inv.call.Request.Version); oerr != nil {
			result, perr = nil, oerr
			inv.accepted, inv.produced = enforce.ClipModes(msg.AcceptedOutputModes), produced
		}
	}
	d.record(inv, d.now().Sub(start), perr)
	return result, perr
}

// record writes one audit line for a handler invocation.
func (d *Dispatcher) record(inv invocation, dur time.Duration, perr *protocol.Error) {
	if d.audit == nil {
		return
	}
	outcome := audit.OutcomeOK
	if perr != nil {
		outcome = audit.Failed(string(perr.Code))
	}
	p := inv.call.Principal
	d.audit.Log(audit.Entry{
		DecisionID: inv.call.DecisionID,
		Principal:  p.Subject,
		Tenant:     p.Tenant,
		Actor:      p.Actor,
		Capability: inv.capability.ID,
		Handler:    inv.capability.Handler,
		Scopes:     inv.scopes,
		Outcome:    outcome,
		Duration:   dur,
		Operation:  string(inv.call.Request.Operation),
		Accepted:   inv.accepted,
		Produced:   inv.produced,
		Span:       inv.call.Log.Span,
	})
}

// countCall counts a call of m: in the round trip that settles or releases rsv when the store
// can (reservation.countLater), else at once.
func (d *Dispatcher) countCall(ctx context.Context, m *manifest.Capability, rsv *reservation) {
	d.m.CapabilityCalls.WithLabelValues(m.ID, string(m.State)).Inc()
	if rsv.countLater(d.store, m.ID, d.now()) {
		return
	}
	if err := d.store.RecordCall(context.WithoutCancel(ctx), m.ID, d.now()); err != nil {
		d.uncounted(m.ID, err)
	}
}

// uncounted logs a call of capability the store did not count.
func (d *Dispatcher) uncounted(capability string, err error) {
	d.log.Warn("usage not recorded", zap.String("capability", capability), zap.Error(err))
}

// askModel gives the optional model-based router the candidates the
// classifier was unsure about. Any failure or doubt keeps the clarification.
func (d *Dispatcher) askModel(ctx context.Context, call *exchange.Call, msg *protocol.MessageInfo, dec router.Decision) router.Decision {
	model := call.Rev.Model
	if model == nil || len(dec.Candidates) < 2 {
		return dec
	}
	caps := make([]*manifest.Capability, 0, len(dec.Candidates))
	for _, c := range dec.Candidates {
		if m, ok := call.Rev.Registry().Get(c.ID); ok {
			caps = append(caps, m)
		}
	}
	choice, err := model.Choose(ctx, router.MessageText(msg), caps, call.Rev.Router.Threshold())
	if err != nil {
		d.log.Info("model router made no choice", zap.String("decision_id", call.DecisionID), zap.Error(err))
		return dec
	}
	return router.Decision{Layer: router.LayerModel, Capability: choice.ID, Confidence: choice.Confidence, Candidates: dec.Candidates}
}

// extensionMethod forwards a method an extension adds to the handler of the capability that
// serves it (admission checked the extension is active and the caller entitled); the answer is
// the handler's, unchanged.
func (d *Dispatcher) extensionMethod(ctx context.Context, call *exchange.Call) (exchange.Result, *protocol.Error) {
	x := call.Request.Extension
	if x == nil {
		return exchange.Result{}, protocol.Errorf(protocol.Internal, "the method's extension is not known")
	}
	if call.Log != nil {
		call.Log.Capability, call.Log.Layer = x.Capability, "extension"
	}
	capability, limits, perr := d.recheck(ctx, call, call.Rev.Router, x.Capability)
	if perr != nil {
		return exchange.Result{}, perr
	}
	params, perr := call.Request.ForwardParams()
	if perr != nil {
		return exchange.Result{}, perr
	}
	inv, perr := d.handlerRequest(ctx, call, capability, limits, params)
	if perr != nil {
		return exchange.Result{}, perr
	}
	d.countCall(ctx, capability, nil)
	result, perr := d.callHandler(ctx, inv)
	if perr != nil {
		return exchange.Result{}, perr
	}
	return exchange.Value(protocol.KindExtension, result), nil
}
