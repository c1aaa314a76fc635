package jsonrpcwire

import (
	"net/http"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
)

// Refusal is the refusal of a JSON-RPC request of version v (wire.Refuse adds the quota
// headers every binding's refusal carries):
//   - HTTP 200 with the JSON-RPC error echoing id, its data in the shape the caller reads
//     (shape: protocol.Request.ErrorData). With authStatus (auth.jsonrpc_http_status: 401), an
//     authentication or authorization failure keeps the JSON-RPC body but takes the failure's
//     HTTP status (401 or 403) and its challenge, for clients that react to statuses only.
//   - a streaming method (streaming) refused before any stream starts (every refusal is
//     decided before the first event; an error after it is the stream's last event, written
//     by Writer). A2A 1.0: the same plain JSON-RPC error response, never a text/event-stream,
//     with the error's HTTP status (protocol.Error.HTTPStatus) and challenge — the 1.0 TCK and
//     @a2a-js/sdk 1.3 read the plain body, and a client that reads a streaming answer as SSE
//     whatever its Content-Type (a2a-go v2.3.1) sees the status instead of a stream without
//     events. A2A 0.3: HTTP 200 and one Server-Sent Event holding the JSON-RPC error, which
//     every 0.3 client reads (the 0.3 TCK's and @a2a-js/sdk 0.3's JSON-RPC clients require
//     text/event-stream on streaming methods; a2a-go v0.3 reads only SSE). With authStatus a
//     0.3 authentication failure is the plain 401 above (a client that checks the status does
//     not read a 401 as a stream). docs/interop.md, "Stream errors have one form per caller
//     binding".
func Refusal(v protocol.Version, shape protocol.DataShape, streaming bool, id jsontext.Value, e *protocol.Error, authStatus bool) protocol.Refusal {
	body := MarshalErrorIn(e, shape, id)
	if c := e.WWWAuthenticate(); c != "" && authStatus {
		return protocol.Refusal{Status: e.HTTPStatus(), Header: [][2]string{{"content-type", "application/json"}, {"www-authenticate", c}}, Body: body}
	}
	if streaming && v == protocol.V03 {
		return protocol.Refusal{Status: http.StatusOK, Header: [][2]string{{"content-type", "text/event-stream"}, {"cache-control", "no-cache"}},
			Body: append(append([]byte("data: "), body...), "\n\n"...)}
	}
	if streaming {
		r := protocol.Refusal{Status: e.HTTPStatus(), Header: [][2]string{{"content-type", "application/json"}}, Body: body}
		if c := e.WWWAuthenticate(); c != "" {
			r.Header = append(r.Header, [2]string{"www-authenticate", c})
		}
		return r
	}
	return protocol.Refusal{Status: http.StatusOK, Header: [][2]string{{"content-type", "application/json"}}, Body: body}
}
