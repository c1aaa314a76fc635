package jsonmodel_test

import "github.com/capgate/capgate/sidecar/protocol/bodytest"

const ctJSON = bodytest.ContentType

// rpc builds a JSON-RPC request body.
var rpc = bodytest.RPC

const (
	msg10 = bodytest.Msg10
	msg03 = bodytest.Msg03
)

// jsV03Send is a 0.3 SendMessageRequest in ProtoJSON (the 0.3 HTTP+JSON form).
const jsV03Send = `{"message":{"messageId":"m1","taskId":"t0","role":"ROLE_USER","content":[{"text":"hi"},` +
	`{"file":{"fileWithUri":"https://f/x.pdf","mimeType":"application/pdf"}},{"file":{"fileWithBytes":"AAEC","mimeType":"image/png"}},` +
	`{"data":{"data":{"a":1}}}],"metadata":{"skillId":"s"}},"configuration":{"acceptedOutputModes":["text/plain"],` +
	`"pushNotification":{"id":"pc","url":"https://p/x","token":"tok"},"historyLength":2,"blocking":true},"metadata":{"m":1}}`

// benchBody is the SendMessage body of BenchmarkParseJSONRPC, a typical ~500-byte request.
var benchBody = []byte(`{"jsonrpc":"2.0","id":"7d1f4c2e-1b9a-4c55-9e0f-3a2b1c0d9e8f","method":"SendMessage","params":{` +
	`"message":{"messageId":"0b6f3c1e-52aa-4e0b-8d0f-9a1e7c3d2b10","contextId":"ctx-42","role":"ROLE_USER",` +
	`"parts":[{"text":"Reconcile invoice INV-20931 against its purchase order, please."},` +
	`{"url":"https://files.example.com/inv-20931.pdf","mediaType":"application/pdf","filename":"inv-20931.pdf"}]},` +
	`"configuration":{"acceptedOutputModes":["application/json","text/plain"]},"metadata":{"skillId":"reconcile-invoice"}}}`)
