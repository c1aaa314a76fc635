package protocol

import (
	"net/http"

	"github.com/go-json-experiment/json/jsontext"
)

// Refusal is the HTTP answer to a refused request: the same status,
// headers and body whichever door refuses it (the gateway writes it, ext_authz hands it to
// Envoy as the denied response).
type Refusal struct {
	Status int
	// Header holds lower-case header names and values.
	Header [][2]string
	Body   []byte
}

// Refuse shapes e for a request of a JSON binding b (gRPC's is grpcwire.Refusal; wire.Refuse
// picks the binding's) (every binding: a ResourceExhausted refusal also
// carries Retry-After and the RateLimit header fields, see Error.QuotaHeaders):
//   - gRPC: a trailers-only response: HTTP 200, content-type application/grpc and the status
//     headers (Error.GRPCStatus), no body;
//   - HTTP+JSON (and anything refused before its binding is known): the mapped HTTP status and a
//     google.rpc.Status body, a Bearer challenge on 401 and 403, Allow on 405, Retry-After on
//     503 (Unavailable);
//   - JSON-RPC: HTTP 200 with the JSON-RPC error echoing id, its data in the shape the caller
//     reads (shape: Request.ErrorData). With authStatus (auth.jsonrpc_http_status: 401), an
//     authentication or authorization failure keeps the JSON-RPC body but takes the failure's
//     HTTP status (401 or 403) and its challenge, for clients that react to statuses only.
//   - JSON-RPC, a streaming method of version v, refused before any stream starts (every
//     refusal is decided before the first event; an error after it is the stream's last event,
//     written by the gateway's stream writer). A2A 1.0: the same plain JSON-RPC error response,
//     never a text/event-stream, with the error's HTTP status (Error.HTTPStatus) and challenge —
//     the 1.0 TCK and @a2a-js/sdk 1.3 read the plain body, and a client that reads a streaming
//     answer as SSE whatever its Content-Type (a2a-go v2.3.1) sees the status instead of a
//     stream without events. A2A 0.3: HTTP 200 and one Server-Sent Event holding the JSON-RPC
//     error, which every 0.3 client reads (the 0.3 TCK's and @a2a-js/sdk 0.3's JSON-RPC clients
//     require text/event-stream on streaming methods; a2a-go v0.3 reads only SSE). With
//     authStatus a 0.3 authentication failure is the plain 401 above (a client that checks the
//     status does not read a 401 as a stream). docs/interop.md, "Stream errors have one form per
//     caller binding".
func Refuse(b Binding, v Version, shape DataShape, streaming bool, id jsontext.Value, e *Error, authStatus bool) Refusal {
	r := refuse(b, v, shape, streaming, id, e, authStatus)
	r.Header = append(r.Header, e.QuotaHeaders()...)
	return r
}

func refuse(b Binding, v Version, shape DataShape, streaming bool, id jsontext.Value, e *Error, authStatus bool) Refusal {
	if b != JSONRPC {
		r := Refusal{Status: e.HTTPStatus(), Header: [][2]string{{"content-type", "application/json"}}, Body: e.MarshalStatus()}
		if c := e.WWWAuthenticate(); c != "" {
			r.Header = append(r.Header, [2]string{"www-authenticate", c})
		}
		// A 405 names the allowed methods (RFC 9110 15.5.6); the parser puts them in metadata.
		if allow := e.Metadata["allow"]; e.Code == MethodNotAllowed && allow != "" {
			r.Header = append(r.Header, [2]string{"allow", allow})
		}
		if e.Code == Unavailable {
			r.Header = append(r.Header, [2]string{"retry-after", "1"}) // RFC 9110 10.2.3
		}
		return r
	}
	body := e.MarshalJSONRPCIn(shape, id)
	if c := e.WWWAuthenticate(); c != "" && authStatus {
		return Refusal{Status: e.HTTPStatus(), Header: [][2]string{{"content-type", "application/json"}, {"www-authenticate", c}}, Body: body}
	}
	if streaming && v == V03 {
		return Refusal{Status: http.StatusOK, Header: [][2]string{{"content-type", "text/event-stream"}, {"cache-control", "no-cache"}},
			Body: append(append([]byte("data: "), body...), "\n\n"...)}
	}
	if streaming {
		r := Refusal{Status: e.HTTPStatus(), Header: [][2]string{{"content-type", "application/json"}}, Body: body}
		if c := e.WWWAuthenticate(); c != "" {
			r.Header = append(r.Header, [2]string{"www-authenticate", c})
		}
		return r
	}
	return Refusal{Status: http.StatusOK, Header: [][2]string{{"content-type", "application/json"}}, Body: body}
}
