package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"

	"github.com/capgate/capgate/sidecar/protocol"
)

// messages splits a gRPC response body into its length-prefixed messages.
func messages(t *testing.T, body []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(body) > 0 {
		require.GreaterOrEqual(t, len(body), 5)
		require.Equal(t, byte(0), body[0], "uncompressed")
		n := int(binary.BigEndian.Uint32(body[1:5]))
		require.GreaterOrEqual(t, len(body)-5, n)
		out = append(out, body[5:5+n])
		body = body[5+n:]
	}
	return out
}

func errorReason(t *testing.T, details string) string {
	t.Helper()
	b, err := base64.RawStdEncoding.DecodeString(details)
	require.NoError(t, err)
	var st spb.Status
	require.NoError(t, proto.Unmarshal(b, &st))
	require.Len(t, st.GetDetails(), 1)
	var info errdetails.ErrorInfo
	require.NoError(t, st.GetDetails()[0].UnmarshalTo(&info))
	require.Equal(t, protocol.Domain, info.GetDomain())
	return info.GetReason()
}

// TestGRPCEvents: the Server-Sent Events a streaming operation writes become gRPC messages and
// trailers, however the writes are split.
func TestGRPCEvents(t *testing.T) {
	const task = `{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}`
	const done = `{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}`
	notFound := string(protocol.Errorf(protocol.TaskNotFound, "task not found").MarshalStatus())
	tests := []struct {
		name    string
		writes  []string
		events  int
		status  string
		reason  string
		message string
	}{
		{"two events", []string{"data: " + task + "\n\n", "data: " + done + "\n\n"}, 2, "0", "", ""},
		{"split mid-event, keep-alives dropped", []string{": keep-alive\n\n", "data: " + task[:10], task[10:] + "\n", "\n: keep-alive\n\ndata: " + done + "\n\n"}, 2, "0", "", ""},
		{"an error after an event ends the call", []string{"data: " + task + "\n\n", "data: " + notFound + "\n\n"}, 1, "5", "TASK_NOT_FOUND", "task not found"},
		{"an event: error frame", []string{"event: error\ndata: " + notFound + "\n\n"}, 0, "5", "TASK_NOT_FOUND", "task not found"},
		{"a field the proto does not define", []string{`data: {"task":{"id":"t-1","extra":1}}` + "\n\n"}, 0, "13", "INVALID_AGENT_RESPONSE", "the agent's response cannot be expressed as a gRPC message"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			r := newGRPCResponder(rec, protocol.SubscribeToTask)
			w := r.Writer()
			w.Header().Set("Content-Type", "text/event-stream") // the operation's SSE headers are not sent
			w.WriteHeader(200)
			for _, s := range tc.writes {
				if _, err := w.Write([]byte(s)); err != nil {
					break
				}
			}
			r.end(nil) // what serveA2A does when the operation returns
			res := rec.Result()
			require.Equal(t, "application/grpc", res.Header.Get("Content-Type"))
			msgs := messages(t, rec.Body.Bytes())
			require.Len(t, msgs, tc.events)
			for _, m := range msgs {
				var ev a2apb.StreamResponse
				require.NoError(t, proto.Unmarshal(m, &ev))
				require.NotNil(t, ev.GetPayload())
			}
			require.Equal(t, tc.status, res.Trailer.Get("Grpc-Status"))
			if tc.reason != "" {
				require.Equal(t, tc.message, res.Trailer.Get("Grpc-Message"))
				require.Equal(t, tc.reason, errorReason(t, res.Trailer.Get("Grpc-Status-Details-Bin")))
			}
		})
	}
}

// TestGRPCUnary: a unary result is one message and grpc-status 0; JSON null is the empty message.
func TestGRPCUnary(t *testing.T) {
	rec := httptest.NewRecorder()
	r := newGRPCResponder(rec, protocol.GetTask)
	require.NoError(t, r.RawResult([]byte(`{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}`)))
	msgs := messages(t, rec.Body.Bytes())
	require.Len(t, msgs, 1)
	var task a2apb.Task
	require.NoError(t, proto.Unmarshal(msgs[0], &task))
	require.Equal(t, "t-1", task.GetId())
	require.Equal(t, a2apb.TaskState_TASK_STATE_COMPLETED, task.GetStatus().GetState())
	require.Equal(t, "0", rec.Result().Trailer.Get("Grpc-Status"))

	rec = httptest.NewRecorder()
	r = newGRPCResponder(rec, protocol.DeleteTaskPushNotificationConfig)
	require.NoError(t, r.RawResult([]byte(`null`)))
	require.Equal(t, [][]byte{{}}, messages(t, rec.Body.Bytes()))

	rec = httptest.NewRecorder()
	r = newGRPCResponder(rec, protocol.GetTask)
	err := r.RawResult([]byte(`{"id":"t-1","secret":"x"}`))
	require.True(t, protocol.IsCode(err, protocol.InvalidAgentResponse))
	require.False(t, r.written(), "nothing is written: the gateway answers with the error")
}

// discardWriter is an http.ResponseWriter and Flusher that drops the body.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) Flush()                      {}

// BenchmarkGRPCEvents is what the gRPC binding adds to each relayed event:
// the SSE frame the dispatcher writes read back and turned into a
// length-prefixed StreamResponse.
func BenchmarkGRPCEvents(b *testing.B) {
	frame := []byte(`data: {"statusUpdate":{"taskId":"019a-task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-12-03T08:00:00.000001Z"}}}` + "\n\n")
	w := newGRPCResponder(&discardWriter{h: http.Header{}}, protocol.SendStreamingMessage).Writer()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Write(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// grpcEventsPlain is grpcEvents as it was before it reused its buffers: the
// reference TestGRPCEventsMatchPlain compares with.
type grpcEventsPlain struct {
	r   *grpcResponder
	buf []byte
}

func (e *grpcEventsPlain) Write(p []byte) (int, error) {
	e.buf = append(e.buf, p...)
	for {
		i := bytes.Index(e.buf, []byte("\n\n"))
		if i < 0 {
			return len(p), nil
		}
		block := bytes.Clone(e.buf[:i])
		e.buf = append(e.buf[:0], e.buf[i+2:]...)
		if err := e.event(block); err != nil {
			return 0, err
		}
	}
}

func (e *grpcEventsPlain) event(block []byte) error {
	var kind string
	var data []byte
	for line := range bytes.SplitSeq(block, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case len(line) == 0 || line[0] == ':':
		case bytes.HasPrefix(line, []byte("event:")):
			kind = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, d...)
		}
	}
	if data == nil {
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
	if e.r.ended {
		return errEnded
	}
	e.r.start()
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	_, err := e.r.w.Write(append(frame, msg...))
	return err
}

// TestGRPCEventsMatchPlain: the gRPC stream written from reused buffers is
// byte for byte (messages and trailers) the one written as before, for
// streams of events, keep-alives, empty and multi-line data, error frames
// and events too large to keep a buffer for, written whole, byte by byte
// and in chunks of every size up to 9.
func TestGRPCEventsMatchPlain(t *testing.T) {
	const task = `{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}`
	const update = `{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}`
	big := `{"artifactUpdate":{"taskId":"t-1","contextId":"c-1","artifact":{"artifactId":"a","parts":[{"text":"` + strings.Repeat("x", maxKeptBuffer+10) + `"}]}}}`
	notFound := string(protocol.Errorf(protocol.TaskNotFound, "task not found").MarshalStatus())
	streams := map[string]string{
		"events":          strings.Repeat("data: "+update+"\n\n", 5),
		"keep-alives":     ": keep-alive\n\ndata: " + task + "\n\n: keep-alive\n\ndata: " + update + "\n\n",
		"crlf":            "data: " + task + "\r\n\n",
		"empty data":      "data:\n\ndata: \n\ndata: " + update + "\n\n",
		"empty then text": "data:\ndata: " + update + "\n\n",
		"multi-line data": "data: {\"statusUpdate\":\ndata: {\"taskId\":\"t\"}}\n\n",
		"large event":     "data: " + big + "\n\ndata: " + update + "\n\ndata: " + big + "\n\n",
		"error event":     "data: " + update + "\n\nevent: error\ndata: " + notFound + "\n\ndata: " + update + "\n\n",
		"error body":      "data: " + notFound + "\n\n",
		"bad event":       "data: {\"task\":{\"extra\":1}}\n\ndata: " + update + "\n\n",
		"unfinished":      "data: " + update + "\n\ndata: " + task,
	}
	type writer interface{ Write([]byte) (int, error) }
	run := func(s string, chunk int, plain bool) (string, http.Header) {
		rec := httptest.NewRecorder()
		r := newGRPCResponder(rec, protocol.SubscribeToTask)
		var w writer = r.Writer()
		if plain {
			w = &grpcEventsPlain{r: r}
		}
		for b := []byte(s); len(b) > 0; {
			n := min(chunk, len(b))
			if _, err := w.Write(b[:n]); err != nil {
				break
			}
			b = b[n:]
		}
		r.end(nil)
		res := rec.Result()
		return rec.Body.String(), res.Trailer
	}
	for name, s := range streams {
		for _, chunk := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, len(s)} {
			if chunk < 10 && len(s) > 10_000 {
				continue
			}
			wantBody, wantTrailer := run(s, chunk, true)
			gotBody, gotTrailer := run(s, chunk, false)
			require.Equal(t, wantBody, gotBody, "%s, chunks of %d", name, chunk)
			require.Equal(t, wantTrailer, gotTrailer, "%s, chunks of %d", name, chunk)
		}
	}
}
