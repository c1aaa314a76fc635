package httpjsonwire

import (
	"strconv"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonmodel"
)

// MarshalStatus returns e as the google.rpc.Status JSON body of the HTTP+JSON binding, the
// shape a2a-go's REST client decodes.
func MarshalStatus(e *protocol.Error) []byte {
	b := make([]byte, 0, 192+len(e.Message))
	b = append(b, `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(e.HTTPStatus()), 10)
	b = append(b, `,"status":`...)
	b = jsonmodel.AppendQuote(b, e.StatusName())
	b = append(b, `,"message":`...)
	b = jsonmodel.AppendQuote(b, e.Message)
	b = append(b, `,"details":[`...)
	b = jsonmodel.AppendErrorDetails(b, e, true)
	return append(b, "]}}"...)
}

// Refusal is the refusal of an HTTP+JSON request, and of anything refused before its binding
// is known (wire.Refuse adds the quota headers every binding's refusal carries): the mapped
// HTTP status and a google.rpc.Status body, a Bearer challenge on 401 and 403, Allow on 405,
// Retry-After on 503 (Unavailable).
func Refusal(e *protocol.Error) protocol.Refusal {
	r := protocol.Refusal{Status: e.HTTPStatus(), Header: [][2]string{{"content-type", "application/json"}}, Body: MarshalStatus(e)}
	if c := e.WWWAuthenticate(); c != "" {
		r.Header = append(r.Header, [2]string{"www-authenticate", c})
	}
	// A 405 names the allowed methods (RFC 9110 15.5.6); the parser puts them in metadata.
	if allow := e.Metadata["allow"]; e.Code == protocol.MethodNotAllowed && allow != "" {
		r.Header = append(r.Header, [2]string{"allow", allow})
	}
	if e.Code == protocol.Unavailable {
		r.Header = append(r.Header, [2]string{"retry-after", "1"}) // RFC 9110 10.2.3
	}
	return r
}
