package httpjsonwire

import (
	"net/http"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonmodel"
	"github.com/capgate/capgate/sidecar/protocol/sse"
)

// Writer is the HTTP+JSON binding's answer writer (both versions): a unary result is one JSON
// body, a stream Server-Sent Events whose data lines hold the events — in the 0.3
// specification's form (a 0.3 request on a /v1/ route, protocol.Request.ProtoJSON03) the 0.3
// proto's response and StreamResponse in ProtoJSON — and a stream's error its last event.
type Writer struct {
	stream sse.Stream
	w      http.ResponseWriter
	op     protocol.Operation
	// protoJSON03 marks an answer in the 0.3 ProtoJSON form.
	protoJSON03 bool
}

// NewWriter is the answer writer of an HTTP+JSON request, with a keep-alive comment whenever
// the stream has been quiet for keepAlive (0: none).
func NewWriter(w http.ResponseWriter, req *protocol.Request, keepAlive time.Duration) *Writer {
	hw := &Writer{w: w, op: req.Operation, protoJSON03: req.ProtoJSON03()}
	hw.stream.Init(w, keepAlive)
	return hw
}

// Unary writes a unary result as one JSON body: the result object (an empty result is {},
// google.protobuf.Empty's JSON), or the 0.3 proto's response in ProtoJSON.
func (hw *Writer) Unary(result jsontext.Value, empty bool) (*protocol.Error, bool) {
	if empty && string(result) == "null" {
		result = jsontext.Value("{}") // google.protobuf.Empty over HTTP+JSON
	}
	if hw.protoJSON03 {
		b, perr := ProtoJSON03Response(hw.op, result)
		if perr != nil {
			return perr, false
		}
		result = b
	}
	jsonmodel.WriteBody(hw.w, http.StatusOK, result)
	return nil, false
}

// Event writes one event as one data line. An event the 0.3 HTTP+JSON binding cannot express
// ends the stream with that error.
func (hw *Writer) Event(event jsontext.Value) error {
	data := []byte(event)
	if hw.protoJSON03 {
		b, perr := ProtoJSON03Event(data)
		if perr != nil {
			return perr
		}
		data = b
	}
	return hw.stream.Event(data, nil)
}

// Begun reports whether the stream has begun.
func (hw *Writer) Begun() bool { return hw.stream.Begun() }

// Stop stops keep-alives for good; once it returns none is being written.
func (hw *Writer) Stop() { hw.stream.Stop() }

// End ends a stream that ended normally: its last event was its end.
func (hw *Writer) End() {}

// Fail ends a begun stream with e: an SSE event of type "error" whose data is the
// google.rpc.Status body, as the A2A JavaScript SDK reads it; clients that read only data
// lines (a2a-go) see the same error body.
func (hw *Writer) Fail(e *protocol.Error) {
	frame := append([]byte("event: error\ndata: "), MarshalStatus(e)...)
	hw.stream.Fail(append(frame, "\n\n"...))
}
