package jsonrpcwire

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonmodel"
)

// ParseJSONRPC parses one JSON-RPC 2.0 request of A2A version v. The body is checked whole
// before any field is read (see [protocol.Limits]); errors carry the request id once it has been read.
func ParseJSONRPC(v protocol.Version, contentType string, body []byte, lim protocol.Limits) (*protocol.Request, *protocol.Error) {
	r, err := ParseJSONRPCWith(v, contentType, body, lim, nil)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ParseJSONRPCWith is ParseJSONRPC knowing the methods extensions add. A request whose method was
// read but whose params are refused comes back with the error and a Request holding its id and
// operation (nothing else), so that a refusal of a streaming method is written as a stream like
// every other refusal of it ([Refusal]); before the method is read, the Request is nil.
func ParseJSONRPCWith(v protocol.Version, contentType string, body []byte, lim protocol.Limits, methods protocol.Methods) (*protocol.Request, *protocol.Error) {
	lim = lim.WithDefaults()
	if err := jsonmodel.CheckSize(body, lim); err != nil {
		return nil, err
	}
	if err := jsonmodel.CheckContentType(contentType); err != nil {
		return nil, err
	}
	p := jsonmodel.NewReader()
	defer p.Release()
	if err := p.CheckBody(body, lim.MaxDepth); err != nil {
		return nil, err
	}
	raw := jsontext.Value(jsonmodel.TrimSpace(body))
	switch raw.Kind() {
	case '[':
		return nil, protocol.Errorf(protocol.InvalidRequest, "batch requests are not supported")
	case '{':
	default:
		return nil, protocol.Errorf(protocol.InvalidRequest, "request must be a JSON object")
	}
	env, err := p.Object(raw)
	if err != nil {
		return nil, err
	}

	r := &protocol.Request{Binding: protocol.JSONRPC, Version: v}
	// The id is read first so that every later error can echo it.
	idRaw, hasID := env.Lookup("id")
	if hasID {
		if !ValidID(idRaw) {
			return nil, protocol.Errorf(protocol.InvalidRequest, "id must be a string, number or null")
		}
		r.ID = idRaw
	}
	if rpc := env.Get("jsonrpc"); rpc == nil || !jsonmodel.IsString(rpc, "2.0") {
		return nil, protocol.Errorf(protocol.InvalidRequest, `jsonrpc must be "2.0"`).WithID(r.ID)
	}
	if !hasID {
		return nil, protocol.Errorf(protocol.InvalidRequest, "id is required; A2A methods are not notifications")
	}
	mRaw := env.Get("method")
	if mRaw == nil {
		return nil, protocol.Errorf(protocol.InvalidRequest, "method is required").WithID(r.ID)
	}
	method, ok := methodName(mRaw)
	if !ok {
		return nil, protocol.Errorf(protocol.InvalidRequest, "method must be a string").WithID(r.ID)
	}
	r.Method = method
	if r.Operation, err = protocol.JSONRPCOperation(v, method); err != nil {
		x, ok := methods[method]
		if !ok {
			return nil, err.WithID(r.ID)
		}
		r.Operation, r.Extension = protocol.ExtensionMethod, &x
	}
	r.Params = env.Get("params")
	if err := p.Params(v, r.Operation, r.Params, r, false); err != nil {
		return &protocol.Request{Binding: protocol.JSONRPC, Version: v, ID: r.ID, Operation: r.Operation}, err.WithID(r.ID)
	}
	if err := p.Canonicalize(r); err != nil {
		return nil, err.WithID(r.ID)
	}
	return r, nil
}
