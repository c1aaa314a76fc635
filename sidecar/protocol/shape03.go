package protocol

import (
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
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

// params03 is the schema object of a 0.3 operation's params; "" for one the schema has none for.
func params03(op Operation) string {
	switch op {
	case SendMessage, SendStreamingMessage:
		return "MessageSendParams"
	case GetTask:
		return "TaskQueryParams"
	case CancelTask, SubscribeToTask:
		return "TaskIdParams"
	case CreateTaskPushNotificationConfig:
		return "TaskPushNotificationConfig"
	case GetTaskPushNotificationConfig:
		return "GetTaskPushNotificationConfigParams"
	case ListTaskPushNotificationConfigs:
		return "ListTaskPushNotificationConfigParams"
	case DeleteTaskPushNotificationConfig:
		return "DeleteTaskPushNotificationConfigParams"
	}
	return ""
}

// check03 refuses a member of a 0.3 request's params that the schema does not define. A 0.3
// HTTP+JSON body may also carry what the parser reads there beside the JSON-RPC shape: the
// proto's name ("tasks/{id}", "tasks/{id}/pushNotificationConfigs/{c}"), and on the push config
// route a bare PushNotificationConfig with the task's id.
func (ps *parser) check03(op Operation, p object, restBody bool, where string) *Error {
	name := params03(op)
	if name == "" {
		return nil
	}
	var extra []string
	if restBody {
		switch op {
		case GetTask, CancelTask, SubscribeToTask:
			extra = []string{"name"}
		case CreateTaskPushNotificationConfig:
			if p.get("pushNotificationConfig") == nil {
				name, extra = "PushNotificationConfig", []string{"taskId"}
			} else {
				extra = []string{"name"}
			}
		}
	}
	return ps.members03(p, name, extra, where)
}

// members03 checks the members of o, an object of the 0.3 schema named name, and of the objects
// they hold.
func (ps *parser) members03(o object, name string, extra []string, where string) *Error {
	known := objects03[name]
	for _, m := range o {
		member := string(m.name)
		if !slices.Contains(known, member) && !slices.Contains(extra, member) {
			if member == "tenant" {
				return Errorf(InvalidParams, "%stenant is not an A2A 0.3 field: a 0.3 request names no tenant (A2A 1.0 has tenants)", where)
			}
			return Errorf(InvalidParams, "%s%s is not a field of the A2A 0.3 %s object", where, clip(member), name)
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
				if err := ps.object03(v, "Part", at+"["+strconv.Itoa(i)+"]."); err != nil {
					return err
				}
			}
			continue
		}
		if err := ps.object03(m.value, inner, at+"."); err != nil {
			return err
		}
	}
	return nil
}

// object03 checks v when it is an object (the parser refuses other kinds in its own words),
// choosing a part's schema object by its kind and a file's by its members.
func (ps *parser) object03(v jsontext.Value, name, where string) *Error {
	if v.Kind() != '{' {
		return nil
	}
	o, err := ps.readObject(v)
	if err != nil {
		return err
	}
	switch name {
	case "Part":
		switch {
		case isString(o.get("kind"), "file"):
			name = "FilePart"
		case isString(o.get("kind"), "data"):
			name = "DataPart"
		case isString(o.get("kind"), "text"):
			name = "TextPart"
		default:
			return nil // the parser refuses a part without a kind it knows, in its own words
		}
	case "File":
		name = "FileWithBytes"
		if o.get("uri") != nil && o.get("bytes") == nil {
			name = "FileWithUri"
		}
		if o.get("uri") != nil && o.get("bytes") != nil {
			return nil // the parser refuses a file with both
		}
	}
	return ps.members03(o, name, nil, where)
}
