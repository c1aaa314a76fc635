package grpcwire

import (
	"net/http"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
)

// Writer writes an admitted A2A 1.0 gRPC call's answer (lf.a2a.v1.A2AService): each result or
// event, converted to the method's proto response message (Response), is one length-prefixed
// message, and the call ends with the grpc-status trailers. There are no keep-alives: HTTP/2
// has its own.
type Writer struct {
	w       http.ResponseWriter
	flusher http.Flusher
	op      protocol.Operation
	frame   []byte // the message being written, reused from message to message
	started bool   // response headers written
	ended   bool   // trailers set: nothing more is written
}

// maxKeptBuffer is the largest frame buffer a stream keeps for its next message.
const maxKeptBuffer = 64 << 10

// NewWriter returns the writer of the answer to a call of op.
func NewWriter(w http.ResponseWriter, op protocol.Operation) *Writer {
	f, _ := w.(http.Flusher)
	return &Writer{w: w, flusher: f, op: op}
}

func (g *Writer) start() {
	if g.started {
		return
	}
	g.started = true
	h := g.w.Header()
	h.Set("Content-Type", ContentType)
	h.Del("Content-Length")
	g.w.WriteHeader(http.StatusOK)
}

// message writes one length-prefixed, uncompressed message and flushes it.
func (g *Writer) message(msg []byte) error {
	if g.ended {
		return errEnded
	}
	g.start()
	frame := AppendFrame(g.frame[:0], msg)
	if cap(frame) <= maxKeptBuffer {
		g.frame = frame // a stream's next message reuses it; a rare large one is not kept
	}
	if _, err := g.w.Write(frame); err != nil {
		return err
	}
	if g.flusher != nil {
		g.flusher.Flush()
	}
	return nil
}

// end sets the trailers: OK for nil, else the error's status. Only the first call counts.
func (g *Writer) end(status [][2]string) {
	if g.ended {
		return
	}
	g.start()
	g.ended = true
	if status == nil {
		status = [][2]string{{"grpc-status", "0"}}
	}
	h := g.w.Header()
	for _, kv := range status {
		h.Set(http.TrailerPrefix+kv[0], kv[1])
	}
}

type endedError struct{}

func (endedError) Error() string { return "the gRPC call has ended" }

var errEnded error = endedError{}

// Unary writes a unary result as one message and an OK status; JSON null is the empty message.
// A result the proto cannot hold is returned unwritten; a failed write ends the call with its
// error, and reports the answer begun.
func (g *Writer) Unary(result jsontext.Value, _ bool) (*protocol.Error, bool) {
	msg, perr := Response(g.op, result)
	if perr != nil {
		return perr, false
	}
	if err := g.message(msg); err != nil {
		perr = protocol.Wrap(protocol.Internal, err, "the response could not be written")
		g.end(Status(perr))
		return perr, true
	}
	g.end(nil)
	return nil, false
}

// Event writes one stream event as one StreamResponse message, converted from the event's JSON.
func (g *Writer) Event(event jsontext.Value) error {
	msg, perr := Response(g.op, event)
	if perr != nil {
		return perr
	}
	return g.message(msg)
}

// Begun reports whether the response has begun (the headers are sent).
func (g *Writer) Begun() bool { return g.started }

// Stop does nothing: there are no keep-alives to stop.
func (g *Writer) Stop() {}

// End ends a stream that ended normally, with an OK status.
func (g *Writer) End() { g.end(nil) }

// Fail ends a begun stream with err's status in the trailers.
func (g *Writer) Fail(err *protocol.Error) { g.end(Status(err)) }
