// Package exchange holds what passes between the gateway and the operations it runs (one
// exchange: a call in, an answer out): the admitted Call, and the answer an operation gives in
// no binding's shape — a Result (its kind, protocol.Kind, and the A2A object's JSON in the
// request's version: the JSON-RPC result object, which is binding-neutral data) or a Stream of
// Events. Each binding writes its own answer from these values (the gateway's answerWriter); an
// operation never sees a response writer. (protocol.Operation is the A2A operation a request
// names; this package was called operation before.)
package exchange

import (
	"context"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tasks"
)

// Call is one authenticated, parsed A2A request on its way to an operation.
type Call struct {
	Rev        *revision.State
	Request    *protocol.Request
	Principal  identity.Principal
	Extensions []string // activated extension URIs
	DecisionID string
	Header     http.Header // the request's headers (read-only)
	// Log is this request's decision-log entry; operations record the
	// capability, routing layer and confidence they decided.
	Log *decisionlog.Entry
	// Task is the binding of the task the request targets, as admission
	// found it (owned by the caller); nil when it names none.
	Task *tasks.Binding
}

// Server serves message and task operations (SendMessage, GetTask, ...): it answers with a
// Result, or a *protocol.Error for the gateway to render.
type Server interface {
	Serve(ctx context.Context, call *Call) (Result, *protocol.Error)
}

// Result is an operation's answer: one value (JSON), or, when Stream is set, a stream of
// events.
type Result struct {
	Kind protocol.Kind
	// JSON is the result object in the request's version (unary answers).
	JSON jsontext.Value
	// Stream, when set, is a streaming answer.
	Stream Stream
}

// Event is one event of a stream: its kind and the event object in the request's version
// (1.0: a StreamResponse, {"task"|"message"|"statusUpdate"|"artifactUpdate": …}; 0.3: the
// kind-discriminated object).
type Event struct {
	Kind protocol.Kind
	JSON jsontext.Value
}

// Stream runs a streaming answer: it calls yield with each event, in order, and returns the
// error that ended the stream (nil: it ended normally). An event's JSON is valid only during
// yield's call (the relay reads the next event into the same buffer). An error from yield (the
// caller has gone, or the event cannot be written in the caller's binding) ends the stream and
// is returned, as a *protocol.Error, by Stream.
type Stream func(yield func(Event) error) *protocol.Error

// Value is a unary result of kind k.
func Value(k protocol.Kind, b jsontext.Value) Result { return Result{Kind: k, JSON: b} }

// Events is a stream of the given events, already rendered.
func Events(events ...Event) Result {
	return Result{Stream: func(yield func(Event) error) *protocol.Error {
		for _, e := range events {
			if err := yield(e); err != nil {
				return Failed(err)
			}
		}
		return nil
	}}
}

// Failed is the error a Stream returns when yield failed with err: err itself when it is a
// *protocol.Error (the binding's own refusal of an event it cannot express), else Internal.
func Failed(err error) *protocol.Error {
	return protocol.AsError(err, protocol.Internal, "the stream could not be written")
}
