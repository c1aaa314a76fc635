package gateway

import (
	"net/http"

	"github.com/capgate/capgate/sidecar/operation"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
)

// grpcResponder writes an admitted A2A 1.0 gRPC call's answer (lf.a2a.v1.A2AService): each
// result or event, converted to the method's proto response message (grpcwire.Response),
// is one length-prefixed message, and the call ends with the grpc-status trailers.
type grpcResponder struct {
	w       http.ResponseWriter
	flusher http.Flusher
	op      protocol.Operation
	frame   []byte // the message being written, reused from message to message
	started bool   // response headers written
	ended   bool   // trailers set: nothing more is written
}

func newGRPCResponder(w http.ResponseWriter, op protocol.Operation) *grpcResponder {
	f, _ := w.(http.Flusher)
	return &grpcResponder{w: w, flusher: f, op: op}
}

func (g *grpcResponder) start() {
	if g.started {
		return
	}
	g.started = true
	h := g.w.Header()
	h.Set("Content-Type", protocol.GRPCContentType)
	h.Del("Content-Length")
	g.w.WriteHeader(http.StatusOK)
}

// message writes one length-prefixed, uncompressed message and flushes it.
func (g *grpcResponder) message(msg []byte) error {
	if g.ended {
		return errEnded
	}
	g.start()
	frame := grpcwire.AppendFrame(g.frame[:0], msg)
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
func (g *grpcResponder) end(status [][2]string) {
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

// grpcEvents is the gRPC binding's event writer: each event is one StreamResponse message,
// converted from the event's JSON; an error ends the call in the trailers. There are no
// keep-alives: HTTP/2 has its own.
type grpcEvents struct {
	r *grpcResponder
}

var _ eventWriter = (*grpcEvents)(nil)

func (e *grpcEvents) event(ev operation.Event) error {
	msg, perr := grpcwire.Response(e.r.op, ev.JSON)
	if perr != nil {
		return perr
	}
	return e.r.message(msg)
}

func (e *grpcEvents) begun() bool              { return e.r.started }
func (e *grpcEvents) stop()                    {}
func (e *grpcEvents) end()                     { e.r.end(nil) }
func (e *grpcEvents) fail(err *protocol.Error) { e.r.end(err.GRPCStatus()) }
