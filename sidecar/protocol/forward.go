package protocol

import (
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/go-json-experiment/json/jsontext"
)

// ForwardParams is what a handler is sent for r: the JSON-RPC params of r's operation in r's
// version, as admission read them. An A2A 1.0 request (any binding) is its request message
// re-encoded as ProtoJSON from the proto message the parser checked (canonical.go, and for
// gRPC the message as sent): lowerCamelCase names, no member the proto does not define, the
// values the HTTP+JSON path bound written in. A 0.3 request is the params as sent (JSON-RPC)
// or the body with the path's values written in under the JSON-RPC names (HTTP+JSON; for the
// 0.3 push config route the body, a PushNotificationConfig, wrapped as 0.3's
// TaskPushNotificationConfig), every member of which the parser read against the 0.3 schema.
func (r *Request) ForwardParams() (jsontext.Value, *Error) {
	if r.canon != nil {
		return r.canonicalParams()
	}
	return r.forwardParams()
}

// forwardParams builds the JSON-RPC params of r from what the caller sent. Fields already in
// the body agreed with the path when r was parsed and are not written twice.
func (r *Request) forwardParams() (jsontext.Value, *Error) {
	switch r.Binding {
	case JSONRPC:
		if r.Params == nil {
			return jsontext.Value("{}"), nil
		}
		return r.Params, nil
	case HTTPJSON:
	case GRPC:
		return r.grpcForwardParams()
	default:
		return nil, nil
	}
	ps := newParser()
	defer ps.release()
	var body object
	var err *Error
	if r.Params != nil {
		if body, err = ps.readObject(r.Params); err != nil {
			return nil, err
		}
	}
	var add []kv
	put := func(name, value string) {
		if name != "" && value != "" && body.get(name) == nil {
			add = append(add, kv{name, value})
		}
	}
	pv := r.path
	if r.Version == V1 {
		put("tenant", pv.tenant)
		task, config := r.Operation.PathFields()
		put(task, pv.task)
		put(config, pv.config)
		return withMembers(r.Params, add), nil
	}
	if name := params03(r.Operation); name != "" && body != nil && hasSnake(body) {
		// a2a-go's 0.3 REST client snake_cases every name; the handler's 0.3 JSON-RPC reader
		// knows the schema's camelCase ones.
		if r.Operation == CreateTaskPushNotificationConfig && body.get("pushNotificationConfig") == nil {
			name = "PushNotificationConfig"
		}
		renamed := jsontext.Value(ps.rename03(body, name))
		if body, err = ps.readObject(renamed); err != nil {
			return nil, err
		}
		r2 := *r
		r2.Params = renamed
		r = &r2
	}
	switch r.Operation {
	case GetTask, CancelTask, SubscribeToTask:
		put("id", pv.task)
		if body.get("name") != nil {
			// The 0.3 proto's name ("tasks/{id}") agreed with the path when r was parsed; 0.3's
			// JSON-RPC params have no such field.
			return withMembers(jsontext.Value(withoutMember(body, "name")), add), nil
		}
	case ListTaskPushNotificationConfigs:
		put("id", pv.task)
	case GetTaskPushNotificationConfig, DeleteTaskPushNotificationConfig:
		put("id", pv.task)
		put("pushNotificationConfigId", pv.config)
	case CreateTaskPushNotificationConfig:
		if body.get("pushNotificationConfig") != nil { // already 0.3's JSON-RPC shape
			put("taskId", pv.task)
			// The 0.3 ProtoJSON form's name repeats the task and config id (they agreed when
			// r was parsed); 0.3's JSON-RPC TaskPushNotificationConfig has no such field.
			return withMembers(jsontext.Value(withoutMember(body, "name")), add), nil
		}
		// The body is the PushNotificationConfig; a taskId in it agreed with the path and is
		// not part of that object, so it is dropped.
		cfg := withoutMember(body, "taskId")
		out := appendQuote([]byte(`{"taskId":`), pv.task)
		out = append(append(out, `,"pushNotificationConfig":`...), cfg...)
		return append(out, '}'), nil
	}
	return withMembers(r.Params, add), nil
}

type kv struct{ name, value string }

// withMembers appends string members to a JSON object (nil: an empty one).
func withMembers(obj jsontext.Value, add []kv) jsontext.Value {
	if obj == nil {
		obj = jsontext.Value("{}")
	}
	if len(add) == 0 {
		return obj
	}
	b := trimSpace(obj)
	out := make([]byte, 0, len(b)+64)
	out = append(out, b[:len(b)-1]...) // without the closing brace
	empty := len(trimSpace(b[1:len(b)-1])) == 0
	for _, m := range add {
		if !empty {
			out = append(out, ',')
		}
		empty = false
		out = appendQuote(out, m.name)
		out = append(out, ':')
		out = appendQuote(out, m.value)
	}
	return append(out, '}')
}

// withoutMember re-encodes obj without the member named name (in any spelling).
func withoutMember(obj object, name string) []byte {
	out := []byte{'{'}
	for _, m := range obj {
		if sameField(m.name, name) {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = appendQuote(out, string(m.name))
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}')
}

// hasSnake reports whether a member name of obj, or of an object it holds at the top, is
// snake_cased.
func hasSnake(obj object) bool {
	for _, m := range obj {
		if strings.Contains(string(m.name), "_") {
			return true
		}
		if m.value.Kind() == '{' && strings.Contains(string(m.value), "_") {
			return true
		}
	}
	return false
}

// grpcForwardParams is the A2A 1.0 JSON-RPC params of a gRPC request: the request message as
// ProtoJSON (lowerCamelCase names), the JSON form the 1.0 JSON-RPC binding uses for the same
// message. It is read from the message bytes the parser read, so a handler is sent exactly
// what admission saw.
func (r *Request) grpcForwardParams() (jsontext.Value, *Error) {
	if r.Version != V1 {
		return nil, Errorf(VersionNotSupported, "A2A 0.3 gRPC requests are not served; use %s", GRPCService)
	}
	m := RequestMessage(r.Operation)
	if m == nil {
		return nil, Errorf(UnsupportedOperation, "%s is not supported over gRPC", r.Operation)
	}
	if err := proto.Unmarshal(r.Proto, m); err != nil {
		return nil, Wrap(InvalidRequest, err, "the gRPC request message could not be decoded")
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, Wrap(Internal, err, "the gRPC request could not be forwarded")
	}
	return jsontext.Value(b), nil
}
