package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

// TestProtoJSON03Events: the 0.3 HTTP+JSON binding's stream writer turns each 0.3 event into a
// StreamResponse, ends the stream with an error event at the first event it cannot express
// once the stream has begun, and returns that error unwritten (for an ordinary refusal) when it
// is the first event.
func TestProtoJSON03Events(t *testing.T) {
	req := &protocol.Request{Binding: protocol.HTTPJSON, Version: protocol.V03, Operation: protocol.SendStreamingMessage, Method: "POST /v1/message:stream"}
	require.True(t, req.ProtoJSON03())
	rec := httptest.NewRecorder()
	perr, written := answer(rec, req, events(protocol.Errorf(protocol.Internal, "boom"),
		`{"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"working"}}`,
		`{"kind":"task","id":"t1","contextId":"c1","status":{"state":"completed"}}`), time.Hour)
	require.True(t, written)
	require.Equal(t, protocol.Internal, perr.Code)
	// ProtoJSON's whitespace is not stable: compare the events' JSON.
	evs := strings.Split(strings.TrimSuffix(rec.Body.String(), "\n\n"), "\n\n")
	require.Len(t, evs, 3)
	require.True(t, strings.HasPrefix(evs[0], "data: "))
	require.JSONEq(t, `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`, evs[0][len("data: "):])
	require.JSONEq(t, `{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`, evs[1][len("data: "):])
	require.True(t, strings.HasPrefix(evs[2], "event: error\ndata: {\"error\":{\"code\":500"), "%s", evs[2])

	rec = httptest.NewRecorder()
	perr, written = answer(rec, req, events(nil, `{"kind":"task","id":"t1","contextId":"c1","status":{"state":"completed"}}`, `{"kind":"nonsense"}`, `{"kind":"task","id":"t2"}`), time.Hour)
	require.True(t, written)
	require.Equal(t, protocol.InvalidAgentResponse, perr.Code)
	evs = strings.Split(strings.TrimSuffix(rec.Body.String(), "\n\n"), "\n\n")
	require.Len(t, evs, 2, "the stream ends at the event it cannot express")
	require.True(t, strings.HasPrefix(evs[1], "event: error\ndata: {\"error\":{\"code\":502"), "%s", evs[1])

	rec = httptest.NewRecorder()
	perr, written = answer(rec, req, events(nil, `{"kind":"nonsense"}`), time.Hour)
	require.False(t, written, "a first event it cannot express is refused as any error before the stream")
	require.Equal(t, protocol.InvalidAgentResponse, perr.Code)
	require.Empty(t, rec.Body.String())
}
