package protocol

import "github.com/go-json-experiment/json/jsontext"

// MethodName is the JSON-RPC method name of op in version v: the 1.0 name
// itself, or the 0.3 name ("message/send", ...); "" when v has no such method.
func MethodName(v Version, op Operation) string {
	if v == V03 {
		return v03Method(op)
	}
	if op == GetAgentCard {
		return ""
	}
	return string(op)
}

// knownMethods holds every JSON-RPC method name of either version, so that a request naming one
// shares the constant instead of allocating a copy.
var knownMethods = func() map[string]string {
	m := map[string]string{}
	for _, op := range []Operation{SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask,
		CreateTaskPushNotificationConfig, GetTaskPushNotificationConfig, ListTaskPushNotificationConfigs,
		DeleteTaskPushNotificationConfig, GetExtendedAgentCard} {
		for _, name := range []string{MethodName(V1, op), MethodName(V03, op)} {
			if name != "" {
				m[name] = name
			}
		}
	}
	return m
}()

// methodName decodes the JSON string of a method, as str does.
func methodName(v jsontext.Value) (string, bool) {
	if name, ok := knownMethods[string(unquote(v))]; ok {
		return name, true
	}
	return str(v)
}

// IsA2AMethod reports whether name is a JSON-RPC method of A2A 1.0 or 0.3.
func IsA2AMethod(name string) bool {
	_, ok := knownMethods[name]
	return ok
}
