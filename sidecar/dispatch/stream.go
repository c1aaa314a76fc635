package dispatch

import (
	"cmp"
	"context"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/protocol"
)

// stream is a streaming call's answer: run by the gateway's writer, it forwards the call and
// yields each event as soon as it arrives (unbuffered). The first event that names a task binds
// it, and every event naming a context not yet held holds it (bind; nil binds nothing), before
// the event is yielded. Every event must be a task, a message or a task update in the request's
// version (0.3: kind-discriminated), as a unary answer must: anything else is
// InvalidAgentResponse, on every binding. A failure before the first event is the refusal a
// unary call would get (replyRefused); the writer decides how it travels.
//
// rsv is the message's reservation (nil: none): bind settles it with the first task; a stream
// that ends without naming one settles it with none, a handler's refusal before any event
// releases it (failed), and any other failure leaves its outcome unknown (lose).
func (d *Dispatcher) stream(ctx context.Context, call *exchange.Call, inv invocation, bind func(taskID, contextID string) *protocol.Error,
	rsv *reservation) exchange.Result {
	return exchange.Result{Stream: func(yield func(exchange.Event) error) *protocol.Error {
		var boundTask, heldContext string
		yielded := false
		start := d.now()
		err := d.invoker.Stream(ctx, inv.req, func(result jsontext.Value) error {
			taskID, contextID, kind := probe(result, call.Request.Version)
			if kind == 0 {
				return protocol.Errorf(protocol.InvalidAgentResponse, "the handler's stream event is not a task, message or task update")
			}
			if bind != nil {
				if boundTask != "" {
					taskID = "" // bound once, by the first event naming it
				}
				if taskID != "" || (contextID != "" && contextID != heldContext) {
					if perr := bind(taskID, contextID); perr != nil { // the task's binding keeps its context
						return perr
					}
					boundTask, heldContext = cmp.Or(taskID, boundTask), cmp.Or(contextID, heldContext)
				}
			}
			yielded = true
			return yield(exchange.Event{Kind: kind, JSON: result})
		})
		d.record(inv, d.now().Sub(start), err)
		switch {
		case err == nil:
			_ = rsv.settle(ctx, "", heldContext, "", "") // a stream without a task
		case !yielded:
			rsv.failed(ctx, err)
		default:
			rsv.lose(ctx)
		}
		if err != nil && !yielded {
			return d.replyRefused(ctx, call, inv, err) // nothing relayed: the error a unary call gets
		}
		return err
	}}
}
