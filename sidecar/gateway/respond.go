package gateway

import (
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
