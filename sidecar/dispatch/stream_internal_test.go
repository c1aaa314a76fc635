package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/gateway"
	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/protocol"
)

// streamResponder is a gateway.Responder whose Writer is w.
type streamResponder struct {
	gateway.Responder
	w       http.ResponseWriter
	binding protocol.Binding
}

func (r *streamResponder) Writer() http.ResponseWriter { return r.w }
func (r *streamResponder) Binding() protocol.Binding   { return r.binding }

// frameSSEPlain is sseWriter.event's frame as it was built before the
// writer reused its buffer: the reference TestSSEFramesMatchPlain compares
// with.
func frameSSEPlain(jsonrpc bool, id, result []byte) []byte {
	buf := make([]byte, 0, len(result)+64)
	buf = append(buf, "data: "...)
	if jsonrpc {
		buf = append(buf, `{"jsonrpc":"2.0","id":`...)
		buf = append(buf, id...)
		buf = append(buf, `,"result":`...)
		buf = append(buf, result...)
		buf = append(buf, '}')
	} else {
		buf = append(buf, result...)
	}
	return append(buf, "\n\n"...)
}

// TestSSEFramesMatchPlain: a stream written with one reused frame buffer
// is byte for byte the stream of fresh frames, for both bindings, any
// request id, and events of every size, including ones larger than the
// buffer it keeps, before and after smaller ones.
func TestSSEFramesMatchPlain(t *testing.T) {
	big := `{"k":"` + strings.Repeat("x", maxKeptFrame+100) + `"}`
	results := []string{`{"statusUpdate":{"taskId":"t1"}}`, `{}`, big, `{"a":1}`, `"s"`, big[:maxKeptFrame-50] + `"}`, `null`, `{"message":{"taskId":"t"}}`}
	for _, binding := range []protocol.Binding{protocol.JSONRPC, protocol.HTTPJSON} {
		for _, id := range []string{`"1"`, `7`, ``, `"a\"b"`} {
			t.Run(fmt.Sprintf("%s id %s", binding, id), func(t *testing.T) {
				rec := httptest.NewRecorder()
				call := &gateway.Call{Request: &protocol.Request{ID: jsontext.Value(id)}}
				sse := newSSE(call, &streamResponder{w: rec, binding: binding})
				var want []byte
				wantID := []byte(id)
				if id == "" {
					wantID = []byte("null")
				}
				for _, r := range results {
					require.NoError(t, sse.event([]byte(r)))
					want = append(want, frameSSEPlain(binding == protocol.JSONRPC, wantID, []byte(r))...)
				}
				require.Equal(t, string(want), rec.Body.String())
				require.Equal(t, "text/event-stream", rec.Header().Get("Content-Type"))
			})
		}
	}
}

// TestSSEFrameIsOneDataLine: an event whose JSON a handler split over
// several data: lines (joined with line feeds by the reader; CR too) is
// relayed as one data: line on both bindings, the same JSON value.
func TestSSEFrameIsOneDataLine(t *testing.T) {
	for _, binding := range []protocol.Binding{protocol.JSONRPC, protocol.HTTPJSON} {
		for _, result := range []string{"{\n\"task\": {\"id\": \"t1\"}\n}", "{\r\n\"a\":\r\"b\\n\"}", "\n[1,\n2]\n"} {
			rec := httptest.NewRecorder()
			call := &gateway.Call{Request: &protocol.Request{ID: jsontext.Value(`1`)}}
			sse := newSSE(call, &streamResponder{w: rec, binding: binding})
			require.NoError(t, sse.event([]byte(result)))
			body := rec.Body.String()
			require.True(t, strings.HasSuffix(body, "\n\n"))
			line, ok := strings.CutPrefix(strings.TrimSuffix(body, "\n\n"), "data: ")
			require.True(t, ok, body)
			require.NotContains(t, line, "\n")
			require.NotContains(t, line, "\r")
			got := jsontext.Value(line)
			if binding == protocol.JSONRPC {
				var env struct {
					Result jsontext.Value `json:"result"`
				}
				require.NoError(t, json.Unmarshal([]byte(line), &env))
				got = env.Result
			}
			want := jsontext.Value(result)
			require.NoError(t, want.Compact())
			require.NoError(t, got.Compact())
			require.Equal(t, string(want), string(got))
		}
	}
}

// discardWriter is an http.ResponseWriter and Flusher that drops the body.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) Flush()                      {}

// eventsInvoker streams n copies of one event into one buffer, as
// handler.Invoker does.
type eventsInvoker struct {
	Invoker
	event []byte
	n     int
}

func (f *eventsInvoker) Stream(_ context.Context, _ handler.Request, yield func(jsontext.Value) error) *protocol.Error {
	buf := make([]byte, 0, len(f.event))
	for range f.n {
		buf = append(buf[:0], f.event...)
		if err := yield(buf); err != nil {
			return protocol.Wrap(protocol.Internal, err, "stream")
		}
	}
	return nil
}

// BenchmarkStreamRelay is what the dispatcher does for each event of a
// relayed stream (ns/op and allocs/op are per event): the task binding
// (the first event binds the task), the keep-alive timer, the SSE frame
// written and flushed to the client.
func BenchmarkStreamRelay(b *testing.B) {
	for _, binding := range []protocol.Binding{protocol.JSONRPC, protocol.HTTPJSON} {
		b.Run(string(binding), func(b *testing.B) {
			inv := &eventsInvoker{event: []byte(`{"statusUpdate":{"taskId":"019a-task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-12-03T08:00:00.000001Z"}}}`)}
			d := New(nil, inv, nil, WithStreamKeepAlive(15*time.Second))
			call := &gateway.Call{Request: &protocol.Request{ID: jsontext.Value(`"1"`), Version: protocol.V1}}
			w := &streamResponder{w: &discardWriter{h: http.Header{}}, binding: binding}
			bound := 0
			bind := func(string, string) *protocol.Error { bound++; return nil }
			b.ReportAllocs()
			inv.n = b.N
			b.ResetTimer()
			if perr := d.stream(b.Context(), call, w, invocation{call: call}, bind); perr != nil {
				b.Fatal(perr)
			}
			if bound != 1 {
				b.Fatalf("bound %d times", bound)
			}
		})
	}
}
