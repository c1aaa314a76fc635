package jsonmodel_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

// TestForwardSnakeCase03: a2a-go's 0.3 REST client snake_cases every name; what a 0.3 JSON-RPC
// handler is sent carries the schema's camelCase names, free-form values as they were.
func TestForwardSnakeCase03(t *testing.T) {
	r, perr := httpjsonwire.ParseHTTP(protocol.V03, "POST", "/message:send", ctJSON, []byte(`{"message":{"kind":"message","message_id":"m1","role":"user",`+
		`"parts":[{"kind":"file","file":{"mime_type":"image/png","uri":"https://x"}},{"kind":"data","data":{"a_b":1}}],`+
		`"metadata":{"skill_id":"x"}},"configuration":{"accepted_output_modes":["text/plain"]}}`), protocol.Limits{})
	require.Nil(t, perr)
	params, perr := r.ForwardParams()
	require.Nil(t, perr)
	require.JSONEq(t, `{"message":{"kind":"message","messageId":"m1","role":"user",`+
		`"parts":[{"kind":"file","file":{"mimeType":"image/png","uri":"https://x"}},{"kind":"data","data":{"a_b":1}}],`+
		`"metadata":{"skill_id":"x"}},"configuration":{"acceptedOutputModes":["text/plain"]}}`, string(params))
}

// TestForwardCanonical10: an A2A 1.0 request is forwarded as its request message re-encoded:
// proto names become JSON names, the path's values are written in.
func TestForwardCanonical10(t *testing.T) {
	r, perr := httpjsonwire.ParseHTTP(protocol.V1, "POST", "/acme/tasks/t1:cancel", ctJSON, []byte(`{"metadata":{"a_b":1}}`), protocol.Limits{})
	require.Nil(t, perr)
	params, perr := r.ForwardParams()
	require.Nil(t, perr)
	require.JSONEq(t, `{"tenant":"acme","id":"t1","metadata":{"a_b":1}}`, string(params))
	r, perr = jsonrpcwire.ParseJSONRPC(protocol.V1, ctJSON, []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"message_id":"m1","role":"ROLE_USER","parts":[{"raw":"JVBERi0"}]}}}`), protocol.Limits{})
	require.Nil(t, perr)
	params, perr = r.ForwardParams()
	require.Nil(t, perr)
	require.JSONEq(t, `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"raw":"JVBERi0="}]}}`, string(params))
}
