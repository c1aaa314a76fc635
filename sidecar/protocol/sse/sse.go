// Package sse writes a stream of Server-Sent Events, the form both JSON bindings (JSON-RPC and
// HTTP+JSON, both versions) give a streaming answer: each event one data line, written and
// flushed unbuffered, with a keep-alive comment while the stream is quiet. What a data line
// holds is the binding's (jsonrpcwire.Writer, httpjsonwire.Writer).
package sse

import (
	"net/http"
	"sync"
	"time"
)

// Stream is one response's event stream (Init readies it). Events and keep-alives come from
// two goroutines; a Stream serialises them.
type Stream struct {
	w       http.ResponseWriter
	flusher http.Flusher

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

// Init readies a zero Stream to write on w, sending keepAliveComment whenever the stream has
// been quiet for keepAlive (0: never; config limits.stream_keepalive). A stream not yet started
// is started by it: the client (and Envoy) then know the call is alive, and a later error
// travels as the stream's last event (Fail). A Stream lives inside its binding's answer writer,
// so that an answer allocates one writer; it must not be copied.
func (s *Stream) Init(w http.ResponseWriter, keepAlive time.Duration) {
	s.w = w
	s.flusher, _ = w.(http.Flusher)
	if keepAlive > 0 {
		s.mu.Lock() // the timer may fire before it is stored
		defer s.mu.Unlock()
		s.every = keepAlive
		s.timer = time.AfterFunc(keepAlive, s.tick)
	}
}

func (s *Stream) tick() {
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

// Stop stops keep-alives for good; once it returns none is being written.
// The response writer must not be used after the handler returns.
func (s *Stream) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
}

// Begun reports whether the stream has begun.
func (s *Stream) Begun() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

func (s *Stream) start() {
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

// Event writes one event as one data line: what line appends to its first argument for data
// (nil: data as it is), put on one line (OneLine).
func (s *Stream) Event(data []byte, line func(dst, data []byte) []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil && !s.stopped {
		s.timer.Reset(s.every)
	}
	s.start()
	buf := append(s.buf[:0], "data: "...)
	at := len(buf)
	if line != nil {
		buf = line(buf, data)
	} else {
		buf = append(buf, data...)
	}
	OneLine(buf[at:])
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

// Fail ends the stream with frame, a whole event (its field lines and the blank line that
// ends it), starting the stream if it has not begun.
func (s *Stream) Fail(frame []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	_, _ = s.w.Write(frame)
	if s.flusher != nil {
		s.flusher.Flush()
	}
}

// OneLine puts the JSON value v on one line, in place. A handler may split an event's JSON
// over several data: lines, which the reader joins with a line feed; JSON strings hold no raw
// line breaks, so every CR or LF in v is whitespace between tokens and becomes a space. Written
// as it came, the second line would start a field of its own and the caller would read a
// truncated event.
func OneLine(v []byte) {
	for i, c := range v {
		if c == '\n' || c == '\r' {
			v[i] = ' '
		}
	}
}
