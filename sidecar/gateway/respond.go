package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
	"github.com/capgate/capgate/sidecar/protocol/wire"
)

// answer writes an operation's result in the request's binding, through the binding's
// answerWriter: a unary result by Unary, a stream event by event. It returns the error that
// ended the answer and whether any of the answer had been written: an error with nothing
// written is refused in the binding's ordinary shape (a stream's included, so a streaming
// method's error before its first event has one form per binding); once written, the error has
// ended the answer in the binding's own way (the stream's last event, or gRPC trailers).
func answer(w http.ResponseWriter, req *protocol.Request, res exchange.Result, keepAlive time.Duration) (*protocol.Error, bool) {
	if res.Stream == nil {
		return writerFor(w, req, 0).Unary(res.JSON, res.Kind == protocol.KindEmpty)
	}
	aw := writerFor(w, req, keepAlive)
	e := res.Stream(func(ev exchange.Event) error { return aw.Event(ev.JSON) })
	aw.Stop() // no keep-alive is written once this returns
	switch {
	case e == nil && !aw.Begun():
		return protocol.Errorf(protocol.InvalidAgentResponse, "the stream ended without an event"), false
	case e == nil:
		aw.End()
	case aw.Begun():
		aw.Fail(e)
	}
	return e, aw.Begun()
}

// answerWriter writes an admitted request's answer in one binding: a unary result, or a
// stream's events. Each binding's package has its own (both versions): grpcwire.Writer,
// jsonrpcwire.Writer, httpjsonwire.Writer.
type answerWriter interface {
	// Unary writes a unary result (empty: the operation's result is empty). It returns an
	// error and whether any of the answer had been written, as answer does.
	Unary(result jsontext.Value, empty bool) (*protocol.Error, bool)
	// Event writes one event of a stream; an error ends the stream.
	Event(event jsontext.Value) error
	// Begun reports whether the response has begun (the status and headers are sent).
	Begun() bool
	// Stop stops keep-alives for good; once it returns none is being written.
	Stop()
	// End ends a stream that ended normally; Fail ends a begun stream with an error.
	End()
	Fail(e *protocol.Error)
}

// writerFor is the answer writer of req's binding; a stream quiet for keepAlive gets a
// keep-alive (0: none; unary answers have none).
func writerFor(w http.ResponseWriter, req *protocol.Request, keepAlive time.Duration) answerWriter {
	switch req.Binding {
	case protocol.GRPC:
		return grpcwire.NewWriter(w, req.Operation)
	case protocol.JSONRPC:
		return jsonrpcwire.NewWriter(w, req, keepAlive)
	}
	return httpjsonwire.NewWriter(w, req, keepAlive)
}

// writeRefusal writes a refusal as both doors shape it (wire.Refuse).
func writeRefusal(w http.ResponseWriter, r protocol.Refusal) {
	h := w.Header()
	for _, kv := range r.Header {
		h.Set(kv[0], kv[1])
	}
	if len(r.Body) > 0 { // a gRPC refusal is headers only
		h.Set("Content-Length", strconv.Itoa(len(r.Body)))
	}
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(r.Status)
	_, _ = w.Write(r.Body)
}

// writeStatusError answers an HTTP+JSON request with google.rpc.Status and the mapped status.
func writeStatusError(w http.ResponseWriter, e *protocol.Error) {
	writeRefusal(w, wire.Refuse(protocol.HTTPJSON, protocol.V1, protocol.DataList, false, nil, e, false))
}

var (
	_ answerWriter = (*grpcwire.Writer)(nil)
	_ answerWriter = (*jsonrpcwire.Writer)(nil)
	_ answerWriter = (*httpjsonwire.Writer)(nil)
)
