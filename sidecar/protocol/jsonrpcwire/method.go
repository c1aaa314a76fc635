package jsonrpcwire

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonmodel"
)

// knownMethods holds every JSON-RPC method name of either version, so that a request naming one
// shares the constant instead of allocating a copy.
var knownMethods = func() map[string]string {
	m := map[string]string{}
	for _, op := range protocol.Operations() {
		for _, name := range []string{op.Spec().JSONRPC, op.Spec().JSONRPC03} {
			if name != "" {
				m[name] = name
			}
		}
	}
	return m
}()

// methodName decodes the JSON string of a method, as str does.
func methodName(v jsontext.Value) (string, bool) {
	if name, ok := knownMethods[string(jsonmodel.Unquote(v))]; ok {
		return name, true
	}
	return jsonmodel.String(v)
}

// IsA2AMethod reports whether name is a JSON-RPC method of A2A 1.0 or 0.3.
func IsA2AMethod(name string) bool {
	_, ok := knownMethods[name]
	return ok
}
