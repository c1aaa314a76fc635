package dispatch

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tasks"
)

// Once per message: before a message is routed, its messageId is reserved for its owner in
// the store (tasks.Messages), so that no handler is called for a message the store cannot
// record, and a retry of a message already sent does not call the handler again (docs/
// operations.md, "Retries and messageId"). The reservation is settled with the task the
// handler answered with, released when no handler accepted the message, and marked lost
// when the handler's effect is unknown.

// deadlineSlack is added to the handler's own bound (limits.handler_timeout, or
// limits.stream_idle_timeout for the first event of a stream) for routing, the handler's
// credential and the store's writes: a reservation not settled by then is not in progress
// any more, and its outcome is unknown.
const deadlineSlack = 30 * time.Second

// reservation is the record of one message being sent, and what the dispatcher did with it.
// A nil reservation keeps nothing (an anonymous caller, or a message without an id): its
// methods do nothing.
type reservation struct {
	d      *Dispatcher
	s      tasks.Sent
	window time.Duration
	// settled: the record says what became of the message (settle, lose or release ran).
	settled    bool
	decisionID string // for the warnings (a logger With it per message would cost a copy each)
	// count is the capability call (Store.RecordCall) the store counts in the round trip that
	// settles or releases the record (tasks.CountingMessages; countLater); "" when none.
	count tasks.Call
	// withBind: the record is settled with the task's binding, in its round trip
	// (settleWithBind, bind).
	withBind bool
}

// settleWithBind arranges that the record is settled with the task taskID (in contextID, bound
// to capability and handler) in the round trip that binds it (bind), when the store can
// (tasks.SettlingBinder), and reports whether it will be. The record is still written before
// the binding (bindTask); a failure before the bind (the context's claim) leaves it unsettled,
// and the call then marks it lost, as any answer capgate could not bind.
func (r *reservation) settleWithBind(taskID, contextID, capability, handler string) bool {
	if r == nil || r.settled {
		return false
	}
	if _, ok := r.d.store.(tasks.SettlingBinder); !ok {
		return false
	}
	r.s.TaskID, r.s.ContextID, r.s.Capability, r.s.Handler = taskID, contextID, capability, handler
	r.withBind = true
	return true
}

// bindTask binds b: with rsv's settlement (and the call's count) when settleWithBind arranged
// it, else on its own (Store.Bind; rsv may be nil).
func (d *Dispatcher) bindTask(ctx context.Context, rsv *reservation, b tasks.Binding) error {
	sb, ok := d.store.(tasks.SettlingBinder)
	if rsv == nil || !ok || !rsv.withBind || rsv.settled {
		return d.store.Bind(ctx, b)
	}
	r := rsv
	r.withBind = false
	c := r.count
	r.count = tasks.Call{} // counted once, whatever becomes of the record
	err, cerr, berr := sb.SettleBind(context.WithoutCancel(ctx), r.s, r.window, c, b)
	if cerr != nil {
		r.d.uncounted(c.Capability, cerr)
	}
	if err != nil {
		r.warn("message answer not recorded", err)
	} else {
		r.settled = true
	}
	return berr
}

// countLater arranges that the call of capability at t is counted with the record's settlement
// or release, in its round trip, when store can (tasks.CountingMessages), and reports whether it
// will be. Only a unary call's reservation takes it: every unary call settles, loses or
// releases its record before it answers, while a stream may end before its first event runs.
func (r *reservation) countLater(store tasks.Store, capability string, t time.Time) bool {
	if r == nil || r.settled {
		return false
	}
	if _, ok := store.(tasks.CountingMessages); !ok {
		return false
	}
	r.count = tasks.Call{Capability: capability, At: t}
	return true
}

// commit writes the record's settlement (release: its release), with the call it counts, if
// any; it returns the settlement's error (a count that fails is logged: uncounted).
func (r *reservation) commit(ctx context.Context, release bool) error {
	ctx = context.WithoutCancel(ctx)
	cs, ok := r.d.store.(tasks.CountingMessages)
	if r.count.Capability == "" || !ok {
		if release {
			return r.d.store.Release(ctx, r.s)
		}
		return r.d.store.Settle(ctx, r.s, r.window)
	}
	c := r.count
	r.count = tasks.Call{} // counted once, whatever becomes of the record
	var err, cerr error
	if release {
		err, cerr = cs.ReleaseCounting(ctx, r.s, c)
	} else {
		err, cerr = cs.SettleCounting(ctx, r.s, r.window, c)
	}
	if cerr != nil {
		r.d.uncounted(c.Capability, cerr)
	}
	return err
}

// warn logs a record the store did not take.
func (r *reservation) warn(msg string, err error) {
	r.d.log.Warn(msg, zap.String("decision_id", r.decisionID), zap.Error(err))
}

// reserve records the call's message for its owner before anything is done with it. It
// answers, instead of a reservation, the earlier call's outcome when the owner sent this
// message id within the window (replay), or a refusal when the store cannot record it:
// nothing was run, and the caller may send it again.
func (d *Dispatcher) reserve(ctx context.Context, call *exchange.Call, params jsontext.Value) (*reservation, *exchange.Result, *protocol.Error) {
	msg := call.Request.Message
	o := ownerOf(call)
	if msg == nil || msg.MessageID == "" || o.Subject == "" {
		return nil, nil, nil
	}
	digest, perr := requestDigest(call.Request.Version, params)
	if perr != nil {
		return nil, nil, perr
	}
	lim := call.Rev.Config().Limits
	bound := lim.HandlerTimeout
	if call.Request.Operation == protocol.SendStreamingMessage {
		bound = lim.StreamIdleTimeout
	}
	now := d.now()
	s := tasks.Sent{MessageID: msg.MessageID, Owner: tasks.Owner{Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant},
		Started: now, Deadline: now.Add(cmp.Or(bound, config.DefaultHandlerTimeout) + deadlineSlack), Digest: digest}
	window := cmp.Or(lim.MessageIDWindow, config.DefaultMessageIDWindow)
	held, fresh, err := d.store.Reserve(ctx, s, window, cmp.Or(lim.MessageIDsPerCaller, config.DefaultMessageIDsPerCaller))
	if err != nil {
		// A reservation written but not confirmed (min_replicas) must not hold the id: this
		// call runs nothing, and its retry must be able to run (best effort; it drops only
		// this call's record).
		if rerr := d.store.Release(context.WithoutCancel(ctx), s); rerr != nil {
			d.log.Debug("unconfirmed message record not released", zap.Error(rerr))
		}
		d.log.Warn("message not reserved; refused before any handler call", zap.String("decision_id", call.DecisionID), zap.Error(err))
		return nil, nil, notRun(err)
	}
	if !fresh {
		if !held.Retries(digest) {
			d.log.Info("messageId reused for a different message; refused", zap.String("decision_id", call.DecisionID))
			if call.Log != nil {
				call.Log.Layer = "replay"
			}
			return nil, nil, reusedID()
		}
		res, perr := d.replay(ctx, call, held)
		return nil, &res, perr
	}
	return &reservation{d: d, s: held, window: window, decisionID: call.DecisionID}, nil, nil
}

// requestDigest fingerprints a message's request: SHA-256 of its version and its params (as
// forwarded: for A2A 1.0 the canonical request message, for 0.3 the JSON-RPC params) in the
// JSON canonical form of RFC 8785, so that key order and spacing do not count. A retry — the
// same request sent again — has the same digest. The version, a zero byte and the canonical
// params are hashed from one pooled buffer (digestBuffers): the string is the only allocation
// (TestRequestDigestMatchesPlain holds it to the plain form, BenchmarkRequestDigest).
func requestDigest(v protocol.Version, params jsontext.Value) (string, *protocol.Error) {
	bp := digestBuffers.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledDigestBuffer {
			digestBuffers.Put(bp)
		}
	}()
	buf := append(append((*bp)[:0], v...), 0)
	n := len(buf)
	canon := jsontext.Value(append(buf, params...)[n:])
	if err := canon.Canonicalize(); err != nil {
		return "", protocol.Wrap(protocol.InvalidParams, err, "the params are not valid JSON")
	}
	buf = append(buf[:n], canon...) // in place unless canonicalising moved it
	*bp = buf
	sum := sha256.Sum256(buf)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:]), nil
}

// digestBuffers are requestDigest's buffers; one larger than maxPooledDigestBuffer is dropped.
var digestBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledDigestBuffer = 64 << 10

// reusedID is the refusal of a message whose messageId its owner already used, within the
// window, for a request with other content: not a retry (a retry repeats the request), and not
// a new message either (a messageId names one message). Nothing is run; the first message's
// record is kept.
func reusedID() *protocol.Error {
	return protocol.Errorf(protocol.InvalidParams,
		"messageId already used for a different message: a retry must repeat the message exactly; "+
			"a new message needs a new messageId").
		WithMetadata(protocol.MetaOutcome, "messageIdReused")
}

// notRun is the refusal of a message the store could not record before any handler call:
// nothing ran, sending it again is safe.
func notRun(err error) *protocol.Error { return storeError(err) }

// unrecorded is the error of a message whose handler was called when what it answered could
// not be recorded (cause): the outcome is unknown to the caller.
func unrecorded(cause error) *protocol.Error {
	return protocol.Wrap(protocol.Internal, cause,
		"the skill's handler was called, but its answer could not be recorded: the outcome is unknown. "+
			"Sending this message again with the same messageId does not run it again").
		WithMetadata(protocol.MetaOutcome, protocol.OutcomeUnknown)
}

// handled is the error a message gets when the handler was called and a store write that
// records its answer failed (perr from bind): a store failure is unrecorded; anything else
// (a conflict: the handler's fault) is perr.
func handled(perr *protocol.Error) *protocol.Error {
	if perr != nil && (perr.Code == protocol.Unavailable || errors.Is(perr, tasks.ErrUnavailable)) {
		return unrecorded(perr)
	}
	return perr
}

// settle records what the handler answered with: the task (taskID "" for a message reply) in
// contextID, bound to capability and handler ("" for capgate's own clarification task).
func (r *reservation) settle(ctx context.Context, taskID, contextID, capability, handler string) error {
	if r == nil || r.settled {
		return nil
	}
	r.s.TaskID, r.s.ContextID, r.s.Capability, r.s.Handler = taskID, contextID, capability, handler
	if err := r.commit(ctx, false); err != nil {
		r.warn("message answer not recorded", err)
		return err
	}
	r.settled = true
	return nil
}

// release drops the record of a message no handler accepted: refused before the call, or by
// the handler itself with an A2A error. A retry is then a new message. A failed release leaves
// the record, which a retry reads as in progress and, after its deadline, as unknown.
func (r *reservation) release(ctx context.Context) {
	if r == nil || r.settled {
		return
	}
	r.settled = true
	if err := r.commit(ctx, true); err != nil {
		r.warn("message record not released; a retry of it is refused until its deadline", err)
	}
}

// failed records a handler call that answered perr: a refusal the handler made itself (an A2A
// error other than an internal one) accepted nothing, and is released; any other failure (a
// timeout, an unreachable handler, an internal or invalid answer) leaves its effect unknown,
// and is marked lost so that a retry does not run it again.
func (r *reservation) failed(ctx context.Context, perr *protocol.Error) {
	if r == nil || r.settled {
		return
	}
	switch perr.Code {
	case protocol.Internal, protocol.InvalidAgentResponse, protocol.Unavailable:
		r.lose(ctx)
	default:
		r.release(ctx)
	}
}

// lose marks the message's outcome unknown.
func (r *reservation) lose(ctx context.Context) {
	if r == nil || r.settled {
		return
	}
	r.s.Lost = true
	if err := r.commit(ctx, false); err != nil {
		r.warn("message outcome not recorded; a retry of it is refused until its deadline", err)
	}
	r.settled = true
}

// replay answers a message its owner already sent (s): with the task it created as it is now
// (re-read from its handler, as GetTask), or, while the first call runs, in progress; never by
// calling the handler with it again.
func (d *Dispatcher) replay(ctx context.Context, call *exchange.Call, s tasks.Sent) (exchange.Result, *protocol.Error) {
	d.log.Info("message already sent; answered without a handler call", zap.String("decision_id", call.DecisionID), zap.Int("state", int(s.State(d.now()))))
	if call.Log != nil {
		call.Log.Layer, call.Log.Capability = "replay", s.Capability // the first call's capability
	}
	switch s.State(d.now()) {
	case tasks.InProgress:
		return exchange.Result{}, protocol.Errorf(protocol.Unavailable,
			"an earlier call of this message (same messageId) is still running; send it again later for its task: it is not run twice").
			WithMetadata(protocol.MetaOutcome, protocol.OutcomeInProgress)
	case tasks.Unknown:
		return exchange.Result{}, protocol.Errorf(protocol.Internal,
			"an earlier call of this message (same messageId) reached the skill's handler and its outcome was not recorded; "+
				"it is not run again with this messageId: check whether it took effect before sending it with a new messageId").
			WithMetadata(protocol.MetaOutcome, protocol.OutcomeUnknown)
	}
	if s.TaskID == "" {
		return exchange.Result{}, protocol.Errorf(protocol.InvalidRequest,
			"this message (same messageId) was already answered, with a message capgate does not keep; it is not run again: send a new messageId to ask again").
			WithMetadata(protocol.MetaOutcome, "answered")
	}
	b, ok, err := d.store.Lookup(ctx, s.TaskID)
	if err != nil {
		return exchange.Result{}, storeError(err)
	}
	if !ok && s.Handler != "" {
		// The first call's binding was not written (the store failed after the record was
		// settled): write it now, as the first call would have.
		b = tasks.Binding{TaskID: s.TaskID, ContextID: s.ContextID, Capability: s.Capability, Handler: s.Handler,
			Issuer: s.Owner.Issuer, Subject: s.Owner.Subject, Tenant: s.Owner.Tenant, CreatedAt: s.Started}
		if s.ContextID != "" {
			if perr := d.holdContext(ctx, call, s.Owner, s.ContextID); perr != nil {
				return exchange.Result{}, perr
			}
		}
		if err := d.store.Bind(ctx, b); err != nil {
			return exchange.Result{}, storeError(err)
		}
		ok = true
	}
	if !ok || !b.OwnedBy(ownerOf(call)) {
		return exchange.Result{}, protocol.Errorf(protocol.TaskNotFound, "the task this message created no longer exists")
	}
	if b.Pending {
		return answer(call, protocol.KindTask, ownResult(clarificationTask(b, d.candidates(call, b)), b, call.Request)), nil
	}
	capability, limits, perr := d.recheck(ctx, call, call.Rev.Router, b.Capability)
	if perr != nil {
		return exchange.Result{}, perr
	}
	inv, perr := d.handlerRequest(ctx, call, capability, limits, getTaskParams(call.Request.Version, b.TaskID, call.Request.Tenant))
	if perr != nil {
		return exchange.Result{}, perr
	}
	inv.req.Method = protocol.MethodName(call.Request.Version, protocol.GetTask)
	result, perr := d.invoker.Call(ctx, inv.req)
	if perr != nil {
		return exchange.Result{}, perr
	}
	return answer(call, protocol.KindTask, sendResult(result, call.Request.Version)), nil
}

// sendResult is a GetTask result (a task) as a SendMessage result in version v: {"task": …} in
// 1.0, the task itself in 0.3.
func sendResult(task jsontext.Value, v protocol.Version) []byte {
	if v == protocol.V03 {
		return task
	}
	b := make([]byte, 0, len(task)+9)
	b = append(b, `{"task":`...)
	b = append(b, task...)
	return append(b, '}')
}
