package jsonrpcwire

import (
	"net/http"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonmodel"
	"github.com/capgate/capgate/sidecar/protocol/sse"
)

// Writer is the JSON-RPC binding's answer writer (both versions): a unary result is one
// JSON-RPC response, a stream Server-Sent Events each holding a JSON-RPC response with the
// event as its result, and a stream's error its last event, a JSON-RPC error response.
type Writer struct {
	stream sse.Stream
	w      http.ResponseWriter
	id     jsontext.Value
	// shape is the shape of a JSON-RPC error's data (protocol.Request.ErrorData).
	shape protocol.DataShape
}

// NewWriter is the answer writer of a JSON-RPC request, echoing its id (null when it had
// none) and writing a stream's error in its ErrorData shape, with a keep-alive comment
// whenever the stream has been quiet for keepAlive (0: none).
func NewWriter(w http.ResponseWriter, req *protocol.Request, keepAlive time.Duration) *Writer {
	id := req.ID
	if len(id) == 0 {
		id = jsontext.Value("null")
	}
	jw := &Writer{w: w, id: id, shape: req.ErrorData}
	jw.stream.Init(w, keepAlive)
	return jw
}

// Unary writes a unary result as one JSON-RPC response.
func (jw *Writer) Unary(result jsontext.Value, _ bool) (*protocol.Error, bool) {
	jsonmodel.WriteBody(jw.w, http.StatusOK, AppendResult(make([]byte, 0, len(result)+len(jw.id)+40), jw.id, result))
	return nil, false
}

// Event writes one event: a data line holding the JSON-RPC response whose result it is.
func (jw *Writer) Event(event jsontext.Value) error {
	return jw.stream.Event(event, jw.appendResult)
}

func (jw *Writer) appendResult(dst, data []byte) []byte { return AppendResult(dst, jw.id, data) }

// Begun reports whether the stream has begun.
func (jw *Writer) Begun() bool { return jw.stream.Begun() }

// Stop stops keep-alives for good; once it returns none is being written.
func (jw *Writer) Stop() { jw.stream.Stop() }

// End ends a stream that ended normally: its last event was its end.
func (jw *Writer) End() {}

// Fail ends a begun stream with e: its last event is a JSON-RPC error response.
func (jw *Writer) Fail(e *protocol.Error) {
	frame := append([]byte("data: "), MarshalErrorIn(e, jw.shape, jw.id)...)
	jw.stream.Fail(append(frame, "\n\n"...))
}
