package jsonwire

import (
	"mime"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
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
// every other refusal of it ([protocol.Refuse]); before the method is read, the Request is nil.
func ParseJSONRPCWith(v protocol.Version, contentType string, body []byte, lim protocol.Limits, methods protocol.Methods) (*protocol.Request, *protocol.Error) {
	lim = lim.WithDefaults()
	if err := checkSize(body, lim); err != nil {
		return nil, err
	}
	if err := checkContentType(contentType); err != nil {
		return nil, err
	}
	p := newParser()
	defer p.release()
	if err := p.checkJSON(body, lim.MaxDepth); err != nil {
		return nil, err
	}
	raw := jsontext.Value(trimSpace(body))
	switch raw.Kind() {
	case '[':
		return nil, protocol.Errorf(protocol.InvalidRequest, "batch requests are not supported")
	case '{':
	default:
		return nil, protocol.Errorf(protocol.InvalidRequest, "request must be a JSON object")
	}
	env, err := p.readObject(raw)
	if err != nil {
		return nil, err
	}

	r := &protocol.Request{Binding: protocol.JSONRPC, Version: v}
	// The id is read first so that every later error can echo it.
	idRaw, hasID := env.lookup("id")
	if hasID {
		if !protocol.ValidID(idRaw) {
			return nil, protocol.Errorf(protocol.InvalidRequest, "id must be a string, number or null")
		}
		r.ID = idRaw
	}
	if rpc := env.get("jsonrpc"); rpc == nil || !isString(rpc, "2.0") {
		return nil, protocol.Errorf(protocol.InvalidRequest, `jsonrpc must be "2.0"`).WithID(r.ID)
	}
	if !hasID {
		return nil, protocol.Errorf(protocol.InvalidRequest, "id is required; A2A methods are not notifications")
	}
	mRaw := env.get("method")
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
	r.Params = env.get("params")
	if err := p.readParams(v, r.Operation, r.Params, r, false); err != nil {
		return &protocol.Request{Binding: protocol.JSONRPC, Version: v, ID: r.ID, Operation: r.Operation}, err.WithID(r.ID)
	}
	if err := canonicalize(r, p); err != nil {
		return nil, err.WithID(r.ID)
	}
	return r, nil
}

func checkSize(body []byte, lim protocol.Limits) *protocol.Error {
	if int64(len(body)) > lim.MaxBodyBytes {
		return protocol.Errorf(protocol.PayloadTooLarge, "request body is larger than the limit of %d bytes", lim.MaxBodyBytes)
	}
	return nil
}

// checkContentType accepts application/json and application/a2a+json, with parameters; a
// charset, when given, must be utf-8.
func checkContentType(ct string) *protocol.Error {
	if ct == "application/json" || ct == "application/a2a+json" {
		return nil // what mime.ParseMediaType would accept below, without its allocations
	}
	if ct == "" {
		return protocol.Errorf(protocol.ContentTypeNotSupported, "Content-Type is not supported; use application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && mt != "application/a2a+json") {
		return protocol.Errorf(protocol.ContentTypeNotSupported, "Content-Type is not supported; use application/json")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return protocol.Errorf(protocol.ContentTypeNotSupported, "Content-Type charset is not supported; use utf-8")
	}
	return nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
