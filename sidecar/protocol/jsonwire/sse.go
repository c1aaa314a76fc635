package jsonwire

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
)

// sseDialect is what an SSE stream's data lines hold.
type sseDialect uint8

const (
	sseJSONRPC     sseDialect = iota // a JSON-RPC response per event (JSON-RPC, 1.0 and 0.3)
	sseHTTPJSON                      // the event object itself (A2A 1.0 HTTP+JSON)
	sseProtoJSON03                   // the 0.3 proto's StreamResponse in ProtoJSON (A2A 0.3 HTTP+JSON)
)

// Writer is the JSON-RPC and HTTP+JSON bindings' answer writer (both versions): a unary result is one JSON
// body, a stream is written as Server-Sent Events, unbuffered. While a stream is quiet it sends
// keep-alive comments.
type Writer struct {
	w       http.ResponseWriter
	flusher http.Flusher
	dialect sseDialect
	op      protocol.Operation
	id      jsontext.Value
	// shape is the shape of a JSON-RPC error's data (protocol.Request.ErrorData).
	shape protocol.DataShape

	mu      sync.Mutex // writes: events and keep-alives come from two goroutines
	buf     []byte     // the frame being written, reused from event to event
	started bool
	every   time.Duration
	timer   *time.Timer // nil: no keep-alives
	stopped bool
}

// keepAliveComment is the SSE comment sent while a stream is quiet: clients
// ignore it, proxies see the stream is alive.
const keepAliveComment = ": keep-alive\n\n"

// maxKeptBuffer is the largest buffer a stream keeps for its next event.
const maxKeptBuffer = 64 << 10

// newSSE returns a stream writer that sends keepAliveComment whenever the stream has been quiet
// for keepAlive (0: never; config limits.stream_keepalive). A stream not yet started is started
// by it: the client (and Envoy) then know the call is alive, and a later error travels as the
// stream's last event (a JSON-RPC error's data in req's ErrorData shape, with req's id).
func newSSE(w http.ResponseWriter, dialect sseDialect, req *protocol.Request, keepAlive time.Duration) *Writer {
	f, _ := w.(http.Flusher)
	id := req.ID
	if len(id) == 0 {
		id = jsontext.Value("null")
	}
	s := &Writer{w: w, flusher: f, dialect: dialect, op: req.Operation, shape: req.ErrorData, id: id}
	if keepAlive > 0 {
		s.mu.Lock() // the timer may fire before it is stored
		defer s.mu.Unlock()
		s.every = keepAlive
		s.timer = time.AfterFunc(keepAlive, s.tick)
	}
	return s
}

func (s *Writer) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.start()
	if _, err := s.w.Write([]byte(keepAliveComment)); err != nil {
		return // the client is gone; the request's context ends the stream
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	s.timer.Reset(s.every)
}

// Unary writes a unary result as one JSON body: the JSON-RPC response, the result object
// (HTTP+JSON; an empty result is {}, google.protobuf.Empty's JSON), or the 0.3 proto's
// response in ProtoJSON (0.3 HTTP+JSON).
func (s *Writer) Unary(result jsontext.Value, empty bool) (*protocol.Error, bool) {
	if s.dialect == sseJSONRPC {
		writeJSON(s.w, http.StatusOK, protocol.AppendJSONRPCResult(make([]byte, 0, len(result)+len(s.id)+40), s.id, result))
		return nil, false
	}
	if empty && string(result) == "null" {
		result = jsontext.Value("{}") // google.protobuf.Empty over HTTP+JSON
	}
	if s.dialect == sseProtoJSON03 {
		b, perr := ProtoJSON03Response(s.op, result)
		if perr != nil {
			return perr, false
		}
		result = b
	}
	writeJSON(s.w, http.StatusOK, result)
	return nil, false
}

// Stop stops keep-alives for good; once it returns none is being written.
// The response writer must not be used after the handler returns.
func (s *Writer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
}

// Begun reports whether the stream has begun.
func (s *Writer) Begun() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

func (s *Writer) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// Event writes one event as one data line. An event the 0.3 HTTP+JSON binding cannot express
// ends the stream with that error.
func (s *Writer) Event(event jsontext.Value) error {
	data := []byte(event)
	if s.dialect == sseProtoJSON03 {
		b, perr := ProtoJSON03Event(data)
		if perr != nil {
			return perr
		}
		data = b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil && !s.stopped {
		s.timer.Reset(s.every)
	}
	s.start()
	buf := append(s.buf[:0], "data: "...)
	if s.dialect == sseJSONRPC {
		at := len(buf)
		buf = protocol.AppendJSONRPCResult(buf, s.id, data)
		oneLine(buf[at:])
	} else {
		buf = append(buf, data...)
		oneLine(buf[len("data: "):])
	}
	buf = append(buf, "\n\n"...)
	if cap(buf) <= maxKeptBuffer {
		s.buf = buf // the next event reuses it; a rare large one is not kept
	}
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return nil
}

// oneLine puts the JSON value v on one line, in place. A handler may split an event's JSON
// over several data: lines, which the reader joins with a line feed; JSON strings hold no raw
// line breaks, so every CR or LF in v is whitespace between tokens and becomes a space. Written
// as it came, the second line would start a field of its own and the caller would read a
// truncated event.
func oneLine(v []byte) {
	for i, c := range v {
		if c == '\n' || c == '\r' {
			v[i] = ' '
		}
	}
}

// End ends a stream that ended normally: its last event was its end.
func (s *Writer) End() {}

// Fail ends a begun stream with e. JSON-RPC: the stream's last event is a JSON-RPC error
// response. HTTP+JSON: an SSE event of type "error" whose data is the google.rpc.Status body,
// as the A2A JavaScript SDK reads it; clients that read only data lines (a2a-go) see the same
// error body.
func (s *Writer) Fail(e *protocol.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	var frame []byte
	if s.dialect == sseJSONRPC {
		frame = append([]byte("data: "), e.MarshalJSONRPCIn(s.shape, s.id)...)
	} else {
		frame = append([]byte("event: error\ndata: "), e.MarshalStatus()...)
	}
	_, _ = s.w.Write(append(frame, "\n\n"...))
	if s.flusher != nil {
		s.flusher.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// NewWriter is the answer writer of a JSON-RPC or HTTP+JSON request (either version): a unary
// result is one JSON body, a stream Server-Sent Events whose data lines hold what req's binding
// and version carry, with a keep-alive comment whenever the stream has been quiet for
// keepAlive (0: none).
func NewWriter(w http.ResponseWriter, req *protocol.Request, keepAlive time.Duration) *Writer {
	switch {
	case req.Binding == protocol.JSONRPC:
		return newSSE(w, sseJSONRPC, req, keepAlive)
	case req.ProtoJSON03():
		return newSSE(w, sseProtoJSON03, req, keepAlive)
	}
	return newSSE(w, sseHTTPJSON, req, keepAlive)
}
