package sse_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
	"github.com/capgate/capgate/sidecar/protocol/sse"
)

// frameSSEPlain is an event's frame built fresh, as it was before the
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

// writer is the answer writer of binding b for req: what each JSON binding streams with.
type writer interface {
	Event(jsontext.Value) error
	Stop()
}

func newWriter(b protocol.Binding, w http.ResponseWriter, req *protocol.Request, keepAlive time.Duration) writer {
	req.Binding = b
	if b == protocol.JSONRPC {
		return jsonrpcwire.NewWriter(w, req, keepAlive)
	}
	return httpjsonwire.NewWriter(w, req, keepAlive)
}

// sseBindings are the bindings that stream as Server-Sent Events, by benchmark name.
var sseBindings = map[string]protocol.Binding{"jsonrpc": protocol.JSONRPC, "http+json": protocol.HTTPJSON}

// TestSSEFramesMatchPlain: a stream written with one reused frame buffer
// is byte for byte the stream of fresh frames, for both bindings, any
// request id, and events of every size, including ones larger than the
// buffer it keeps, before and after smaller ones.
func TestSSEFramesMatchPlain(t *testing.T) {
	big := `{"k":"` + strings.Repeat("x", sse.MaxKeptBuffer+100) + `"}`
	results := []string{`{"statusUpdate":{"taskId":"t1"}}`, `{}`, big, `{"a":1}`, `"s"`, big[:sse.MaxKeptBuffer-50] + `"}`, `null`, `{"message":{"taskId":"t"}}`}
	for _, binding := range []protocol.Binding{protocol.JSONRPC, protocol.HTTPJSON} {
		for _, id := range []string{`"1"`, `7`, ``, `"a\"b"`} {
			t.Run(fmt.Sprintf("%s id %s", binding, id), func(t *testing.T) {
				rec := httptest.NewRecorder()
				aw := newWriter(binding, rec, &protocol.Request{ID: jsontext.Value(id), ErrorData: protocol.DataList}, 0)
				var want []byte
				wantID := []byte(id)
				if id == "" {
					wantID = []byte("null")
				}
				for _, r := range results {
					require.NoError(t, aw.Event([]byte(r)))
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
			aw := newWriter(binding, rec, &protocol.Request{ID: jsontext.Value(`1`), ErrorData: protocol.DataList}, 0)
			require.NoError(t, aw.Event([]byte(result)))
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

// BenchmarkSSEEvents is what the JSON-RPC and HTTP+JSON bindings add to each
// relayed event (ns/op and allocs/op are per event): the keep-alive timer,
// the SSE frame written and flushed to the client.
func BenchmarkSSEEvents(b *testing.B) {
	ev := jsontext.Value(`{"statusUpdate":{"taskId":"019a-task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-12-03T08:00:00.000001Z"}}}`)
	for name, binding := range sseBindings {
		b.Run(name, func(b *testing.B) {
			aw := newWriter(binding, &discardWriter{h: http.Header{}}, &protocol.Request{ID: jsontext.Value(`"1"`), ErrorData: protocol.DataList}, 15e9)
			defer aw.Stop()
			b.ReportAllocs()
			for b.Loop() {
				if err := aw.Event(ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// discardWriter is an http.ResponseWriter and Flusher that drops the body.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) Flush()                      {}
