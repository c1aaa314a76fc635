package handler

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
)

var errEventTooLarge = errors.New("event larger than the limit")

// Stream sends a streaming req (SendStreamingMessage, SubscribeToTask) and
// calls yield with each event's JSON-RPC result as it arrives; the result
// is valid only until yield returns (the next event is read into the same
// buffer), so yield copies what it keeps. It returns
// nil when the handler ends the stream after at least one event; an error
// event ends the stream with that error. The stream is cancelled when ctx
// is, when the handler stays silent for the idle timeout, or when yield
// returns an error, which Stream then returns (a *protocol.Error as is,
// anything else as Internal).
func (i *Invoker) Stream(ctx context.Context, req Request, yield func(result jsontext.Value) error) *protocol.Error {
	t, perr := i.lookup(req)
	if perr != nil {
		return perr
	}
	id := newID()
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := newIdleTimer(i.idle, func() { cancel(errIdle) })
	defer idle.stop()

	hr, perr := newRequest(sctx, t, req, id, true)
	if perr != nil {
		return perr
	}
	resp, err := t.client.Do(hr)
	if err != nil {
		return i.failure(sctx, t, req, err, errIdle, i.idleMsg)
	}
	defer func() { _ = resp.Body.Close() }()

	emit := func(result jsontext.Value) *protocol.Error {
		idle.pause()
		defer idle.resume()
		return protocol.AsError(yield(result), protocol.Internal, "the handler's stream could not be relayed")
	}

	body := &activityReader{r: resp.Body, idle: idle}
	if t.binding == protocol.GRPC {
		return i.grpcStream(sctx, t, req, resp, body, emit)
	}
	if mt := mediaType(resp.Header); mt != "text/event-stream" {
		// Not a stream: a plain JSON-RPC answer, usually an error.
		data, err := io.ReadAll(io.LimitReader(body, MaxResponseBytes+1))
		if err != nil {
			return i.failure(sctx, t, req, err, errIdle, i.idleMsg)
		}
		if len(data) > MaxResponseBytes {
			return i.invalid(t, req, "response larger than 16 MiB")
		}
		result, perr := i.unaryOf(t, req, resp, data, id)
		if perr != nil {
			return perr
		}
		return emit(result)
	}
	if resp.StatusCode != http.StatusOK {
		return i.invalid(t, req, fmt.Sprintf("an event stream with HTTP %d", resp.StatusCode))
	}

	br := bufio.NewReaderSize(body, 64<<10)
	events := 0
	var data []byte // every event's data, in turn
	var name string
	for {
		name, data, err = nextNamedEvent(br, data[:0])
		if cause := context.Cause(sctx); cause != nil {
			// Cancelled, idle, or the caller went away: whatever was read
			// after that is not relayed.
			return i.failure(sctx, t, req, cause, errIdle, i.idleMsg)
		}
		switch {
		case err == io.EOF:
			if events == 0 {
				return i.invalid(t, req, "stream ended without an event")
			}
			return nil
		case errors.Is(err, errEventTooLarge):
			return i.invalid(t, req, "event larger than 1 MiB")
		case err != nil:
			return i.failure(sctx, t, req, err, errIdle, i.idleMsg)
		}
		var result jsontext.Value
		if t.binding == protocol.HTTPJSON {
			if result, perr = i.restEvent(t, req, name, data, events+1); perr != nil {
				return perr
			}
		} else {
			r, why := parseEvent(data, id, false)
			if why != "" {
				return i.invalid(t, req, fmt.Sprintf("event %d: %s", events+1, why))
			}
			if r.rpcErr != nil {
				return i.upstreamError(t, req, r.rpcErr)
			}
			result = r.result
		}
		events++
		if perr := emit(result); perr != nil {
			return perr
		}
	}
}

// grpcStream relays a server-streaming gRPC answer: each message is one
// event; the trailers' status ends the stream.
func (i *Invoker) grpcStream(ctx context.Context, t target, req Request, resp *http.Response, body io.Reader,
	emit func(jsontext.Value) *protocol.Error) *protocol.Error {
	if perr := i.grpcStart(t, req, resp); perr != nil {
		return perr
	}
	op, _ := operation(req)
	events := 0
	for {
		msg, err := nextFrame(body, MaxEventBytes)
		if cause := context.Cause(ctx); cause != nil {
			return i.failure(ctx, t, req, cause, errIdle, i.idleMsg)
		}
		switch {
		case err == io.EOF:
			if perr := i.grpcEnd(t, req, resp); perr != nil {
				return perr
			}
			if events == 0 {
				return i.invalid(t, req, "stream ended without an event")
			}
			return nil
		case errors.Is(err, errFrameTooLarge):
			return i.invalid(t, req, "event larger than 1 MiB")
		case errors.Is(err, errCompressed):
			return i.invalid(t, req, "a compressed gRPC message")
		case err != nil:
			return i.failure(ctx, t, req, err, errIdle, i.idleMsg)
		}
		result, perr := grpcwire.Result(op, msg)
		if perr != nil {
			return i.invalid(t, req, fmt.Sprintf("event %d: %s", events+1, perr.Error()))
		}
		events++
		if perr := emit(result); perr != nil {
			return perr
		}
	}
}

// nextEvent returns the data of the next Server-Sent Event: its data lines
// joined with "\n", appended to data (a buffer the caller reuses from one
// event to the next). Comments and other fields are skipped; an event
// without data is no event. io.EOF ends the stream (an unterminated last
// event is dropped, as the SSE specification says).
func nextEvent(br *bufio.Reader, data []byte) ([]byte, error) {
	_, data, err := nextNamedEvent(br, data)
	return data, err
}

// nextNamedEvent is nextEvent with the event's type (its last event field,
// "" when none): an HTTP+JSON stream's errors are "error" events.
func nextNamedEvent(br *bufio.Reader, data []byte) (string, []byte, error) {
	data = data[:0]
	var name string
	has := false
	for {
		line, err := readLine(br)
		if err != nil {
			return "", nil, err
		}
		if len(line) == 0 {
			if has {
				return name, data, nil
			}
			name = ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if string(field) == "event" {
			name = clip(string(value), 64)
			continue
		}
		if string(field) != "data" {
			continue // id, retry and unknown fields
		}
		if has {
			data = append(data, '\n')
		}
		data = append(data, value...)
		has = true
		if len(data) > MaxEventBytes {
			return "", nil, errEventTooLarge
		}
	}
}

// readLine reads one line without its "\n" or "\r\n". A line longer than
// MaxEventBytes is errEventTooLarge; a last line without a newline is
// io.EOF. The line may be br's own buffer, valid until br is read again.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for first := true; ; first = false {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxEventBytes+2 {
			return nil, errEventTooLarge
		}
		if first && err == nil {
			// The whole line is in br's buffer (as nearly every line is):
			// no copy. nextEvent copies what it keeps before reading on.
			return trimEOL(chunk), nil
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return trimEOL(line), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

// trimEOL drops a line's "\n" and a "\r" before it.
func trimEOL(line []byte) []byte {
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}

// idleTimer fires once after d without activity; it can be paused while
// capgate itself is busy relaying an event.
type idleTimer struct {
	mu     sync.Mutex
	t      *time.Timer
	d      time.Duration
	paused bool
}

func newIdleTimer(d time.Duration, fire func()) *idleTimer {
	return &idleTimer{t: time.AfterFunc(d, fire), d: d}
}

func (it *idleTimer) touch() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.paused {
		it.t.Reset(it.d)
	}
}

// pause stops the timer until resume.
func (it *idleTimer) pause() {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.paused = true
	it.t.Stop()
}

func (it *idleTimer) resume() {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.paused = false
	it.t.Reset(it.d)
}

// stop stops the timer for good: paused, with nothing to resume it.
func (it *idleTimer) stop() { it.pause() }

// activityReader resets the idle timer whenever bytes arrive.
type activityReader struct {
	r    io.Reader
	idle *idleTimer
}

func (a *activityReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.idle.touch()
	}
	return n, err
}
