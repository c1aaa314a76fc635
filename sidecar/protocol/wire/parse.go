// Package wire reads an A2A request as a door received it (protocol.Envelope) in whichever
// binding and version it came: the public card route, JSON-RPC, HTTP+JSON and gRPC. It picks
// the binding by path and content type and hands the request to that binding's reader, so the
// gateway and the ext_authz server read every request the same way; and it writes a refusal in
// the binding it came in (Refuse), so both doors refuse alike. Each binding's reading and
// writing is its own package's: jsonrpcwire, httpjsonwire, grpcwire.
package wire

import (
	"net/http"
	"strings"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

// Parse reads one A2A request of any binding and version: the public card route, the JSON-RPC
// endpoint at base (the path of the agent's URL, "" at the root), the HTTP+JSON routes under
// it, and gRPC. It refuses a header that decides how the request is read (A2A-Version,
// Content-Type) when given more than once, as a proxy joining repeated lines would show it:
// readers disagree about which copy wins.
func Parse(env protocol.Envelope, base string, lim protocol.Limits) (*protocol.Request, *protocol.Error) {
	path, method := env.Path, env.Method
	if (path == protocol.AgentCardPath || path == protocol.AgentCardPathV03) && (method == http.MethodGet || method == http.MethodHead) {
		v := protocol.V1
		if path == protocol.AgentCardPathV03 {
			v = protocol.V03
		}
		return &protocol.Request{Binding: protocol.HTTPJSON, Version: v, Operation: protocol.GetAgentCard, Method: method + " " + path}, nil
	}
	ct, cerr := protocol.ContentType(env.Header)
	if env.GRPC && grpcwire.IsContentType(ct) {
		if cerr != nil {
			return &protocol.Request{Binding: protocol.GRPC}, cerr
		}
		return grpcwire.Parse(method, path, ct, env.Header, env.Body, lim)
	}
	rel, ok := strings.CutPrefix(path, base)
	if !ok || (rel != "" && rel[0] != '/') {
		return nil, protocol.Errorf(protocol.NotFound, "no A2A route at %s", protocol.Clip(path))
	}
	jsonrpc := rel == "" || rel == "/"
	if jsonrpc && method != http.MethodPost {
		// Refused at the HTTP level, as 405 with Allow: not a JSON-RPC call.
		return &protocol.Request{Binding: protocol.HTTPJSON}, protocol.Errorf(protocol.MethodNotAllowed, "the JSON-RPC endpoint accepts POST only").WithMetadata("allow", http.MethodPost)
	}
	version, query, verr := protocol.RequestVersion(env.Header, env.Query)
	if jsonrpc {
		parseAs := version
		if verr != nil {
			parseAs = protocol.V1 // only to find the id to echo
		}
		shape := protocol.ErrorDataShape(env.Header, env.Query)
		r, perr := jsonrpcwire.ParseJSONRPCWith(parseAs, ct, env.Body, lim, env.Methods)
		switch {
		case verr != nil:
			return echo(shape, r, perr, verr)
		case cerr != nil:
			return echo(shape, r, perr, cerr)
		case perr != nil:
			return echo(shape, r, perr, perr)
		}
		r.ErrorData = shape
		return r, nil
	}
	if verr != nil {
		return &protocol.Request{Binding: protocol.HTTPJSON}, verr
	}
	if cerr != nil {
		return &protocol.Request{Binding: protocol.HTTPJSON, Version: version}, cerr
	}
	target := rel
	if query != "" {
		target += "?" + query
	}
	r, perr := httpjsonwire.ParseHTTP(version, method, target, ct, env.Body, lim)
	if perr != nil {
		return &protocol.Request{Binding: protocol.HTTPJSON, Version: version}, perr
	}
	return r, nil
}

// echo returns err for a JSON-RPC request, with the request id the parse found (from r, or from
// the parse's own error) so the answer can echo it, in the error data shape the caller reads.
func echo(shape protocol.DataShape, r *protocol.Request, perr, err *protocol.Error) (*protocol.Request, *protocol.Error) {
	out := &protocol.Request{Binding: protocol.JSONRPC, ErrorData: shape}
	switch {
	case r != nil:
		out.ID, out.Version, out.Operation = r.ID, r.Version, r.Operation
	case perr != nil:
		out.ID = perr.ID
	}
	return out, err.WithID(out.ID)
}
