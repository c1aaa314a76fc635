package protocol

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
