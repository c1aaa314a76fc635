package gateway

import (
	"encoding/base64"
	"encoding/binary"
	"net/http/httptest"
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
