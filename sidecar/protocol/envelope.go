package protocol

import (
	"net/http"
	"net/url"
	"strings"
)

// Header gives the values of a request header, one per line it was sent on (a proxy that
// joined repeated lines with commas gives one). Names are matched case-insensitively.
type Header interface {
	Values(name string) []string
}

// HTTPHeader adapts net/http's header map.
type HTTPHeader http.Header

// Values implements Header.
func (h HTTPHeader) Values(name string) []string { return h[canonicalKey(name)] }

// canonicalKey is http.CanonicalHeaderKey(name), spelled out for the A2A headers every request
// is read for: their names are not canonical ("A2A-…"), and net/http would allocate the
// canonical form again on each lookup. TestCanonicalKey holds the two equal.
func canonicalKey(name string) string {
	switch name {
	case VersionHeader:
		return "A2a-Version"
	case ExtensionsHeader:
		return "A2a-Extensions"
	case ExtensionsHeaderV03:
		return "X-A2a-Extensions"
	}
	return http.CanonicalHeaderKey(name)
}

// Envelope is an A2A request as a door received it, before anything in it is read: the gateway
// builds one from its http.Request, the ext_authz server from Envoy's CheckRequest. Parse reads
// every envelope the same way, so both doors see the same request.
type Envelope struct {
	// Method is the HTTP method.
	Method string
	// Path is the request path as sent (escaped), Query the raw query ("" when none).
	Path, Query string
	Header      Header
	// Body is the request body; for gRPC the length-prefixed message.
	Body []byte
	// GRPC accepts the gRPC binding (application/grpc content types); a door that cannot serve
	// it leaves it false and such requests are refused.
	GRPC bool
	// Methods are the JSON-RPC methods the deployment's extensions add.
	Methods Methods
}

// Header names read by the doors.
const (
	headerContentType = "Content-Type"
)

// VersionParam is the request parameter a client may name the A2A version with instead of the
// A2A-Version header (A2A 1.0 §3.6.1: `GET /tasks/t?A2A-Version=1.0`). Its name is matched
// case-insensitively, like the header's.
const VersionParam = "A2A-Version"

// RequestVersion is the one rule for the A2A version of a JSON-RPC or HTTP+JSON request: the
// A2A-Version header, or the A2A-Version request parameter of the raw query; neither is 0.3
// (§3.6.2). Given more than once — two header lines, a comma-joined list, the parameter twice,
// or header and parameter with different values — it is RepeatedVersion: readers disagree
// about which copy wins. It returns the query without the version parameter, the query the
// binding reads. gRPC requests carry the version in metadata, read by the gRPC binding.
func RequestVersion(h Header, query string) (Version, string, *Error) {
	vs := h.Values(VersionHeader)
	if len(vs) > 1 {
		return "", query, RepeatedVersion()
	}
	params, rest := versionParams(query)
	switch {
	case len(params) > 1:
		return "", rest, RepeatedVersion()
	case len(params) == 1 && len(vs) == 1 && strings.TrimSpace(params[0]) != strings.TrimSpace(vs[0]):
		return "", rest, RepeatedVersion()
	case len(vs) == 1:
		v, err := ParseVersion(vs[0])
		return v, rest, err
	case len(params) == 1:
		v, err := ParseVersion(params[0])
		return v, rest, err
	}
	v, err := ParseVersion("")
	return v, rest, err
}

// ErrorDataShape is the shape of the data of a JSON-RPC error answer to a request with these
// headers and raw query: DataObject when the caller names no A2A version at all (neither the
// A2A-Version header nor the parameter) — a client of A2A 0.3, which predates the header;
// DataList when it names one, any one (1.0 clients, and those that name 0.3 — a2a-go v2's 0.3
// layer does, and reads a list). Both doors read it from the request as sent, before anything
// else, so a refusal made before the body is read is shaped alike.
func ErrorDataShape(h Header, query string) DataShape {
	if len(h.Values(VersionHeader)) > 0 {
		return DataList
	}
	if params, _ := versionParams(query); len(params) > 0 {
		return DataList
	}
	return DataObject
}

// versionParams takes the A2A-Version parameters out of a raw query: their values (unescaped),
// and the query's other parameters as they were sent. A parameter whose name does not unescape
// stays in the query, for the binding's own reader to refuse.
func versionParams(query string) (values []string, rest string) {
	if query == "" {
		return nil, ""
	}
	kept := make([]string, 0, 4)
	for piece := range strings.SplitSeq(query, "&") {
		name, value, _ := strings.Cut(piece, "=")
		if n, err := url.QueryUnescape(name); err == nil && strings.EqualFold(n, VersionParam) {
			if v, err := url.QueryUnescape(value); err == nil {
				values = append(values, v)
			} else {
				values = append(values, value) // not a version ParseVersion knows: refused there
			}
			continue
		}
		kept = append(kept, piece)
	}
	return values, strings.Join(kept, "&")
}

// single returns the one value of a header that must not repeat; repeated reports it given on
// two lines, or as a comma-joined list (a proxy's join of two lines). Both doors read it so.
func single(h Header, name string) (value string, repeated bool) {
	vs := h.Values(name)
	switch {
	case len(vs) == 0:
		return "", false
	case len(vs) > 1 || strings.Contains(vs[0], ","):
		return "", true
	}
	return vs[0], false
}

// ContentType returns the Content-Type; given more than once it is InvalidRequest.
func ContentType(h Header) (string, *Error) {
	ct, repeated := single(h, headerContentType)
	if repeated {
		return "", Errorf(InvalidRequest, "the %s header must be given once", headerContentType)
	}
	return ct, nil
}

// Credentials returns the Authorization header: "" when absent; given more than once it is
// Unauthenticated, never read one way here and another way elsewhere.
func Credentials(h Header) (string, *Error) {
	authz, repeated := single(h, "Authorization")
	if repeated {
		return "", Errorf(Unauthenticated, "the Authorization header is given more than once")
	}
	return authz, nil
}

// ExtensionsHeaderV03 is A2A 0.3's name of the extensions header.
const ExtensionsHeaderV03 = "X-A2A-Extensions"

// RequestedExtensions lists the extension header values of a request: A2A-Extensions, and for a
// 0.3 request also X-A2A-Extensions (0.3 clients, a2a-go's among them, send that name).
func RequestedExtensions(v Version, h Header) []string {
	out := h.Values(ExtensionsHeader)
	if v == V03 {
		out = append(append([]string(nil), out...), h.Values(ExtensionsHeaderV03)...)
	}
	return out
}

// BindingOf is the binding a request path selects under base: JSON-RPC at base itself,
// HTTP+JSON anywhere else. It names the shape of an answer given before the request is parsed.
func BindingOf(path, base string) Binding {
	if rel, ok := strings.CutPrefix(path, base); ok && (rel == "" || rel == "/") {
		return JSONRPC
	}
	return HTTPJSON
}

// AgentCardPath is the well-known path of the public agent card.
const AgentCardPath = "/.well-known/agent-card.json"

// AgentCardPathV03 is where A2A 0.3 clients look for the public card (the 0.3 shape is served
// there). Like AgentCardPath it is public: read with GET or HEAD and no credential.
const AgentCardPathV03 = "/.well-known/agent.json"
