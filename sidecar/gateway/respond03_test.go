package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

// TestProtoJSON03Events: the 0.3 HTTP+JSON binding's stream writer turns each 0.3 event into a
// StreamResponse, passes comments and error events through, and ends the stream with an error
// event at the first event it cannot express.
func TestProtoJSON03Events(t *testing.T) {
	rec := httptest.NewRecorder()
	resp := &protoJSON03Responder{restResponder: restResponder{w: rec}, op: protocol.SendStreamingMessage}
	w := resp.Writer()
	for _, chunk := range []string{
		": keep-alive\n\n",
		`data: {"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"working"}}` + "\n\n",
		"event: error\ndata: {\"error\":{\"code\":500}}\n\n",
		`data: {"kind":"task","id":"t1","con`, // split across writes
		`textId":"c1","status":{"state":"completed"}}` + "\n\n",
	} {
		_, err := w.Write([]byte(chunk))
		require.NoError(t, err)
	}
	// ProtoJSON's whitespace is not stable: compare the events' JSON.
	events := strings.Split(strings.TrimSuffix(rec.Body.String(), "\n\n"), "\n\n")
	require.Len(t, events, 4)
	require.Equal(t, ": keep-alive", events[0])
	require.True(t, strings.HasPrefix(events[1], "data: "))
	require.JSONEq(t, `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`, events[1][len("data: "):])
	require.Equal(t, "event: error\ndata: {\"error\":{\"code\":500}}", events[2])
	require.JSONEq(t, `{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`, events[3][len("data: "):])

	rec = httptest.NewRecorder()
	w = (&protoJSON03Responder{restResponder: restResponder{w: rec}, op: protocol.SendStreamingMessage}).Writer()
	_, err := w.Write([]byte("data: {\"kind\":\"nonsense\"}\n\n"))
	require.Error(t, err, "the stream ends")
	require.True(t, strings.HasPrefix(rec.Body.String(), "event: error\ndata: {\"error\":{\"code\":502"), "%s", rec.Body.String())
	_, err = w.Write([]byte(": keep-alive\n\n"))
	require.Error(t, err, "nothing more is written")
}
