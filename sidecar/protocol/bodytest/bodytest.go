// Package bodytest holds the request bodies the JSON bindings' tests share:
// a JSON-RPC envelope builder and the smallest valid SendMessage params of
// each version. It is imported by tests only.
package bodytest

// ContentType is the media type of a JSON request.
const ContentType = "application/json"

// RPC builds a JSON-RPC 2.0 request body; params "" leaves them out. id is
// written as given (a JSON number, string or null).
func RPC(id, method, params string) string {
	s := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"`
	if params != "" {
		s += `,"params":` + params
	}
	return s + "}"
}

// Msg10 and Msg03 are SendMessage params of A2A 1.0 and 0.3: one text part,
// messageId "m1".
const (
	Msg10 = `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	Msg03 = `{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}`
)
