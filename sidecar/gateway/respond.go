package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/operation"
	"github.com/capgate/capgate/sidecar/protocol"
)

// answer writes an operation's result in the request's binding: a unary result by unary, a
// stream by the binding's event writer (eventWriterFor). It returns the error that ended the
// answer and whether any of the answer had been written: an error with nothing written is
// refused in the binding's ordinary shape (a stream's included, so a streaming method's error
// before its first event has one form per binding); once written, the error has ended the
// answer in the binding's own way (the stream's last event, or gRPC trailers).
func answer(w http.ResponseWriter, req *protocol.Request, res operation.Result, keepAlive time.Duration) (*protocol.Error, bool) {
	if res.Stream == nil {
		return unary(w, req, res)
	}
	ew := eventWriterFor(w, req, keepAlive)
	e := res.Stream(ew.event)
	ew.stop() // no keep-alive is written once this returns
	switch {
	case e == nil && !ew.begun():
		return protocol.Errorf(protocol.InvalidAgentResponse, "the stream ended without an event"), false
	case e == nil:
		ew.end()
	case ew.begun():
		ew.fail(e)
	}
	return e, ew.begun()
}

// eventWriter writes a stream's events in one binding.
type eventWriter interface {
	// event writes one event; an error ends the stream.
	event(operation.Event) error
	// begun reports whether the response has begun (the status and headers are sent).
	begun() bool
	// stop stops keep-alives for good; once it returns none is being written.
	stop()
	// end ends a stream that ended normally; fail ends a begun stream with an error.
	end()
	fail(e *protocol.Error)
}

func eventWriterFor(w http.ResponseWriter, req *protocol.Request, keepAlive time.Duration) eventWriter {
	switch {
	case req.Binding == protocol.GRPC:
		return &grpcEvents{r: newGRPCResponder(w, req.Operation)}
	case req.Binding == protocol.JSONRPC:
		return newSSE(w, sseJSONRPC, req.ErrorData, req.ID, keepAlive)
	case req.ProtoJSON03():
		return newSSE(w, sseProtoJSON03, req.ErrorData, nil, keepAlive)
	}
	return newSSE(w, sseHTTPJSON, req.ErrorData, nil, keepAlive)
}

// unary writes a unary result in the request's binding, as answer does.
func unary(w http.ResponseWriter, req *protocol.Request, res operation.Result) (*protocol.Error, bool) {
	result := res.JSON
	switch req.Binding {
	case protocol.JSONRPC:
		writeJSON(w, http.StatusOK, protocol.AppendJSONRPCResult(make([]byte, 0, len(result)+len(req.ID)+40), req.ID, result))
		return nil, false
	case protocol.GRPC:
		msg, perr := protocol.GRPCResponse(req.Operation, result)
		if perr != nil {
			return perr, false
		}
		g := newGRPCResponder(w, req.Operation)
		if err := g.message(msg); err != nil {
			perr = protocol.Wrap(protocol.Internal, err, "the response could not be written")
			g.end(perr.GRPCStatus())
			return perr, true
		}
		g.end(nil)
		return nil, false
	}
	if res.Kind == operation.Empty && string(result) == "null" {
		result = jsontext.Value("{}") // google.protobuf.Empty over HTTP+JSON
	}
	if req.ProtoJSON03() {
		b, perr := protocol.ProtoJSON03Response(req.Operation, result)
		if perr != nil {
			return perr, false
		}
		result = b
	}
	writeJSON(w, http.StatusOK, result)
	return nil, false
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeRefusal writes a refusal as both doors shape it (protocol.Refuse).
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
	writeRefusal(w, protocol.Refuse(protocol.HTTPJSON, protocol.V1, protocol.DataList, false, nil, e, false))
}
