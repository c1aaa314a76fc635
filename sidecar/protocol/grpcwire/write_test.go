package grpcwire

import (
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

// discardWriter is an http.ResponseWriter and Flusher that drops the body.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) Flush()                      {}

// stream writes each event JSON with write and returns end, or the first write's error.
func stream(write func(jsontext.Value) error, end *protocol.Error, jsons ...string) *protocol.Error {
	for _, j := range jsons {
		if err := write(jsontext.Value(j)); err != nil {
			return protocol.AsError(err, protocol.Internal, "the stream could not be written")
		}
	}
	return end
}

// BenchmarkGRPCEvents is what the gRPC binding adds to each relayed event:
// the event's JSON turned into a length-prefixed StreamResponse and written.
func BenchmarkGRPCEvents(b *testing.B) {
	ev := jsontext.Value(`{"statusUpdate":{"taskId":"019a-task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-12-03T08:00:00.000001Z"}}}`)
	w := NewWriter(&discardWriter{h: http.Header{}}, protocol.SendStreamingMessage)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Event(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// grpcEventsPlain writes each event as a fresh frame: the reference
// TestGRPCEventsMatchPlain compares the writer that reuses its buffer with.
type grpcEventsPlain struct {
	r *Writer
}

func (e *grpcEventsPlain) event(ev jsontext.Value) error {
	msg, perr := Response(e.r.op, ev)
	if perr != nil {
		return perr
	}
	if e.r.ended {
		return errEnded
	}
	e.r.start()
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	_, err := e.r.w.Write(append(frame, msg...))
	return err
}

// TestGRPCEventsMatchPlain: the gRPC stream written from a reused buffer is
// byte for byte (messages and trailers) the one written from fresh frames,
// for streams of events, events too large to keep a buffer for (before and
// after small ones), and events the proto cannot hold.
func TestGRPCEventsMatchPlain(t *testing.T) {
	const task = `{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}`
	const update = `{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}`
	big := `{"artifactUpdate":{"taskId":"t-1","contextId":"c-1","artifact":{"artifactId":"a","parts":[{"text":"` + strings.Repeat("x", maxKeptBuffer+10) + `"}]}}}`
	notFound := protocol.Errorf(protocol.TaskNotFound, "task not found")
	streams := map[string]struct {
		end    *protocol.Error
		events []string
	}{
		"events":      {nil, []string{update, update, update, update, update}},
		"task first":  {nil, []string{task, update}},
		"large event": {nil, []string{big, update, big, update}},
		"error end":   {notFound, []string{update, task}},
		"bad event":   {nil, []string{update, `{"task":{"extra":1}}`, update}},
	}
	run := func(name string, plain bool) (string, http.Header) {
		rec := httptest.NewRecorder()
		ge := NewWriter(rec, protocol.SubscribeToTask)
		write := ge.Event
		if plain {
			write = (&grpcEventsPlain{r: ge}).event
		}
		perr := stream(write, streams[name].end, streams[name].events...)
		if perr != nil {
			ge.Fail(perr)
		} else {
			ge.End()
		}
		return rec.Body.String(), rec.Result().Trailer
	}
	for name := range streams {
		wantBody, wantTrailer := run(name, true)
		gotBody, gotTrailer := run(name, false)
		require.Equal(t, wantBody, gotBody, name)
		require.Equal(t, wantTrailer, gotTrailer, name)
	}
}

func TestStatusMessageEncoding(t *testing.T) {
	require.Equal(t, "task not found", StatusMessage("task not found"))
	require.Equal(t, "100%25 caf%C3%A9%0A", StatusMessage("100% café\n"))
}
