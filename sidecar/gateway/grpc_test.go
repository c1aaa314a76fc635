package gateway

import (
	"encoding/base64"
	"encoding/binary"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"

	"github.com/capgate/capgate/sidecar/exchange"
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

// events is a stream of the given event JSONs ending with end (nil: normally).
func events(end *protocol.Error, jsons ...string) exchange.Result {
	return exchange.Result{Stream: func(yield func(exchange.Event) error) *protocol.Error {
		for _, j := range jsons {
			if err := yield(exchange.Event{Kind: protocol.KindTask, JSON: []byte(j)}); err != nil {
				return exchange.Failed(err)
			}
		}
		return end
	}}
}

// TestGRPCEvents: a stream's events become gRPC messages and its end the trailers; an error
// before the first message is returned unwritten, for the gateway to refuse with.
func TestGRPCEvents(t *testing.T) {
	const task = `{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}`
	const done = `{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}`
	const extra = `{"task":{"id":"t-1","extra":1}}`
	notFound := protocol.Errorf(protocol.TaskNotFound, "task not found")
	tests := []struct {
		name    string
		stream  exchange.Result
		events  int
		written bool
		status  string
		reason  string
		message string
	}{
		{"two events", events(nil, task, done), 2, true, "0", "", ""},
		{"an error after an event ends the call", events(notFound, task), 1, true, "5", "TASK_NOT_FOUND", "task not found"},
		{"an error before any event is refused", events(notFound), 0, false, "", "TASK_NOT_FOUND", ""},
		{"a field the proto does not define, first", events(nil, extra, done), 0, false, "", "INVALID_AGENT_RESPONSE", ""},
		{"a field the proto does not define, later", events(nil, task, extra, done), 1, true, "13", "INVALID_AGENT_RESPONSE", "the agent's response cannot be expressed as a gRPC message"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := &protocol.Request{Binding: protocol.GRPC, Operation: protocol.SubscribeToTask}
			perr, written := answer(rec, req, tc.stream, time.Hour)
			require.Equal(t, tc.written, written)
			if tc.reason != "" {
				require.NotNil(t, perr)
				require.Equal(t, tc.reason, perr.Reason())
			}
			if !written {
				require.Empty(t, rec.Body.Bytes(), "nothing is written: the gateway refuses")
				return
			}
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
			if tc.message != "" {
				require.Equal(t, tc.message, res.Trailer.Get("Grpc-Message"))
				require.Equal(t, tc.reason, errorReason(t, res.Trailer.Get("Grpc-Status-Details-Bin")))
			}
		})
	}
}

// TestGRPCUnary: a unary result is one message and grpc-status 0; JSON null is the empty message.
func TestGRPCUnary(t *testing.T) {
	rec := httptest.NewRecorder()
	get := &protocol.Request{Binding: protocol.GRPC, Operation: protocol.GetTask}
	perr, _ := answer(rec, get, exchange.Value(protocol.KindTask, []byte(`{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}`)), 0)
	require.Nil(t, perr)
	msgs := messages(t, rec.Body.Bytes())
	require.Len(t, msgs, 1)
	var task a2apb.Task
	require.NoError(t, proto.Unmarshal(msgs[0], &task))
	require.Equal(t, "t-1", task.GetId())
	require.Equal(t, a2apb.TaskState_TASK_STATE_COMPLETED, task.GetStatus().GetState())
	require.Equal(t, "0", rec.Result().Trailer.Get("Grpc-Status"))

	rec = httptest.NewRecorder()
	perr, _ = answer(rec, &protocol.Request{Binding: protocol.GRPC, Operation: protocol.DeleteTaskPushNotificationConfig}, exchange.Value(protocol.KindEmpty, []byte(`null`)), 0)
	require.Nil(t, perr)
	require.Equal(t, [][]byte{{}}, messages(t, rec.Body.Bytes()))

	rec = httptest.NewRecorder()
	perr, written := answer(rec, get, exchange.Value(protocol.KindTask, []byte(`{"id":"t-1","secret":"x"}`)), 0)
	require.True(t, protocol.IsCode(perr, protocol.InvalidAgentResponse))
	require.False(t, written, "nothing is written: the gateway answers with the error")
	require.Empty(t, rec.Body.Bytes())
}
