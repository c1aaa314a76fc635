package jsonrpcwire

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/sidecar/protocol/bodytest"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

const ctJSON = bodytest.ContentType

// rpc builds a JSON-RPC request body.
var rpc = bodytest.RPC

const (
	msg10 = bodytest.Msg10
	msg03 = bodytest.Msg03
)

func TestParseJSONRPCRejects(t *testing.T) {
	tests := []struct {
		name string
		v    protocol.Version
		ct   string
		body string
		lim  protocol.Limits
		code protocol.Code
		msg  string
		id   string // echoed id, "" for none
	}{
		{name: "empty body", body: ``, code: protocol.ParseError, msg: "request body is empty"},
		{name: "whitespace body", body: " \n\t", code: protocol.ParseError, msg: "request body is empty"},
		{name: "truncated", body: `{"jsonrpc":`, code: protocol.ParseError, msg: "request body is not valid JSON: unexpected end of input"},
		{name: "trailing comma", body: `{"jsonrpc":"2.0",}`, code: protocol.ParseError, msg: "request body is not valid JSON"},
		{name: "single quotes", body: `{'jsonrpc':'2.0'}`, code: protocol.ParseError, msg: "request body is not valid JSON"},
		{name: "invalid utf-8", body: "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"\xff\"}}", code: protocol.ParseError, msg: "request body is not valid UTF-8"},
		{name: "lone surrogate escape", body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\ud800"}}`, code: protocol.ParseError, msg: "request body is not valid JSON"},
		{name: "trailing garbage", body: rpc(`1`, "GetTask", `{"id":"t"}`) + ` x`, code: protocol.ParseError, msg: "request body has data after the JSON value"},
		{name: "two values", body: rpc(`1`, "GetTask", `{"id":"t"}`) + `{}`, code: protocol.ParseError, msg: "request body has data after the JSON value"},
		{name: "batch", body: `[` + rpc(`1`, "GetTask", `{"id":"t"}`) + `]`, code: protocol.InvalidRequest, msg: "batch requests are not supported"},
		{name: "empty batch", body: `[]`, code: protocol.InvalidRequest, msg: "batch requests are not supported"},
		{name: "top-level string", body: `"GetTask"`, code: protocol.InvalidRequest, msg: "request must be a JSON object"},
		{name: "depth 10000", body: strings.Repeat("[", 10000) + strings.Repeat("]", 10000), code: protocol.InvalidRequest, msg: "request body nests deeper than the limit of 64 levels"},
		{name: "depth 65 in params", body: rpc(`1`, "GetTask", `{"id":"t","x":`+strings.Repeat(`[`, 64)+strings.Repeat(`]`, 64)+`}`), code: protocol.InvalidRequest, msg: "request body nests deeper than the limit of 64 levels"},
		{name: "custom depth", lim: protocol.Limits{MaxDepth: 3}, body: rpc(`1`, "GetTask", `{"id":"t","x":[[1]]}`), code: protocol.InvalidRequest, msg: "request body nests deeper than the limit of 3 levels"},
		{name: "oversize", lim: protocol.Limits{MaxBodyBytes: 40}, body: rpc(`1`, "GetTask", `{"id":"t"}`), code: protocol.PayloadTooLarge, msg: "request body is larger than the limit of 40 bytes"},
		{name: "text/plain", ct: "text/plain", body: rpc(`1`, "GetTask", `{"id":"t"}`), code: protocol.ContentTypeNotSupported, msg: "Content-Type is not supported; use application/json"},
		{name: "no content type", ct: "-", body: rpc(`1`, "GetTask", `{"id":"t"}`), code: protocol.ContentTypeNotSupported, msg: "Content-Type is not supported; use application/json"},
		{name: "json suffix lookalike", ct: "application/jsonp", body: rpc(`1`, "GetTask", `{"id":"t"}`), code: protocol.ContentTypeNotSupported, msg: "Content-Type is not supported; use application/json"},
		{name: "latin1 charset", ct: "application/json; charset=latin1", body: rpc(`1`, "GetTask", `{"id":"t"}`), code: protocol.ContentTypeNotSupported, msg: "Content-Type charset is not supported; use utf-8"},
		{name: "jsonrpc 1.0", body: `{"jsonrpc":"1.0","id":7,"method":"GetTask","params":{"id":"t"}}`, code: protocol.InvalidRequest, msg: `jsonrpc must be "2.0"`, id: `7`},
		{name: "jsonrpc missing", body: `{"id":"a","method":"GetTask","params":{"id":"t"}}`, code: protocol.InvalidRequest, msg: `jsonrpc must be "2.0"`, id: `"a"`},
		{name: "jsonrpc number", body: `{"jsonrpc":2.0,"id":1,"method":"GetTask"}`, code: protocol.InvalidRequest, msg: `jsonrpc must be "2.0"`, id: `1`},
		{name: "missing id", body: `{"jsonrpc":"2.0","method":"GetTask","params":{"id":"t"}}`, code: protocol.InvalidRequest, msg: "id is required; A2A methods are not notifications"},
		{name: "id object", body: rpc(`{"a":1}`, "GetTask", `{"id":"t"}`), code: protocol.InvalidRequest, msg: "id must be a string, number or null"},
		{name: "id array", body: rpc(`[1]`, "GetTask", `{"id":"t"}`), code: protocol.InvalidRequest, msg: "id must be a string, number or null"},
		{name: "id bool", body: rpc(`true`, "GetTask", `{"id":"t"}`), code: protocol.InvalidRequest, msg: "id must be a string, number or null"},
		{name: "method missing", body: `{"jsonrpc":"2.0","id":1}`, code: protocol.InvalidRequest, msg: "method is required", id: `1`},
		{name: "method number", body: `{"jsonrpc":"2.0","id":1,"method":5}`, code: protocol.InvalidRequest, msg: "method must be a string", id: `1`},
		{name: "method null", body: `{"jsonrpc":"2.0","id":1,"method":null}`, code: protocol.InvalidRequest, msg: "method is required", id: `1`},
		// What is forwarded is what was read (issue 21): a member the request message does not
		// define, or a value of another kind, is refused rather than forwarded unread.
		{name: "field spelled in other case", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m1","TaskID":"t9","parts":[{"text":"x"}]}}`),
			code: protocol.InvalidParams, msg: "params.message.TaskID is not a field of the A2A 1.0 Message message", id: "1"},
		{name: "top-level taskId", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"taskId":"t9","message":{"messageId":"m1","parts":[{"text":"x"}]}}`),
			code: protocol.InvalidParams, msg: "params.taskId is not a field of the A2A 1.0 SendMessageRequest message", id: "1"},
		{name: "1.0 push create with 0.3 name", v: protocol.V1, body: rpc(`1`, "CreateTaskPushNotificationConfig", `{"taskId":"t1","url":"https://h","name":"tasks/t1/pushNotificationConfigs/c"}`),
			code: protocol.InvalidParams, msg: "params.name is not a field of the A2A 1.0 TaskPushNotificationConfig message", id: "1"},
		{name: "1.0 push create with 0.3 nesting", v: protocol.V1, body: rpc(`1`, "CreateTaskPushNotificationConfig", `{"taskId":"t1","url":"https://h","pushNotificationConfig":{"url":"https://i"}}`),
			code: protocol.InvalidParams, msg: "params.pushNotificationConfig is not a field of the A2A 1.0 TaskPushNotificationConfig message", id: "1"},
		{name: "CancelTask metadata a number", v: protocol.V1, body: rpc(`1`, "CancelTask", `{"id":"t1","metadata":5}`),
			code: protocol.InvalidParams, msg: "params.metadata must be an object", id: "1"},
		{name: "unknown part member", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m1","parts":[{"text":"x","kind":"text"}]}}`),
			code: protocol.InvalidParams, msg: "params.message.parts[0].kind is not a field of the A2A 1.0 Part message", id: "1"},
		{name: "enum name", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`),
			code: protocol.InvalidParams, msg: "params.message.role must be one of ROLE_UNSPECIFIED, ROLE_USER, ROLE_AGENT", id: "1"},
		{name: "0.3 tenant", v: protocol.V03, body: rpc(`1`, "tasks/get", `{"id":"t1","tenant":"x"}`),
			code: protocol.InvalidParams, msg: "params.tenant is not an A2A 0.3 field: a 0.3 request names no tenant (A2A 1.0 has tenants)", id: "1"},
		{name: "0.3 top-level taskId", v: protocol.V03, body: rpc(`1`, "message/send", `{"taskId":"t9","message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"x"}]}}`),
			code: protocol.InvalidParams, msg: "params.taskId is not a field of the A2A 0.3 MessageSendParams object", id: "1"},
		{name: "0.3 push set with a 1.0 url", v: protocol.V03, body: rpc(`1`, "tasks/pushNotificationConfig/set", `{"taskId":"t1","url":"https://h","pushNotificationConfig":{"url":"https://h"}}`),
			code: protocol.InvalidParams, msg: "params.url is not a field of the A2A 0.3 TaskPushNotificationConfig object", id: "1"},
		{name: "0.3 message in proto names", v: protocol.V03, body: rpc(`1`, "message/send", `{"message":{"kind":"message","message_id":"m1","role":"user","parts":[{"kind":"text","text":"x"}]}}`),
			code: protocol.InvalidParams, msg: "params.message.message_id is not a field of the A2A 0.3 Message object", id: "1"},
		{name: "duplicate method", body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"SendMessage","params":{"id":"t"}}`, code: protocol.ParseError, msg: `duplicate object key "method"`},
		{name: "duplicate params", body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"},"params":{"id":"u"}}`, code: protocol.ParseError, msg: `duplicate object key "params"`},
		{name: "duplicate id", body: `{"jsonrpc":"2.0","id":1,"id":2,"method":"GetTask","params":{"id":"t"}}`, code: protocol.ParseError, msg: `duplicate object key "id"`},
		{name: "duplicate in params", body: rpc(`1`, "GetTask", `{"id":"t","id":"u"}`), code: protocol.ParseError, msg: `duplicate object key "id"`},
		{name: "duplicate in message", body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","messageId":"n","parts":[{"text":"x"}]}}`), code: protocol.ParseError, msg: `duplicate object key "messageId"`},
		{name: "duplicate deep in metadata", body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x"}]},"metadata":{"a":{"b":[{"c":1,"c":2}]}}}`), code: protocol.ParseError, msg: `duplicate object key "c"`},
		{name: "duplicate via escape", body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","\u006dethod":"SendMessage"}`, code: protocol.ParseError, msg: `duplicate object key "method"`},
		{name: "case-folded duplicate method", body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","Method":"SendMessage","params":{"id":"t"}}`, code: protocol.ParseError, msg: `duplicate object key "Method" (same field as "method")`},
		{name: "kelvin-sign duplicate", body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","taskId":"a","tas\u212aId":"b","parts":[{"text":"x"}]}}`), code: protocol.ParseError, msg: "duplicate object key \"tas\u212aId\" (same field as \"taskId\")", id: `1`},
		{name: "proto-name duplicate", body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","taskId":"a","task_id":"b","parts":[{"text":"x"}]}}`), code: protocol.ParseError, msg: `duplicate object key "task_id" (same field as "taskId")`, id: `1`},
		{name: "unknown method", body: rpc(`1`, "foo", ""), code: protocol.MethodNotFound, msg: `method "foo" not found`, id: `1`},
		{name: "empty method", body: rpc(`1`, "", ""), code: protocol.MethodNotFound, msg: `method "" not found`, id: `1`},
		{name: "lower camel", v: protocol.V1, body: rpc(`1`, "sendMessage", msg10), code: protocol.MethodNotFound, msg: `method "sendMessage" not found`, id: `1`},
		{name: "trailing space", v: protocol.V1, body: rpc(`1`, "SendMessage ", msg10), code: protocol.MethodNotFound, msg: `method "SendMessage " not found`, id: `1`},
		{name: "cyrillic a", v: protocol.V1, body: rpc(`1`, "SendMess\u0430ge", msg10), code: protocol.MethodNotFound, msg: "method \"SendMess\u0430ge\" not found", id: `1`},
		{name: "fullwidth S", v: protocol.V1, body: rpc(`1`, "\uff33endMessage", msg10), code: protocol.MethodNotFound, msg: "method \"\uff33endMessage\" not found", id: `1`},
		{name: "0.3 upper case", v: protocol.V03, body: rpc(`1`, "Message/Send", msg03), code: protocol.MethodNotFound, msg: `method "Message/Send" not found`, id: `1`},
		{name: "0.3 name on 1.0", v: protocol.V1, body: rpc(`1`, "message/send", msg03), code: protocol.MethodNotFound, msg: `method "message/send" is not an A2A 1.0 method; send A2A-Version: 0.3 or use SendMessage`, id: `1`},
		{name: "0.3 card name on 1.0", v: protocol.V1, body: rpc(`"x"`, "agent/getAuthenticatedExtendedCard", ""), code: protocol.MethodNotFound, msg: `method "agent/getAuthenticatedExtendedCard" is not an A2A 1.0 method; send A2A-Version: 0.3 or use GetExtendedAgentCard`, id: `"x"`},
		{name: "1.0 name on 0.3", v: protocol.V03, body: rpc(`1`, "SendMessage", msg10), code: protocol.MethodNotFound, msg: `method "SendMessage" is not an A2A 0.3 method; send A2A-Version: 1.0 or use message/send`, id: `1`},
		{name: "ListTasks on 0.3", v: protocol.V03, body: rpc(`1`, "ListTasks", `{}`), code: protocol.MethodNotFound, msg: `method "ListTasks" is not an A2A 0.3 method; send A2A-Version: 1.0`, id: `1`},
		{name: "tasks/list on 0.3", v: protocol.V03, body: rpc(`1`, "tasks/list", `{}`), code: protocol.MethodNotFound, msg: `method "tasks/list" not found`, id: `1`},
		{name: "long method clipped", body: rpc(`1`, strings.Repeat("x", 100), ""), code: protocol.MethodNotFound, msg: `method "` + strings.Repeat("x", 64) + `…" not found`, id: `1`},
		{name: "params array", v: protocol.V1, body: rpc(`1`, "GetTask", `["t"]`), code: protocol.InvalidParams, msg: "params must be an object", id: `1`},
		{name: "params string", v: protocol.V1, body: rpc(`1`, "GetTask", `"t"`), code: protocol.InvalidParams, msg: "params must be an object", id: `1`},
		{name: "no params GetTask", v: protocol.V1, body: rpc(`1`, "GetTask", ""), code: protocol.InvalidParams, msg: "id is required", id: `1`},
		{name: "GetTask id number", v: protocol.V1, body: rpc(`1`, "GetTask", `{"id":5}`), code: protocol.InvalidParams, msg: "id must be a string", id: `1`},
		{name: "GetTask id empty", v: protocol.V1, body: rpc(`1`, "GetTask", `{"id":""}`), code: protocol.InvalidParams, msg: "id is required", id: `1`},
		{name: "GetTask id control char", v: protocol.V1, body: rpc(`1`, "GetTask", `{"id":"a\nb"}`), code: protocol.InvalidParams, msg: "id must not contain control characters", id: `1`},
		{name: "CancelTask no id", v: protocol.V1, body: rpc(`1`, "CancelTask", `{}`), code: protocol.InvalidParams, msg: "id is required", id: `1`},
		{name: "0.3 resubscribe no id", v: protocol.V03, body: rpc(`1`, "tasks/resubscribe", `{}`), code: protocol.InvalidParams, msg: "id is required", id: `1`},
		{name: "bad tenant", v: protocol.V1, body: rpc(`1`, "GetTask", `{"id":"t","tenant":"../x"}`), code: protocol.InvalidParams, msg: "tenant must be 1 to 128 characters of A-Z a-z 0-9 . _ - and not . or ..", id: `1`},
		{name: "tenant dotdot", v: protocol.V1, body: rpc(`1`, "ListTasks", `{"tenant":".."}`), code: protocol.InvalidParams, msg: "tenant must be 1 to 128 characters of A-Z a-z 0-9 . _ - and not . or ..", id: `1`},
		{name: "send without message", v: protocol.V1, body: rpc(`1`, "SendMessage", `{}`), code: protocol.InvalidParams, msg: "message is required", id: `1`},
		{name: "send message string", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":"hi"}`), code: protocol.InvalidParams, msg: "message must be an object", id: `1`},
		{name: "send no messageId", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"parts":[{"text":"x"}]}}`), code: protocol.InvalidParams, msg: "message.messageId is required", id: `1`},
		{name: "send no parts", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m"}}`), code: protocol.InvalidParams, msg: "message.parts must be a non-empty array", id: `1`},
		{name: "send empty parts", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[]}}`), code: protocol.InvalidParams, msg: "message.parts must be a non-empty array", id: `1`},
		{name: "send part not object", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":["hi"]}}`), code: protocol.InvalidParams, msg: "message.parts[0] must be an object", id: `1`},
		{name: "part two contents", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x"},{"text":"x","url":"https://x"}]}}`), code: protocol.InvalidParams, msg: "message.parts[1] must have exactly one of text, raw, url, data", id: `1`},
		{name: "part no content", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"mediaType":"text/plain"}]}}`), code: protocol.InvalidParams, msg: "message.parts[0] must have exactly one of text, raw, url, data", id: `1`},
		{name: "0.3 part on 1.0", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"kind":"file","file":{"uri":"https://x"}}]}}`), code: protocol.InvalidParams, msg: "message.parts[0] must have exactly one of text, raw, url, data", id: `1`},
		{name: "part text number", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":1}]}}`), code: protocol.InvalidParams, msg: "message.parts[0].text must be a string", id: `1`},
		{name: "part empty url", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"url":""}]}}`), code: protocol.InvalidParams, msg: "message.parts[0].url must not be empty", id: `1`},
		{name: "part bad media type", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"raw":"AA==","mediaType":"pdf"}]}}`), code: protocol.InvalidParams, msg: "message.parts[0].mediaType is not a valid media type", id: `1`},
		{name: "message taskId number", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","taskId":1,"parts":[{"text":"x"}]}}`), code: protocol.InvalidParams, msg: "message.taskId must be a string", id: `1`},
		{name: "skillId number", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x"}]},"metadata":{"skillId":3}}`), code: protocol.InvalidParams, msg: "metadata.skillId must be a string", id: `1`},
		{name: "output modes not array", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x"}]},"configuration":{"acceptedOutputModes":"text/plain"}}`), code: protocol.InvalidParams, msg: "configuration.acceptedOutputModes must be an array of strings", id: `1`},
		{name: "0.3 part kind missing", v: protocol.V03, body: rpc(`1`, "message/send", `{"message":{"messageId":"m","parts":[{"text":"x"}]}}`), code: protocol.InvalidParams, msg: `message.parts[0].kind must be "text", "file" or "data"`, id: `1`},
		{name: "0.3 part kind unknown", v: protocol.V03, body: rpc(`1`, "message/send", `{"message":{"messageId":"m","parts":[{"kind":"Text","text":"x"}]}}`), code: protocol.InvalidParams, msg: `message.parts[0].kind must be "text", "file" or "data"`, id: `1`},
		{name: "0.3 file bytes and uri", v: protocol.V03, body: rpc(`1`, "message/send", `{"message":{"messageId":"m","parts":[{"kind":"file","file":{"bytes":"AA==","uri":"https://x"}}]}}`), code: protocol.InvalidParams, msg: "message.parts[0].file must have exactly one of bytes, uri", id: `1`},
		{name: "0.3 data not object", v: protocol.V03, body: rpc(`1`, "message/send", `{"message":{"messageId":"m","parts":[{"kind":"data","data":[1]}]}}`), code: protocol.InvalidParams, msg: "message.parts[0].data must be an object", id: `1`},
		{name: "0.3 message kind", v: protocol.V03, body: rpc(`1`, "message/send", `{"message":{"kind":"task","messageId":"m","parts":[{"kind":"text","text":"x"}]}}`), code: protocol.InvalidParams, msg: `message.kind must be "message"`, id: `1`},
		{name: "1.0 push create no url", v: protocol.V1, body: rpc(`1`, "CreateTaskPushNotificationConfig", `{"taskId":"t"}`), code: protocol.InvalidParams, msg: "url is required", id: `1`},
		{name: "1.0 push get no id", v: protocol.V1, body: rpc(`1`, "GetTaskPushNotificationConfig", `{"taskId":"t"}`), code: protocol.InvalidParams, msg: "id is required", id: `1`},
		{name: "1.0 push list no taskId", v: protocol.V1, body: rpc(`1`, "ListTaskPushNotificationConfigs", `{"id":"t"}`), code: protocol.InvalidParams, msg: "taskId is required", id: `1`},
		{name: "0.3 push set no config", v: protocol.V03, body: rpc(`1`, "tasks/pushNotificationConfig/set", `{"taskId":"t"}`), code: protocol.InvalidParams, msg: "pushNotificationConfig must be an object", id: `1`},
		{name: "0.3 push delete no config id", v: protocol.V03, body: rpc(`1`, "tasks/pushNotificationConfig/delete", `{"id":"t"}`), code: protocol.InvalidParams, msg: "pushNotificationConfigId is required", id: `1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v
			if v == "" {
				v = protocol.V1
			}
			ct := tc.ct
			switch ct {
			case "":
				ct = ctJSON
			case "-":
				ct = ""
			}
			r, err := ParseJSONRPC(v, ct, []byte(tc.body), tc.lim)
			require.Nil(t, r)
			require.NotNil(t, err)
			require.Equal(t, tc.code, err.Code)
			require.Equal(t, tc.msg, err.Message)
			if tc.id == "" {
				require.Nil(t, err.ID)
			} else {
				require.Equal(t, tc.id, string(err.ID))
			}
			require.NotContains(t, err.Message, "jsontext")
			require.NotContains(t, err.Message, "offset")
		})
	}
}

func TestParseJSONRPCAccepts(t *testing.T) {
	tests := []struct {
		name   string
		v      protocol.Version
		ct     string
		body   string
		op     protocol.Operation
		method string
		task   string
		config string
		tenant string
		msg    *protocol.MessageInfo
	}{
		{name: "SendMessage", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"tenant":"acme","message":{"messageId":"m1","taskId":"t1","contextId":"c1","role":"ROLE_USER","parts":[
			{"text":"reconcile this"},{"raw":"JVBERi0=","mediaType":"Application/PDF","filename":"a.pdf"},{"url":"https://x/y.png","mediaType":"image/png"},
			{"data":{"a":1}},{"text":"# t","mediaType":"text/markdown; charset=utf-8"},{"url":"https://x/z"}],"metadata":{"skillId":"msg-hint"}},
			"configuration":{"acceptedOutputModes":["application/json","text/plain"]},"metadata":{"skillId":"reconcile-invoice"}}`),
			op: protocol.SendMessage, task: "t1", tenant: "acme",
			msg: &protocol.MessageInfo{MessageID: "m1", TaskID: "t1", ContextID: "c1", SkillHint: "reconcile-invoice",
				AcceptedOutputModes: []string{"application/json", "text/plain"},
				Parts: []protocol.PartInfo{{Kind: protocol.PartText, MediaType: "text/plain", Text: "reconcile this"}, {Kind: protocol.PartRaw, MediaType: "application/pdf", InlineBytes: 5},
					{Kind: protocol.PartURL, MediaType: "image/png"}, {Kind: protocol.PartData, MediaType: "application/json", Data: jsontext.Value(`{"a":1}`)},
					{Kind: protocol.PartText, MediaType: "text/markdown", Text: "# t"}, {Kind: protocol.PartURL, MediaType: "application/octet-stream"}}}},
		{name: "SendMessage message skill hint", v: protocol.V1, body: rpc(`"abc"`, "SendMessage", `{"message":{"messageId":"m1","parts":[{"text":"x"}],"metadata":{"skillId":"s"}}}`),
			op: protocol.SendMessage, msg: &protocol.MessageInfo{MessageID: "m1", SkillHint: "s", Parts: []protocol.PartInfo{{Kind: protocol.PartText, MediaType: "text/plain", Text: "x"}}}},
		{name: "SendStreamingMessage a2a+json", v: protocol.V1, ct: "application/a2a+json", body: rpc(`null`, "SendStreamingMessage", msg10),
			op: protocol.SendStreamingMessage, msg: &protocol.MessageInfo{MessageID: "m1", Parts: []protocol.PartInfo{{Kind: protocol.PartText, MediaType: "text/plain", Text: "hi"}}}},
		{name: "escaped method name", v: protocol.V1, ct: "application/json; charset=UTF-8", body: rpc(`1`, `\u0053endMessage`, msg10),
			op: protocol.SendMessage, method: "SendMessage", msg: &protocol.MessageInfo{MessageID: "m1", Parts: []protocol.PartInfo{{Kind: protocol.PartText, MediaType: "text/plain", Text: "hi"}}}},
		{name: "field spelled in proto name", v: protocol.V1, body: rpc(`1`, "SendMessage", `{"message":{"message_id":"m1","task_id":"t9","parts":[{"text":"x"}]}}`),
			op: protocol.SendMessage, task: "t9", msg: &protocol.MessageInfo{MessageID: "m1", TaskID: "t9", Parts: []protocol.PartInfo{{Kind: protocol.PartText, MediaType: "text/plain", Text: "x"}}}},
		{name: "GetTask", v: protocol.V1, body: rpc(`1`, "GetTask", `{"id":"t1","historyLength":3,"tenant":"acme"}`), op: protocol.GetTask, task: "t1", tenant: "acme"},
		{name: "ListTasks", v: protocol.V1, body: rpc(`1`, "ListTasks", `{"contextId":"c"}`), op: protocol.ListTasks},
		{name: "ListTasks no params", v: protocol.V1, body: rpc(`1`, "ListTasks", ""), op: protocol.ListTasks},
		{name: "CancelTask", v: protocol.V1, body: rpc(`1`, "CancelTask", `{"id":"t1"}`), op: protocol.CancelTask, task: "t1"},
		{name: "SubscribeToTask", v: protocol.V1, body: rpc(`1`, "SubscribeToTask", `{"id":"t1"}`), op: protocol.SubscribeToTask, task: "t1"},
		{name: "CreateTaskPushNotificationConfig", v: protocol.V1, body: rpc(`1`, "CreateTaskPushNotificationConfig", `{"taskId":"t1","id":"c1","url":"https://hook"}`), op: protocol.CreateTaskPushNotificationConfig, task: "t1", config: "c1"},
		{name: "GetTaskPushNotificationConfig", v: protocol.V1, body: rpc(`1`, "GetTaskPushNotificationConfig", `{"taskId":"t1","id":"c1"}`), op: protocol.GetTaskPushNotificationConfig, task: "t1", config: "c1"},
		{name: "ListTaskPushNotificationConfigs", v: protocol.V1, body: rpc(`1`, "ListTaskPushNotificationConfigs", `{"taskId":"t1","pageSize":5}`), op: protocol.ListTaskPushNotificationConfigs, task: "t1"},
		{name: "DeleteTaskPushNotificationConfig", v: protocol.V1, body: rpc(`1`, "DeleteTaskPushNotificationConfig", `{"taskId":"t1","id":"c1"}`), op: protocol.DeleteTaskPushNotificationConfig, task: "t1", config: "c1"},
		{name: "GetExtendedAgentCard", v: protocol.V1, body: rpc(`1`, "GetExtendedAgentCard", ""), op: protocol.GetExtendedAgentCard},
		{name: "GetExtendedAgentCard tenant", v: protocol.V1, body: rpc(`1`, "GetExtendedAgentCard", `{"tenant":"t-1.a_b"}`), op: protocol.GetExtendedAgentCard, tenant: "t-1.a_b"},
		{name: "message/send", v: protocol.V03, body: rpc(`1`, "message/send", `{"message":{"kind":"message","messageId":"m1","taskId":"t1","contextId":"c1","role":"user","parts":[
			{"kind":"text","text":"hi"},{"kind":"file","file":{"bytes":"JVBERi0=","mimeType":"application/pdf","name":"a.pdf"}},
			{"kind":"file","file":{"uri":"https://x/y"}},{"kind":"data","data":{"a":1}}]},
			"configuration":{"acceptedOutputModes":["application/json"],"blocking":true},"metadata":{"skillId":"lookup-invoice"}}`),
			op: protocol.SendMessage, task: "t1",
			msg: &protocol.MessageInfo{MessageID: "m1", TaskID: "t1", ContextID: "c1", SkillHint: "lookup-invoice", AcceptedOutputModes: []string{"application/json"},
				Parts: []protocol.PartInfo{{Kind: protocol.PartText, MediaType: "text/plain", Text: "hi"}, {Kind: protocol.PartRaw, MediaType: "application/pdf", InlineBytes: 5},
					{Kind: protocol.PartURL, MediaType: "application/octet-stream"}, {Kind: protocol.PartData, MediaType: "application/json", Data: jsontext.Value(`{"a":1}`)}}}},
		{name: "message/stream", v: protocol.V03, body: rpc(`1`, "message/stream", msg03), op: protocol.SendStreamingMessage,
			msg: &protocol.MessageInfo{MessageID: "m1", Parts: []protocol.PartInfo{{Kind: protocol.PartText, MediaType: "text/plain", Text: "hi"}}}},
		{name: "tasks/get", v: protocol.V03, body: rpc(`1`, "tasks/get", `{"id":"t1","historyLength":2}`), op: protocol.GetTask, task: "t1"},
		{name: "tasks/cancel", v: protocol.V03, body: rpc(`1`, "tasks/cancel", `{"id":"t1"}`), op: protocol.CancelTask, task: "t1"},
		{name: "tasks/resubscribe", v: protocol.V03, body: rpc(`1`, "tasks/resubscribe", `{"id":"t1"}`), op: protocol.SubscribeToTask, task: "t1"},
		{name: "tasks/pushNotificationConfig/set", v: protocol.V03, body: rpc(`1`, "tasks/pushNotificationConfig/set", `{"taskId":"t1","pushNotificationConfig":{"id":"c1","url":"https://hook"}}`), op: protocol.CreateTaskPushNotificationConfig, task: "t1", config: "c1"},
		{name: "tasks/pushNotificationConfig/get", v: protocol.V03, body: rpc(`1`, "tasks/pushNotificationConfig/get", `{"id":"t1","pushNotificationConfigId":"c1"}`), op: protocol.GetTaskPushNotificationConfig, task: "t1", config: "c1"},
		{name: "tasks/pushNotificationConfig/get without config id", v: protocol.V03, body: rpc(`1`, "tasks/pushNotificationConfig/get", `{"id":"t1"}`), op: protocol.GetTaskPushNotificationConfig, task: "t1"},
		{name: "tasks/pushNotificationConfig/list", v: protocol.V03, body: rpc(`1`, "tasks/pushNotificationConfig/list", `{"id":"t1"}`), op: protocol.ListTaskPushNotificationConfigs, task: "t1"},
		{name: "tasks/pushNotificationConfig/delete", v: protocol.V03, body: rpc(`1`, "tasks/pushNotificationConfig/delete", `{"id":"t1","pushNotificationConfigId":"c1"}`), op: protocol.DeleteTaskPushNotificationConfig, task: "t1", config: "c1"},
		{name: "agent/getAuthenticatedExtendedCard", v: protocol.V03, body: rpc(`1`, "agent/getAuthenticatedExtendedCard", ""), op: protocol.GetExtendedAgentCard},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ct := tc.ct
			if ct == "" {
				ct = ctJSON
			}
			r, err := ParseJSONRPC(tc.v, ct, []byte(tc.body), protocol.Limits{})
			require.Nil(t, err)
			require.Equal(t, protocol.JSONRPC, r.Binding)
			require.Equal(t, tc.v, r.Version)
			require.Equal(t, tc.op, r.Operation)
			if tc.method != "" {
				require.Equal(t, tc.method, r.Method)
			}
			require.Equal(t, tc.task, r.TaskID)
			require.Equal(t, tc.config, r.ConfigID)
			require.Equal(t, tc.tenant, r.Tenant)
			require.Equal(t, tc.msg, r.Message)
			require.NotNil(t, r.ID)
			require.True(t, jsontext.Value(r.ID).IsValid())
		})
	}
}

func TestParseJSONRPCEchoesID(t *testing.T) {
	for _, id := range []string{`1`, `-2.5e3`, `"req-1"`, `null`, `"\u00e9"`} {
		t.Run(id, func(t *testing.T) {
			r, err := ParseJSONRPC(protocol.V1, ctJSON, []byte(rpc(id, "GetTask", `{"id":"t"}`)), protocol.Limits{})
			require.Nil(t, err)
			require.Equal(t, id, string(r.ID))
			require.JSONEq(t, `{"id":"t"}`, string(r.Params))
		})
	}
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		header string
		want   protocol.Version
		msg    string
	}{
		{"", protocol.V03, ""},
		{"1.0", protocol.V1, ""},
		{"1", protocol.V1, ""},
		{" 1.0 ", protocol.V1, ""},
		{"0.3", protocol.V03, ""},
		{"0.2", "", `A2A version "0.2" is not supported; supported versions: 1.0, 0.3`},
		{"2.0", "", `A2A version "2.0" is not supported; supported versions: 1.0, 0.3`},
		{"v1", "", `A2A version "v1" is not supported; supported versions: 1.0, 0.3`},
	}
	for _, tc := range tests {
		t.Run(tc.header, func(t *testing.T) {
			v, err := protocol.ParseVersion(tc.header)
			if tc.msg == "" {
				require.Nil(t, err)
				require.Equal(t, tc.want, v)
				return
			}
			require.NotNil(t, err)
			require.Equal(t, protocol.VersionNotSupported, err.Code)
			require.Equal(t, -32009, err.JSONRPCCode())
			require.Equal(t, tc.msg, err.Message)
		})
	}
	// A list, or the header given twice and joined by a proxy, is malformed
	// rather than an unsupported version; the answer still says which are.
	for _, h := range []string{"1.0, 0.3", "1.0,1.0", ","} {
		_, err := protocol.ParseVersion(h)
		require.NotNil(t, err, h)
		require.Equal(t, protocol.InvalidRequest, err.Code, h)
		require.Equal(t, protocol.RepeatedVersion().Message, err.Message, h)
		require.Equal(t, "1.0,0.3", err.Metadata["supportedVersions"], h)
	}
}

// benchBody is the SendMessage body of BenchmarkParseJSONRPC, a typical ~500-byte request.
var benchBody = []byte(`{"jsonrpc":"2.0","id":"7d1f4c2e-1b9a-4c55-9e0f-3a2b1c0d9e8f","method":"SendMessage","params":{` +
	`"message":{"messageId":"0b6f3c1e-52aa-4e0b-8d0f-9a1e7c3d2b10","contextId":"ctx-42","role":"ROLE_USER",` +
	`"parts":[{"text":"Reconcile invoice INV-20931 against its purchase order, please."},` +
	`{"url":"https://files.example.com/inv-20931.pdf","mediaType":"application/pdf","filename":"inv-20931.pdf"}]},` +
	`"configuration":{"acceptedOutputModes":["application/json","text/plain"]},"metadata":{"skillId":"reconcile-invoice"}}}`)

func BenchmarkParseJSONRPC(b *testing.B) {
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseJSONRPC(protocol.V1, ctJSON, benchBody, protocol.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForwardParams is what re-encoding costs per forwarded request: the params a handler
// is sent, from the request message admission read (protojson in and out), for the same
// SendMessage.
func BenchmarkForwardParams(b *testing.B) {
	r, err := ParseJSONRPC(protocol.V1, ctJSON, benchBody, protocol.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ForwardParams(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestJSONRPCRequestEnvelope: the one request envelope (handler calls, a message re-read) is a
// request capgate's own parser reads back with the id, method and params it was given.
func TestJSONRPCRequestEnvelope(t *testing.T) {
	params := jsontext.Value(`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`)
	b, err := MarshalRequest("capgate-1", protocol.MethodName(protocol.V1, protocol.SendMessage), params)
	require.NoError(t, err)
	req, perr := ParseJSONRPC(protocol.V1, "application/json", b, protocol.Limits{})
	require.Nil(t, perr, "%s", b)
	require.Equal(t, protocol.SendMessage, req.Operation)
	require.JSONEq(t, `"capgate-1"`, string(req.ID))
	require.JSONEq(t, string(params), string(req.Params))

	b, err = MarshalRequest("1", "GetTask", nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"jsonrpc":"2.0","id":"1","method":"GetTask"}`, string(b), "no params member when there are none")
	_, err = MarshalRequest("1", "bad\xffname", nil)
	require.Error(t, err, "a method that is not valid UTF-8 is refused, not sent")
}
