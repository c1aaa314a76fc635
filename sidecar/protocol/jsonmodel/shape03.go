package jsonmodel

import (
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
)

// A2A 0.3's JSON form has no proto to re-encode from, so its requests are forwarded as sent
// (JSON-RPC) or with the path's values written in (HTTP+JSON), and capgate makes sure that
// what it forwards is what it read: every member of every object the 0.3 schema defines must be
// one of that object's properties, spelled exactly. Members the schema does not define (a
// tenant, which 0.3 does not have; a 1.0 name; a top-level taskId) are refused as
// InvalidParams, never dropped: a door that cannot rewrite the body (ext_authz) forwards it
// unchanged. Free-form values (metadata, a data part's data, credentials) are not walked.

// objects03 are the properties of the 0.3 schema's request objects (specification/json/a2a.json
// of A2A v0.3.0; the test checks them against it).
var objects03 = map[string][]string{
	"MessageSendParams":                      {"configuration", "message", "metadata"},
	"Message":                                {"contextId", "extensions", "kind", "messageId", "metadata", "parts", "referenceTaskIds", "role", "taskId"},
	"TextPart":                               {"kind", "metadata", "text"},
	"FilePart":                               {"file", "kind", "metadata"},
	"DataPart":                               {"data", "kind", "metadata"},
	"FileWithBytes":                          {"bytes", "mimeType", "name"},
	"FileWithUri":                            {"mimeType", "name", "uri"},
	"MessageSendConfiguration":               {"acceptedOutputModes", "blocking", "historyLength", "pushNotificationConfig"},
	"PushNotificationConfig":                 {"authentication", "id", "token", "url"},
	"PushNotificationAuthenticationInfo":     {"credentials", "schemes"},
	"TaskQueryParams":                        {"historyLength", "id", "metadata"},
	"TaskIdParams":                           {"id", "metadata"},
	"TaskPushNotificationConfig":             {"pushNotificationConfig", "taskId"},
	"GetTaskPushNotificationConfigParams":    {"id", "metadata", "pushNotificationConfigId"},
	"ListTaskPushNotificationConfigParams":   {"id", "metadata"},
	"DeleteTaskPushNotificationConfigParams": {"id", "metadata", "pushNotificationConfigId"},
}

// members03 are the objects a member's value holds ("Part" and "File" are the schema's anyOf,
// chosen by the part's kind and the file's members).
var members03 = map[[2]string]string{
	{"MessageSendParams", "message"}:                         "Message",
	{"MessageSendParams", "configuration"}:                   "MessageSendConfiguration",
	{"Message", "parts"}:                                     "Part",
	{"FilePart", "file"}:                                     "File",
	{"MessageSendConfiguration", "pushNotificationConfig"}:   "PushNotificationConfig",
	{"PushNotificationConfig", "authentication"}:             "PushNotificationAuthenticationInfo",
	{"TaskPushNotificationConfig", "pushNotificationConfig"}: "PushNotificationConfig",
}

// params03 is the schema object of a 0.3 operation's params (the operation table's Params03); ""
// for one the schema has none for.
func params03(op protocol.Operation) string { return op.Spec().Params03 }

// check03 refuses a member of a 0.3 request's params that the schema does not define. A 0.3
// HTTP+JSON body may also carry what the parser reads there beside the JSON-RPC shape: the
// proto's name ("tasks/{id}", "tasks/{id}/pushNotificationConfigs/{c}"), and on the push config
// route a bare PushNotificationConfig with the task's id.
func (ps *parser) check03(op protocol.Operation, p object, restBody bool, where string) *protocol.Error {
	name := params03(op)
	if name == "" {
		return nil
	}
	var extra []string
	if restBody {
		switch op {
		case protocol.GetTask, protocol.CancelTask, protocol.SubscribeToTask:
			extra = []string{"name"}
		case protocol.CreateTaskPushNotificationConfig:
			if p.get("pushNotificationConfig") == nil {
				name, extra = "PushNotificationConfig", []string{"taskId"}
			} else {
				extra = []string{"name"}
			}
		}
	}
	return ps.members03(p, name, extra, where, restBody)
}

// members03 checks the members of o, an object of the 0.3 schema named name, and of the objects
// they hold.
func (ps *parser) members03(o object, name string, extra []string, where string, snake bool) *protocol.Error {
	known := objects03[name]
	for _, m := range o {
		member := string(m.name)
		if snake {
			member = camel03(member) // a2a-go's 0.3 REST client writes every name snake_cased
		}
		if !slices.Contains(known, member) && !slices.Contains(extra, member) {
			if member == "tenant" {
				return protocol.Errorf(protocol.InvalidParams, "%stenant is not an A2A 0.3 field: a 0.3 request names no tenant (A2A 1.0 has tenants)", where)
			}
			return protocol.Errorf(protocol.InvalidParams, "%s%s is not a field of the A2A 0.3 %s object", where, protocol.Clip(member), name)
		}
		inner, ok := members03[[2]string{name, member}]
		if !ok || m.value.Kind() == 'n' {
			continue
		}
		at := where + member
		if inner == "Part" {
			parts, ok := ps.readArray(m.value)
			if !ok {
				continue // the parser says what a part list must be
			}
			for i, v := range parts {
				if err := ps.object03(v, "Part", at+"["+strconv.Itoa(i)+"].", snake); err != nil {
					return err
				}
			}
			continue
		}
		if err := ps.object03(m.value, inner, at+".", snake); err != nil {
			return err
		}
	}
	return nil
}

// object03 checks v when it is an object (the parser refuses other kinds in its own words),
// choosing a part's schema object by its kind and a file's by its members.
func (ps *parser) object03(v jsontext.Value, name, where string, snake bool) *protocol.Error {
	if v.Kind() != '{' {
		return nil
	}
	o, err := ps.readObject(v)
	if err != nil {
		return err
	}
	name, ok := schemaObject03(name, o)
	if !ok {
		return nil // the parser refuses a part without a kind it knows, or a file with both contents
	}
	return ps.members03(o, name, nil, where, snake)
}

// camel03 is the camelCase schema name of a snake_case member name (message_id → messageId);
// other names are returned as they are.
func camel03(name string) string {
	if !strings.Contains(name, "_") {
		return name
	}
	var b strings.Builder
	up := false
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '_':
			up = true
		case up && 'a' <= c && c <= 'z':
			b.WriteByte(c - ('a' - 'A'))
			up = false
		default:
			b.WriteByte(c)
			up = false
		}
	}
	return b.String()
}

// rename03 re-encodes obj, a 0.3 schema object named name read from a snake_cased HTTP+JSON
// body, with the schema's camelCase names, down through the objects it holds; free-form values
// are copied as they are. The 0.3 JSON-RPC params a handler is sent then carry the names its
// reader knows.
func (ps *parser) rename03(obj object, name string) []byte {
	out := []byte{'{'}
	for _, m := range obj {
		member := camel03(string(m.name))
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = AppendQuote(out, member)
		out = append(out, ':')
		inner, ok := members03[[2]string{name, member}]
		if !ok || (m.value.Kind() != '{' && m.value.Kind() != '[') {
			out = append(out, m.value...)
			continue
		}
		if inner == "Part" {
			elems, _ := ps.readArray(m.value)
			out = append(out, '[')
			for i, e := range elems {
				if i > 0 {
					out = append(out, ',')
				}
				out = ps.renameObject03(out, e, "Part")
			}
			out = append(out, ']')
			continue
		}
		out = ps.renameObject03(out, m.value, inner)
	}
	return append(out, '}')
}

// renameObject03 appends v renamed as schema object name (a part or file chosen as object03
// chooses), or as it is when it is not an object.
func (ps *parser) renameObject03(out []byte, v jsontext.Value, name string) []byte {
	if v.Kind() != '{' {
		return append(out, v...)
	}
	o, err := ps.readObject(v)
	if err != nil {
		return append(out, v...)
	}
	name, ok := schemaObject03(name, o)
	if !ok {
		return append(out, v...)
	}
	return append(out, ps.rename03(o, name)...)
}

// schemaObject03 is the schema object a 0.3 value of the anyOf name holds: a part by its kind, a
// file by its members; false when the value fits none (the parser refuses it in its own words).
func schemaObject03(name string, o object) (string, bool) {
	switch name {
	case "Part":
		switch {
		case isString(o.get("kind"), "file"):
			return "FilePart", true
		case isString(o.get("kind"), "data"):
			return "DataPart", true
		case isString(o.get("kind"), "text"):
			return "TextPart", true
		}
		return "", false
	case "File":
		switch bytes, uri := o.get("bytes") != nil, o.get("uri") != nil; {
		case bytes && uri:
			return "", false
		case uri:
			return "FileWithUri", true
		}
		return "FileWithBytes", true
	}
	return name, true
}
