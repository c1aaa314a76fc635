package jsonmodel

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
)

// Reader is one read of a request body of a JSON binding: the body checked whole
// (CheckBody), then its objects (Object) and its params (Params, Canonicalize) read against
// what CheckBody recorded. Readers are pooled: NewReader, then Release when the read is done;
// nothing a read returns refers to a reader's memory.
type Reader struct{ ps *parser }

// NewReader takes a reader from the pool.
func NewReader() Reader { return Reader{newParser()} }

// Release returns the reader to the pool; it must not be used after.
func (r Reader) Release() { r.ps.release() }

// CheckBody validates a whole body once, before anything reads it: well-formed JSON, valid
// UTF-8, no duplicate object key anywhere (exact match), nesting within maxDepth, nothing after
// the value. Error messages are capgate's own; the JSON library's text and offsets are never
// shown.
func (r Reader) CheckBody(body []byte, maxDepth int) *protocol.Error {
	return r.ps.checkJSON(body, maxDepth)
}

// Object splits raw, a JSON object of the body CheckBody accepted, into its members. An object
// where two spellings of one field appear (taskId, task_id, TaskID) is refused: every decoder
// downstream reads field names its own way, so none may see a value the reader did not.
func (r Reader) Object(raw jsontext.Value) (Object, *protocol.Error) {
	o, err := r.ps.readObject(raw)
	return Object{o}, err
}

// Params checks raw (the JSON-RPC params or the HTTP+JSON body; nil when absent) against op in
// version v and fills req: every task id, context, tenant and push config it names. Values req
// already holds (from an HTTP+JSON path) must agree with the body. restBody selects the 0.3
// HTTP+JSON body shapes.
func (r Reader) Params(v protocol.Version, op protocol.Operation, raw jsontext.Value, req *protocol.Request, restBody bool) *protocol.Error {
	return r.ps.readParams(v, op, raw, req, restBody)
}

// Canonicalize checks that an A2A 1.0 request's params are its operation's proto request
// message and, when they are, makes req forward them re-encoded from it (canonical.go).
func (r Reader) Canonicalize(req *protocol.Request) *protocol.Error {
	return canonicalize(req, r.ps)
}

// Object is a JSON object a Reader split into members. Fields are looked up by any spelling a
// decoder downstream accepts (SameField).
type Object struct{ members object }

// Get returns the value of field (a camelCase name), nil when absent or null.
func (o Object) Get(field string) jsontext.Value { return o.members.get(field) }

// Lookup returns a member's value (JSON null included) and whether it is present.
func (o Object) Lookup(field string) (jsontext.Value, bool) { return o.members.lookup(field) }

// String reads an optional string field; absent and null are "", any other kind InvalidParams.
func (o Object) String(field string) (string, *protocol.Error) { return optString(o.members, field) }

// Len is the number of members.
func (o Object) Len() int { return len(o.members) }

// Name is the name of member i, unescaped.
func (o Object) Name(i int) []byte { return o.members[i].name }

// NameIs reports whether member i names field, in any spelling SameField accepts.
func (o Object) NameIs(i int, field string) bool { return sameField(o.members[i].name, field) }

// Unquote returns the contents of v, a JSON string of a checked body: a slice of v unless v
// has escapes; nil for any other value.
func Unquote(v jsontext.Value) []byte { return unquote(v) }

// String decodes a JSON string value into a string of its own.
func String(v jsontext.Value) (string, bool) { return str(v) }

// IsString reports whether v is the JSON string s.
func IsString(v jsontext.Value, s string) bool { return isString(v, s) }

// FieldKey folds a field name so that every spelling a decoder may accept for it is equal
// (SameField(a, b) is FieldKey(a) == FieldKey(b)).
func FieldKey(name string) string { return fieldKey(name) }

// PathForwarder is the forwarder of an HTTP+JSON request whose path bound tenant, task and
// config (each "" when not bound): ForwardParams writes them into the params a handler is sent.
func PathForwarder(tenant, task, config string) protocol.Forwarder {
	return pathForwarder(pathValues{tenant: tenant, task: task, config: config})
}
