package protocol

// Refusal is the HTTP answer to a refused request: the same status,
// headers and body whichever door refuses it (the gateway writes it, ext_authz hands it to
// Envoy as the denied response).
type Refusal struct {
	Status int
	// Header holds lower-case header names and values.
	Header [][2]string
	Body   []byte
}

// RefuseHTTP shapes e for an HTTP+JSON request, and for anything refused before its binding is
// known: the mapped HTTP status and a google.rpc.Status body, a Bearer challenge on 401 and
// 403, Allow on 405, Retry-After on 503 (Unavailable). wire.Refuse picks a binding's refusal.
func RefuseHTTP(e *Error) Refusal {
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
