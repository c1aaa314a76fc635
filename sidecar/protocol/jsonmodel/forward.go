package jsonmodel

import (
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/capgate/capgate/sidecar/protocol"
)

// forwardParams builds the JSON-RPC params of r from what the caller sent. Fields already in
// the body agreed with the path when r was parsed and are not written twice.
func forwardParams(r *protocol.Request, pv pathValues) (jsontext.Value, *protocol.Error) {
	switch r.Binding {
	case protocol.JSONRPC:
		if r.Params == nil {
			return jsontext.Value("{}"), nil
		}
		return r.Params, nil
	case protocol.HTTPJSON:
	default:
		return nil, nil
	}
	ps := newParser()
	defer ps.release()
	var body object
	var err *protocol.Error
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
	if r.Version == protocol.V1 {
		put("tenant", pv.tenant)
		task, config := r.Operation.PathFields()
		put(task, pv.task)
		put(config, pv.config)
		return withMembers(r.Params, add), nil
	}
	if name := params03(r.Operation); name != "" && body != nil && hasSnake(body) {
		// a2a-go's 0.3 REST client snake_cases every name; the handler's 0.3 JSON-RPC reader
		// knows the schema's camelCase ones.
		if r.Operation == protocol.CreateTaskPushNotificationConfig && body.get("pushNotificationConfig") == nil {
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
	case protocol.GetTask, protocol.CancelTask, protocol.SubscribeToTask:
		put("id", pv.task)
		if body.get("name") != nil {
			// The 0.3 proto's name ("tasks/{id}") agreed with the path when r was parsed; 0.3's
			// JSON-RPC params have no such field.
			return withMembers(jsontext.Value(withoutMember(body, "name")), add), nil
		}
	case protocol.ListTaskPushNotificationConfigs:
		put("id", pv.task)
	case protocol.GetTaskPushNotificationConfig, protocol.DeleteTaskPushNotificationConfig:
		put("id", pv.task)
		put("pushNotificationConfigId", pv.config)
	case protocol.CreateTaskPushNotificationConfig:
		if body.get("pushNotificationConfig") != nil { // already 0.3's JSON-RPC shape
			put("taskId", pv.task)
			// The 0.3 ProtoJSON form's name repeats the task and config id (they agreed when
			// r was parsed); 0.3's JSON-RPC TaskPushNotificationConfig has no such field.
			return withMembers(jsontext.Value(withoutMember(body, "name")), add), nil
		}
		// The body is the PushNotificationConfig; a taskId in it agreed with the path and is
		// not part of that object, so it is dropped.
		cfg := withoutMember(body, "taskId")
		out := AppendQuote([]byte(`{"taskId":`), pv.task)
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
		out = AppendQuote(out, m.name)
		out = append(out, ':')
		out = AppendQuote(out, m.value)
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
		out = AppendQuote(out, string(m.name))
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

// forwarder is the JSON bindings' protocol.Forwarder: what their reader learnt of a request
// that its params alone do not say.
type forwarder struct {
	// path holds what an HTTP+JSON path bound.
	path pathValues
	// canon is, for an A2A 1.0 JSON-RPC or HTTP+JSON request whose params are its proto
	// request message, that message's descriptor (nil for any other request): ForwardParams
	// re-encodes the params from it (canonical.go).
	canon protoreflect.MessageDescriptor
}

// pathValues are the identifiers an HTTP+JSON route binds.
type pathValues struct{ tenant, task, config string }

// pathForwarder is the forwarder of a request whose path bound pv: a path that bound nothing
// (most requests) shares one, held as protocol.Forwarder so that setting it allocates nothing.
func pathForwarder(pv pathValues) protocol.Forwarder {
	if pv == (pathValues{}) {
		return unboundForwarder
	}
	return forwarder{path: pv}
}

var unboundForwarder protocol.Forwarder = forwarder{}

// canonicalOp is what the parser needs of an operation whose A2A 1.0 JSON params are its proto
// request message: that message's descriptor, and the forwarder of a request of it no path
// bound anything for, held as protocol.Forwarder so that setting it allocates nothing.
type canonicalOp struct {
	desc protoreflect.MessageDescriptor
	fwd  protocol.Forwarder
}

// canonicalOps are the operations with a request message, built once: a message made for its
// descriptor per request would be an allocation each.
var canonicalOps = func() map[protocol.Operation]canonicalOp {
	out := map[protocol.Operation]canonicalOp{}
	for _, op := range protocol.Operations() {
		if m := protocol.RequestMessage(op); m != nil {
			d := m.ProtoReflect().Descriptor()
			out[op] = canonicalOp{desc: d, fwd: forwarder{canon: d}}
		}
	}
	return out
}()

// ForwardParams is what a handler is sent for r (protocol.Request.ForwardParams). An A2A 1.0
// request is its request message re-encoded as ProtoJSON from the proto message the parser
// checked (canonical.go): lowerCamelCase names, no member the proto does not define, the
// values the HTTP+JSON path bound written in. A 0.3 request is the params as sent (JSON-RPC)
// or the body with the path's values written in under the JSON-RPC names (HTTP+JSON; for the
// 0.3 push config route the body, a PushNotificationConfig, wrapped as 0.3's
// TaskPushNotificationConfig), every member of which the parser read against the 0.3 schema.
func (f forwarder) ForwardParams(r *protocol.Request) (jsontext.Value, *protocol.Error) {
	if f.canon != nil {
		return canonicalParams(r, f)
	}
	return forwardParams(r, f.path)
}

// markCanonical records that r's params are its proto request message (c).
func markCanonical(r *protocol.Request, c canonicalOp) {
	f, _ := r.Forward.(forwarder)
	if f.path == (pathValues{}) {
		r.Forward = c.fwd
		return
	}
	f.canon = c.desc
	r.Forward = f
}
