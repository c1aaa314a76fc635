package gateway

import (
	"net/http"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/revision"
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

// writeJSONRPCError answers with a JSON-RPC error: HTTP 200, the A2A code
// and ErrorInfo, the request id echoed.
func writeJSONRPCError(w http.ResponseWriter, id jsontext.Value, e *protocol.Error) {
	writeJSON(w, http.StatusOK, e.MarshalJSONRPC(id))
}

// writeJSONRPCRefusal answers a JSON-RPC request the gateway refused.
// A streaming call's refusal is one event of the stream, as A2A clients
// (a2a-go among them) read it. With auth.jsonrpc_http_status 401, an
// authentication or authorization failure is instead the JSON-RPC error
// (same body, -31401/-31403) with the HTTP status of the failure, 401 or
// 403, and its Bearer challenge, for clients that react to HTTP statuses
// only (the A2A JavaScript SDK's auth-retry among them). A client that
// checks the status does not read a 401 as a stream, so a streaming call
// gets the plain JSON body too.
func writeJSONRPCRefusal(w http.ResponseWriter, rev *revision.Revision, id jsontext.Value, e *protocol.Error, streaming bool) {
	if c := e.WWWAuthenticate(); c != "" && rev.Config().Auth.JSONRPCHTTPStatus == config.JSONRPCStatusAuth {
		w.Header().Set("WWW-Authenticate", c)
		writeJSON(w, e.HTTPStatus(), e.MarshalJSONRPC(id))
		return
	}
	if streaming {
		writeJSONRPCStreamError(w, id, e)
		return
	}
	writeJSONRPCError(w, id, e)
}

// writeJSONRPCStreamError answers a streaming JSON-RPC call that is refused
// before its stream starts: a Server-Sent Events stream of one event, the
// JSON-RPC error.
func writeJSONRPCStreamError(w http.ResponseWriter, id jsontext.Value, e *protocol.Error) {
	body := e.MarshalJSONRPC(id)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(append([]byte("data: "), body...), "\n\n"...))
}

// writeStatusError answers an HTTP+JSON request with google.rpc.Status and
// the mapped status code (and a Bearer challenge on 401/403).
func writeStatusError(w http.ResponseWriter, e *protocol.Error) {
	if c := e.WWWAuthenticate(); c != "" {
		w.Header().Set("WWW-Authenticate", c)
	}
	// A 405 must name the allowed methods (RFC 9110 15.5.6); the parser
	// puts them in the ErrorInfo metadata.
	if allow := e.Metadata["allow"]; e.Code == protocol.MethodNotAllowed && allow != "" {
		w.Header().Set("Allow", allow)
	}
	writeJSON(w, e.HTTPStatus(), e.MarshalStatus())
}
