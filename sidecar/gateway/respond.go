package gateway

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
)

// Responder writes an operation's successful answer in the request's binding.
type Responder interface {
	// Result writes v as the result (JSON-RPC) or body (HTTP+JSON).
	Result(v any) error
	// RawResult writes pre-serialized result JSON.
	RawResult(result []byte) error
	// Binding tells the operation which binding it answers in.
	Binding() protocol.Binding
	// Writer gives direct access for streaming (SSE); the operation then
	// owns the whole response.
	Writer() http.ResponseWriter
}

type jsonrpcResponder struct {
	w  http.ResponseWriter
	id jsontext.Value
}

func (j *jsonrpcResponder) Binding() protocol.Binding   { return protocol.JSONRPC }
func (j *jsonrpcResponder) Writer() http.ResponseWriter { return j.w }
func (j *jsonrpcResponder) Result(v any) error {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return err
	}
	return j.RawResult(b)
}

func (j *jsonrpcResponder) RawResult(result []byte) error {
	id := j.id
	if len(id) == 0 {
		id = jsontext.Value("null")
	}
	buf := make([]byte, 0, len(result)+len(id)+40)
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"result":`...)
	buf = append(buf, result...)
	buf = append(buf, '}')
	writeJSON(j.w, http.StatusOK, buf)
	return nil
}

type restResponder struct {
	w http.ResponseWriter
}

func (r *restResponder) Binding() protocol.Binding   { return protocol.HTTPJSON }
func (r *restResponder) Writer() http.ResponseWriter { return r.w }
func (r *restResponder) Result(v any) error {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return err
	}
	return r.RawResult(b)
}

func (r *restResponder) RawResult(result []byte) error {
	writeJSON(r.w, http.StatusOK, result)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeRefusal writes a refusal as both doors shape it (protocol.Refuse).
func writeRefusal(w http.ResponseWriter, r protocol.Refusal) {
	h := w.Header()
	for _, kv := range r.Header {
		h.Set(kv[0], kv[1])
	}
	if len(r.Body) > 0 { // a gRPC refusal is headers only
		h.Set("Content-Length", strconv.Itoa(len(r.Body)))
	}
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(r.Status)
	_, _ = w.Write(r.Body)
}

// writeStatusError answers an HTTP+JSON request with google.rpc.Status and the mapped status.
func writeStatusError(w http.ResponseWriter, e *protocol.Error) {
	writeRefusal(w, protocol.Refuse(protocol.HTTPJSON, false, nil, e, false))
}

// protoJSON03Responder answers a request of the A2A 0.3 specification's HTTP+JSON binding (a
// 0.3 request on a /v1/ route): the operation's 0.3 JSON-RPC result is written as the proto
// response message in ProtoJSON (protocol.ProtoJSON03Response), and each stream event as a
// StreamResponse (protocol.ProtoJSON03Event). Error events are written as they are.
type protoJSON03Responder struct {
	restResponder
	op protocol.Operation
}

func (r *protoJSON03Responder) Result(v any) error {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return err
	}
	return r.RawResult(b)
}

func (r *protoJSON03Responder) RawResult(result []byte) error {
	b, perr := protocol.ProtoJSON03Response(r.op, result)
	if perr != nil {
		return perr
	}
	return r.restResponder.RawResult(b)
}

// Writer rewrites the Server-Sent Events the operation writes: each data event becomes the
// StreamResponse it stands for.
func (r *protoJSON03Responder) Writer() http.ResponseWriter {
	return &protoJSON03Events{ResponseWriter: r.w}
}

type protoJSON03Events struct {
	http.ResponseWriter
	buf    []byte
	failed bool // an event could not be converted: the stream has ended
}

var _ http.Flusher = (*protoJSON03Events)(nil)

func (e *protoJSON03Events) Flush() {
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (e *protoJSON03Events) Write(p []byte) (int, error) {
	if e.failed {
		return 0, errEnded
	}
	e.buf = append(e.buf, p...)
	for {
		i := bytes.Index(e.buf, []byte("\n\n"))
		if i < 0 {
			return len(p), nil
		}
		block := e.event(e.buf[:i])
		e.buf = e.buf[i+2:]
		if _, err := e.ResponseWriter.Write(append(block, "\n\n"...)); err != nil {
			return 0, err
		}
		if e.failed {
			return 0, errEnded
		}
	}
}

// event rewrites one SSE block: a lone data line of a plain event is converted; comments,
// error events and anything else pass unchanged. An event that cannot be converted ends the
// stream with an error event.
func (e *protoJSON03Events) event(block []byte) []byte {
	data, ok := bytes.CutPrefix(block, []byte("data: "))
	if !ok || bytes.IndexByte(data, '\n') >= 0 || bytes.HasPrefix(data, []byte(`{"error"`)) {
		return bytes.Clone(block)
	}
	b, perr := protocol.ProtoJSON03Event(data)
	if perr != nil {
		e.failed = true
		return append([]byte("event: error\ndata: "), perr.MarshalStatus()...)
	}
	return append([]byte("data: "), b...)
}
