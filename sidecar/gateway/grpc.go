package gateway

import (
	"bytes"
	"net/http"

	"github.com/go-json-experiment/json"

	"github.com/capgate/capgate/sidecar/protocol"
)

// grpcResponder answers an admitted A2A 1.0 gRPC request (lf.a2a.v1.A2AService). Operations
// produce JSON results, as for the other bindings; each is converted to the method's proto
// response message (protocol.GRPCResponse), written as one length-prefixed message, and the
// call ends with the grpc-status trailers. Streaming operations write Server-Sent Events to
// Writer(), as they do for JSON-RPC and HTTP+JSON; the writer it returns turns each event into
// one StreamResponse message and an error event into the error trailers, so operations need
// no gRPC code of their own.
type grpcResponder struct {
	w       http.ResponseWriter
	flusher http.Flusher
	op      protocol.Operation
	frame   []byte // the message being written, reused from message to message
	started bool   // response headers written
	ended   bool   // trailers set: nothing more is written
}

var _ Responder = (*grpcResponder)(nil)

func newGRPCResponder(w http.ResponseWriter, op protocol.Operation) *grpcResponder {
	f, _ := w.(http.Flusher)
	return &grpcResponder{w: w, flusher: f, op: op}
}

func (g *grpcResponder) Binding() protocol.Binding { return protocol.GRPC }

func (g *grpcResponder) Result(v any) error {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return err
	}
	return g.RawResult(b)
}

// RawResult writes a unary call's result and ends the call.
func (g *grpcResponder) RawResult(result []byte) error {
	msg, perr := protocol.GRPCResponse(g.op, result)
	if perr != nil {
		return perr
	}
	if err := g.message(msg); err != nil {
		return err
	}
	g.end(nil)
	return nil
}

// Writer is a Server-Sent Events sink that writes gRPC messages (grpcEvents).
func (g *grpcResponder) Writer() http.ResponseWriter { return &grpcEvents{r: g, header: http.Header{}} }

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
	frame := protocol.AppendGRPCFrame(g.frame[:0], msg)
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

// written reports whether the response has begun (a later error must go in the trailers).
func (g *grpcResponder) written() bool { return g.started }

type endedError struct{}

func (endedError) Error() string { return "the gRPC call has ended" }

var errEnded error = endedError{}

// grpcEvents reads the Server-Sent Events a streaming operation writes and writes each as a
// gRPC message: a data event is one StreamResponse; an error event (event: error, or data that
// is a google.rpc.Status {"error": ...} body) ends the call with that status. Comments
// (keep-alives) are dropped: HTTP/2 has its own. Headers the operation sets are not sent.
type grpcEvents struct {
	r      *grpcResponder
	header http.Header
	buf    []byte // written, not yet a whole event
	data   []byte // the event's data, reused from event to event
}

// maxKeptBuffer is the largest buffer a stream keeps for its next event.
const maxKeptBuffer = 64 << 10

var (
	_ http.ResponseWriter = (*grpcEvents)(nil)
	_ http.Flusher        = (*grpcEvents)(nil)
)

func (e *grpcEvents) Header() http.Header { return e.header }
func (e *grpcEvents) WriteHeader(int)     {}
func (e *grpcEvents) Flush()              {} // every message is flushed as written

func (e *grpcEvents) Write(p []byte) (int, error) {
	e.buf = append(e.buf, p...)
	rest := e.buf
	for {
		i := bytes.Index(rest, []byte("\n\n"))
		if i < 0 {
			break
		}
		block := rest[:i] // event copies what it keeps
		rest = rest[i+2:]
		if err := e.event(block); err != nil {
			e.buf = append(e.buf[:0], rest...)
			return 0, err
		}
	}
	e.buf = append(e.buf[:0], rest...)
	return len(p), nil
}

func (e *grpcEvents) event(block []byte) error {
	var kind string
	data, has := e.data[:0], false
	for line := range bytes.SplitSeq(block, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case len(line) == 0 || line[0] == ':':
		case bytes.HasPrefix(line, []byte("event:")):
			kind = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if has {
				data = append(data, '\n')
			}
			data = append(data, d...)
			has = len(data) > 0 // empty data lines before the first text add nothing
		}
	}
	if cap(data) <= maxKeptBuffer {
		e.data = data
	}
	if !has {
		return nil
	}
	if kind == "error" || bytes.HasPrefix(bytes.TrimSpace(data), []byte(`{"error"`)) {
		e.r.end(statusOf(data))
		return errEnded
	}
	msg, perr := protocol.GRPCResponse(e.r.op, data)
	if perr != nil {
		e.r.end(perr.GRPCStatus())
		return perr
	}
	return e.r.message(msg)
}

// statusOf reads a google.rpc.Status error body ({"error":{"status","message","details"}}) as
// gRPC status headers; anything else is an internal error.
func statusOf(body []byte) [][2]string {
	var s struct {
		Error *struct {
			Status  string `json:"status"`
			Message string `json:"message"`
			Details []struct {
				Type     string            `json:"@type"`
				Reason   string            `json:"reason"`
				Metadata map[string]string `json:"metadata"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &s); err != nil || s.Error == nil {
		return protocol.Errorf(protocol.Internal, "the stream failed").GRPCStatus()
	}
	reason := "INTERNAL_ERROR"
	var md map[string]string
	for _, d := range s.Error.Details {
		if d.Type == protocol.ErrorInfoType {
			reason, md = d.Reason, d.Metadata
			break
		}
	}
	return protocol.GRPCStatusHeaders(s.Error.Status, s.Error.Message, reason, md)
}
