package dispatch

import (
	"cmp"
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/gateway"
	"github.com/capgate/capgate/sidecar/protocol"
)

// stream forwards a streaming call and relays each event to the client as
// soon as it arrives (Server-Sent Events, unbuffered). The first event that
// names a task binds it, and every event naming a context not yet held holds
// it (bind; nil binds nothing), before the event is relayed. Every event must
// be a task, a message or a task update in the request's version (0.3:
// kind-discriminated), as a unary answer must: anything else is
// InvalidAgentResponse, on every binding.
func (d *Dispatcher) stream(ctx context.Context, call *gateway.Call, w gateway.Responder, inv invocation, bind func(taskID, contextID string) *protocol.Error) *protocol.Error {
	sse := newSSE(call, w)
	sse.keepAlive(d.keepAlive)
	defer sse.stopKeepAlive()
	var boundTask, heldContext string
	start := d.now()
	err := d.invoker.Stream(ctx, inv.req, func(result jsontext.Value) error {
		taskID, contextID, ok := taskOf(result, call.Request.Version)
		if !ok {
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
		return sse.event(result)
	})
	d.record(inv, d.now().Sub(start), err)
	sse.stopKeepAlive()
	if err == nil {
		return nil
	}
	if !sse.started {
		return d.replyRefused(ctx, call, inv, err) // nothing sent yet: an ordinary error response
	}
	// Mid-stream: the error travels as the stream's last event.
	sse.fail(err)
	return nil
}

// writeEvents sends pre-rendered events as a stream.
func (d *Dispatcher) writeEvents(call *gateway.Call, w gateway.Responder, events [][]byte) *protocol.Error {
	sse := newSSE(call, w)
	for _, e := range events {
		if err := sse.event(e); err != nil {
			return protocol.Wrap(protocol.Internal, err, "the stream could not be written")
		}
	}
	return nil
}

type sseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	jsonrpc bool
	id      jsontext.Value

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

// keepAlive sends keepAliveComment whenever the stream has been quiet for
// every (0: never). A stream not yet started is started by it: the client
// (and Envoy) then know the call is alive, and a later error travels as
// the stream's last event.
func (s *sseWriter) keepAlive(every time.Duration) {
	if every <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.every = every
	s.timer = time.AfterFunc(every, s.tick)
}

func (s *sseWriter) tick() {
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

// stopKeepAlive stops keep-alives for good; once it returns none is being
// written. The response writer must not be used after the handler returns.
func (s *sseWriter) stopKeepAlive() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
}

func newSSE(call *gateway.Call, w gateway.Responder) *sseWriter {
	rw := w.Writer()
	f, _ := rw.(http.Flusher)
	id := call.Request.ID
	if len(id) == 0 {
		id = jsontext.Value("null")
	}
	return &sseWriter{w: rw, flusher: f, jsonrpc: w.Binding() == protocol.JSONRPC, id: id}
}

func (s *sseWriter) start() {
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

func (s *sseWriter) event(result []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil && !s.stopped {
		s.timer.Reset(s.every)
	}
	s.start()
	buf := append(s.buf[:0], "data: "...)
	if s.jsonrpc {
		buf = append(buf, `{"jsonrpc":"2.0","id":`...)
		buf = append(buf, s.id...)
		buf = append(buf, `,"result":`...)
		buf = appendOneLine(buf, result)
		buf = append(buf, '}')
	} else {
		buf = appendOneLine(buf, result)
	}
	buf = append(buf, "\n\n"...)
	if cap(buf) <= maxKeptFrame {
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

// appendOneLine appends the JSON value v on one line. A handler may split
// an event's JSON over several data: lines, which the reader joins with a
// line feed; JSON strings hold no raw line breaks, so every CR or LF in v is
// whitespace between tokens and becomes a space. Written as it came, the
// second line would start a field of its own and the caller would read a
// truncated event.
func appendOneLine(buf, v []byte) []byte {
	start := len(buf)
	buf = append(buf, v...)
	for i := start; i < len(buf); i++ {
		if buf[i] == '\n' || buf[i] == '\r' {
			buf[i] = ' '
		}
	}
	return buf
}

// maxKeptFrame is the largest frame buffer a stream keeps for its next
// event.
const maxKeptFrame = 64 << 10

func (s *sseWriter) fail(e *protocol.Error) {
	s.start()
	// JSON-RPC: the stream's last event is a JSON-RPC error response. HTTP+JSON: an SSE event of
	// type "error" whose data is the google.rpc.Status body, as the A2A JavaScript SDK reads it;
	// clients that read only data lines (a2a-go) see the same error body.
	var frame []byte
	if s.jsonrpc {
		frame = append([]byte("data: "), e.MarshalJSONRPC(s.id)...)
	} else {
		frame = append([]byte("event: error\ndata: "), e.MarshalStatus()...)
	}
	_, _ = s.w.Write(append(frame, "\n\n"...))
	if s.flusher != nil {
		s.flusher.Flush()
	}
}
