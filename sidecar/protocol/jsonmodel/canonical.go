package jsonmodel

import (
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/capgate/capgate/sidecar/protocol"
)

// canonicalize checks that an A2A 1.0 JSON-RPC or HTTP+JSON request is its operation's request
// message as the A2A 1.0 proto defines it (a2a-go v2's generated types): every member of the
// params (or body) must be a field of that message (its JSON or proto name, exactly), or of the
// message a field holds, down to the free-form Struct values (metadata, data parts), with a
// value of the field's kind (an enum's names; base64 for bytes). Anything else is refused as
// InvalidParams, never dropped, so a door that cannot rewrite the body (ext_authz) forwards
// nothing capgate did not read either; the values the HTTP+JSON path binds are fields by
// construction. ForwardParams then re-encodes the request from that message (canonicalParams),
// so a handler on any binding receives the request as admission read it, not the caller's
// bytes. 0.3 requests have no proto for their JSON form; their members are checked against the
// 0.3 schema (shape03.go). gRPC requests are proto messages already; extension methods carry
// the extension's own params. ps is the parser that read r.
func canonicalize(r *protocol.Request, ps *parser) *protocol.Error {
	if r.Version != protocol.V1 || (r.Binding != protocol.JSONRPC && r.Binding != protocol.HTTPJSON) || r.Operation == protocol.ExtensionMethod ||
		r.Operation == protocol.ListTasks { // capgate answers ListTasks itself (and reads 0.3 task states there)
		return nil
	}
	c, ok := canonicalOps[r.Operation]
	if !ok {
		return nil
	}
	if r.Params != nil {
		if err := ps.knownFields(r.Params, c.desc); err != nil {
			if r.Binding == protocol.JSONRPC {
				return prefix("params.", err)
			}
			return err
		}
	}
	markCanonical(r, c)
	return nil
}

// canonicalParams is r's request message, read by protojson from the params forwardParams
// builds and written again as ProtoJSON: lowerCamelCase names, one spelling per value.
func canonicalParams(r *protocol.Request, f forwarder) (jsontext.Value, *protocol.Error) {
	params, perr := forwardParams(r, f.path)
	if perr != nil {
		return nil, perr
	}
	ps := newParser()
	b, ok := ps.appendCanonical(make([]byte, 0, len(params)+len(params)/8), params, f.canon)
	ps.release()
	if ok {
		return jsontext.Value(b), nil
	}
	return protojsonCanonical(params, protocol.RequestMessage(r.Operation), r.Binding)
}

// protojsonCanonical is canonicalParams' definition: params read into m by protojson and
// written again. appendCanonical gives the same answer faster where it can.
func protojsonCanonical(params jsontext.Value, m proto.Message, binding protocol.Binding) (jsontext.Value, *protocol.Error) {
	if err := protojson.Unmarshal(params, m); err != nil {
		what := "params"
		if binding != protocol.JSONRPC {
			what = "request"
		}
		return nil, protocol.Wrap(protocol.InvalidParams, err, "the "+what+" is not a valid A2A 1.0 "+string(m.ProtoReflect().Descriptor().Name()))
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the request could not be forwarded")
	}
	return jsontext.Value(b), nil
}

// knownFields refuses a member of the object raw that is not a field of md, or whose value is
// not of the field's kind, at any depth where the proto defines the object's fields. An error
// names the member from raw down; each caller prefixes its own step, so a request that passes
// builds no names.
func (ps *parser) knownFields(raw jsontext.Value, md protoreflect.MessageDescriptor) *protocol.Error {
	if raw.Kind() != '{' || isWellKnown(md) {
		return nil // Struct, Value, Timestamp are free-form; a wrong kind is refused by the caller
	}
	obj, err := ps.readObject(raw)
	if err != nil {
		return err
	}
	fields := fieldsOf(md)
	for _, m := range obj {
		fd := fields[string(m.name)]
		if fd == nil {
			return protocol.Errorf(protocol.InvalidParams, "%s is not a field of the A2A 1.0 %s message", protocol.Clip(string(m.name)), md.Name())
		}
		if m.value.Kind() == 'n' {
			continue // protojson reads null as the field's absence
		}
		if want := wrongKind(fd, m.value); want != "" {
			return protocol.Errorf(protocol.InvalidParams, "%s must be %s", fd.JSONName(), want)
		}
		if fd.Message() == nil {
			continue
		}
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				continue
			}
			entries, err := ps.readObject(m.value)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if err := ps.knownFields(e.value, fd.MapValue().Message()); err != nil {
					return prefix(fd.JSONName()+"."+protocol.Clip(string(e.name))+".", err)
				}
			}
		case fd.IsList():
			elems, _ := ps.readArray(m.value)
			for i, e := range elems {
				if e.Kind() != '{' {
					return protocol.Errorf(protocol.InvalidParams, "%s[%d] must be an object", fd.JSONName(), i)
				}
				if err := ps.knownFields(e, fd.Message()); err != nil {
					return prefix(fd.JSONName()+"["+strconv.Itoa(i)+"].", err)
				}
			}
		default:
			if err := ps.knownFields(m.value, fd.Message()); err != nil {
				return prefix(fd.JSONName()+".", err)
			}
		}
	}
	return nil
}

// protoFields maps each request message's member names protojson accepts (a field's JSON name
// and its proto name) to the field; built once per message type.
var protoFields sync.Map // protoreflect.FullName → map[string]protoreflect.FieldDescriptor

func fieldsOf(md protoreflect.MessageDescriptor) map[string]protoreflect.FieldDescriptor {
	if m, ok := protoFields.Load(md.FullName()); ok {
		return m.(map[string]protoreflect.FieldDescriptor)
	}
	fs := md.Fields()
	m := make(map[string]protoreflect.FieldDescriptor, 2*fs.Len())
	for i := range fs.Len() {
		fd := fs.Get(i)
		m[fd.JSONName()], m[string(fd.Name())] = fd, fd
	}
	protoFields.Store(md.FullName(), m)
	return m
}

// enumValues maps each enum's value names to the values; built once per enum type, so that a
// name read from a request is looked up without a string made of it.
var enumValues sync.Map // protoreflect.FullName → map[string]protoreflect.EnumValueDescriptor

// enumValue is the value of ed named name, or nil.
func enumValue(ed protoreflect.EnumDescriptor, name []byte) protoreflect.EnumValueDescriptor {
	m, ok := enumValues.Load(ed.FullName())
	if !ok {
		vs := ed.Values()
		byName := make(map[string]protoreflect.EnumValueDescriptor, vs.Len())
		for i := range vs.Len() {
			byName[string(vs.Get(i).Name())] = vs.Get(i)
		}
		m, _ = enumValues.LoadOrStore(ed.FullName(), byName)
	}
	return m.(map[string]protoreflect.EnumValueDescriptor)[string(name)]
}

// isWellKnown reports whether md is a google.protobuf type, whose JSON form is its own.
func isWellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}

// wrongKind says what kind of JSON value field fd needs when v is not of a kind protojson
// accepts for it ("" when it is): the wrong kind is refused in capgate's words, protojson's
// own text never reaches a client.
func wrongKind(fd protoreflect.FieldDescriptor, v jsontext.Value) string {
	k := v.Kind()
	switch {
	case fd.IsList():
		if k != '[' {
			return "an array"
		}
		return ""
	case fd.IsMap():
		if k != '{' {
			return "an object"
		}
		return ""
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		switch fd.Message().FullName() {
		case "google.protobuf.Value":
			return ""
		case "google.protobuf.Timestamp":
			if k != '"' {
				return "an RFC 3339 timestamp string"
			}
			return ""
		}
		if k != '{' {
			return "an object"
		}
	case protoreflect.StringKind:
		if k != '"' {
			return "a string"
		}
	case protoreflect.BytesKind:
		if k != '"' || !isBase64(unquote(v)) {
			return "base64 text"
		}
	case protoreflect.BoolKind:
		if k != 't' && k != 'f' {
			return "a boolean"
		}
	case protoreflect.EnumKind:
		if (k == '"' && enumValue(fd.Enum(), unquote(v)) != nil) || k == '0' {
			return ""
		}
		return "one of " + enumNames(fd.Enum())
	default: // numbers: protojson also reads them from strings
		if k != '0' && k != '"' {
			return "a number"
		}
	}
	return ""
}

// enumNames lists an enum's value names, for a message.
func enumNames(ed protoreflect.EnumDescriptor) string {
	vs := ed.Values()
	names := make([]string, 0, vs.Len())
	for i := range vs.Len() {
		names = append(names, string(vs.Get(i).Name()))
	}
	return strings.Join(names, ", ")
}

// isBase64 reports whether b is base64 text as protojson reads bytes: the standard or URL
// alphabet, padded or not.
func isBase64(b []byte) bool {
	n := len(b)
	for n > 0 && b[n-1] == '=' {
		n--
	}
	if len(b)-n > 2 || (len(b) != n && len(b)%4 != 0) || n%4 == 1 {
		return false
	}
	for _, c := range b[:n] {
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}
