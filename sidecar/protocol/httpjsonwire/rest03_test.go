package httpjsonwire

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

// jsV03Send is the body @a2a-js/sdk 1.3.0's 0.3 HTTP+JSON transport (legacyCompat) sends for
// a message with text, URL, inline and data parts, a task id, a push config and metadata
// (captured from the SDK; test/interop runs the SDK itself).
const jsV03Send = `{"message":{"messageId":"m1","taskId":"t0","role":"ROLE_USER","content":[{"text":"hi"},` +
	`{"file":{"fileWithUri":"https://f/x.pdf","mimeType":"application/pdf"}},{"file":{"fileWithBytes":"AAEC","mimeType":"image/png"}},` +
	`{"data":{"data":{"a":1}}}],"metadata":{"skillId":"s"}},"configuration":{"acceptedOutputModes":["text/plain"],` +
	`"pushNotification":{"id":"pc","url":"https://p/x","token":"tok"},"historyLength":2,"blocking":true},"metadata":{"m":1}}`

func TestProtoJSON03Send(t *testing.T) {
	r, perr := ParseHTTP(protocol.V03, "POST", "/v1/message:send", "application/json", []byte(jsV03Send), protocol.Limits{})
	require.Nil(t, perr, "%v", perr)
	require.True(t, r.ProtoJSON03())
	require.Equal(t, protocol.SendMessage, r.Operation)
	require.Equal(t, []protocol.TaskRef{{ID: "t0", Where: "params.message.taskId"}}, r.Tasks)
	require.Equal(t, []protocol.PushRef{{URL: "https://p/x", Where: "params.configuration.pushNotificationConfig.url"}}, r.Push)
	require.Equal(t, &protocol.MessageInfo{MessageID: "m1", TaskID: "t0", SkillHint: "s", AcceptedOutputModes: []string{"text/plain"}, Parts: []protocol.PartInfo{
		{Kind: protocol.PartText, MediaType: "text/plain", Text: "hi"},
		{Kind: protocol.PartURL, MediaType: "application/pdf"},
		{Kind: protocol.PartRaw, MediaType: "image/png", InlineBytes: 3},
		{Kind: protocol.PartData, MediaType: "application/json", Data: []byte(`{"a":1}`)},
	}}, r.Message)

	// The handler is sent 0.3's JSON-RPC params: what the routing and limits saw.
	fwd, perr := r.ForwardParams()
	require.Nil(t, perr)
	require.JSONEq(t, `{"message":{"kind":"message","messageId":"m1","taskId":"t0","role":"user","parts":[`+
		`{"kind":"text","text":"hi"},{"kind":"file","file":{"mimeType":"application/pdf","uri":"https://f/x.pdf"}},`+
		`{"kind":"file","file":{"mimeType":"image/png","bytes":"AAEC"}},{"kind":"data","data":{"a":1}}],"metadata":{"skillId":"s"}},`+
		`"configuration":{"acceptedOutputModes":["text/plain"],"blocking":true,"historyLength":2,`+
		`"pushNotificationConfig":{"id":"pc","url":"https://p/x","token":"tok"}},"metadata":{"m":1}}`, string(fwd))

	// The JSON-RPC shape is still accepted on /v1, and is not the proto form.
	r, perr = ParseHTTP(protocol.V03, "POST", "/v1/message:send", "application/json",
		[]byte(`{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}`), protocol.Limits{})
	require.Nil(t, perr, "%v", perr)
	require.True(t, r.ProtoJSON03(), "answered in ProtoJSON: the route is the 0.3 specification's")

	// Un-prefixed 0.3 routes (a2a-go's 0.3 compatibility) keep the JSON-RPC shapes.
	r, perr = ParseHTTP(protocol.V03, "GET", "/tasks/t1", "", nil, protocol.Limits{})
	require.Nil(t, perr)
	require.False(t, r.ProtoJSON03())
	_, perr = ParseHTTP(protocol.V03, "POST", "/message:send", "application/json", []byte(jsV03Send), protocol.Limits{})
	require.NotNil(t, perr)
	require.Equal(t, protocol.InvalidParams, perr.Code)
}

func TestProtoJSON03SendRefused(t *testing.T) {
	for name, body := range map[string]string{
		"unknown field":       `{"message":{"messageId":"m1","content":[{"text":"hi"}],"kind":"message"}}`,
		"both names":          `{"message":{"messageId":"m1","taskId":"a","task_id":"b","content":[{"text":"hi"}]}}`,
		"message and request": `{"message":{"messageId":"m1","content":[{"text":"hi"}]},"request":{"messageId":"m1","content":[{"text":"hi"}]}}`,
		"wrong type":          `{"message":{"messageId":"m1","content":{"text":"hi"}}}`,
		"bad role":            `{"message":{"messageId":"m1","role":"ROLE_KING","content":[{"text":"hi"}]}}`,
		"no parts":            `{"message":{"messageId":"m1","content":[]}}`,
		"bad base64":          `{"message":{"messageId":"m1","content":[{"file":{"fileWithBytes":"!!"}}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, perr := ParseHTTP(protocol.V03, "POST", "/v1/message:send", "application/json", []byte(body), protocol.Limits{})
			require.NotNil(t, perr)
			require.Contains(t, []protocol.Code{protocol.InvalidParams, protocol.ParseError}, perr.Code, perr.Message)
			require.NotContains(t, perr.Message, "proto:", "no parser text prefix")
		})
	}
}

func TestProtoJSON03PushName(t *testing.T) {
	body := `{"name":"tasks/t1/pushNotificationConfigs/c1","pushNotificationConfig":{"id":"c1","url":"https://hook"}}`
	r, perr := ParseHTTP(protocol.V03, "POST", "/v1/tasks/t1/pushNotificationConfigs", "application/json", []byte(body), protocol.Limits{})
	require.Nil(t, perr, "%v", perr)
	require.Equal(t, []protocol.TaskRef{{ID: "t1", Where: "path"}}, r.Tasks)
	fwd, perr := r.ForwardParams()
	require.Nil(t, perr)
	require.JSONEq(t, `{"taskId":"t1","pushNotificationConfig":{"id":"c1","url":"https://hook"}}`, string(fwd), "name is not a 0.3 JSON-RPC field")

	for name, b := range map[string]string{
		"another task":   `{"name":"tasks/t2/pushNotificationConfigs/c1","pushNotificationConfig":{"id":"c1","url":"https://hook"}}`,
		"another config": `{"name":"tasks/t1/pushNotificationConfigs/c2","pushNotificationConfig":{"id":"c1","url":"https://hook"}}`,
		"not a name":     `{"name":"t1","pushNotificationConfig":{"url":"https://hook"}}`,
		// The bare config shape (a2a-go's 0.3 REST) has no name; a ProtoJSON reader takes the
		// task from it all the same.
		"name beside a bare config": `{"name":"tasks/t2/pushNotificationConfigs/c1","url":"https://hook"}`,
		"its own name, bare":        `{"name":"tasks/t1/pushNotificationConfigs/c1","id":"c1","url":"https://hook"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, perr := ParseHTTP(protocol.V03, "POST", "/v1/tasks/t1/pushNotificationConfigs", "application/json", []byte(b), protocol.Limits{})
			require.NotNil(t, perr)
			require.Equal(t, protocol.InvalidParams, perr.Code)
		})
	}
}

// TestProtoJSON03PushRequest: the whole CreateTaskPushNotificationConfigRequest as the body (the
// 0.3 Python SDK's server reads it so; the 0.3 TCK sends it, proto or JSON names) is read as its
// config; its parent must be the path's task, its configId the config's id, and nothing else may
// stand beside them.
func TestProtoJSON03PushRequest(t *testing.T) {
	for _, body := range []string{
		`{"parent":"tasks/t1","config_id":"c1","config":{"name":"tasks/t1/pushNotificationConfigs/c1","push_notification_config":{"id":"c1","url":"https://hook","token":"","authentication":{}}}}`,
		`{"parent":"tasks/t1","configId":"c1","config":{"pushNotificationConfig":{"id":"c1","url":"https://hook"}}}`,
		`{"config":{"pushNotificationConfig":{"url":"https://hook"}}}`,
	} {
		r, perr := ParseHTTP(protocol.V03, "POST", "/v1/tasks/t1/pushNotificationConfigs", "application/json", []byte(body), protocol.Limits{})
		require.Nil(t, perr, "%s: %v", body, perr)
		require.Equal(t, []protocol.TaskRef{{ID: "t1", Where: "path"}}, r.Tasks)
		require.Equal(t, []string{"https://hook"}, []string{r.Push[0].URL})
		fwd, perr := r.ForwardParams()
		require.Nil(t, perr)
		require.Contains(t, string(fwd), `"taskId":"t1"`)
		require.NotContains(t, string(fwd), "parent")
	}
	for name, b := range map[string]string{
		"another task's parent": `{"parent":"tasks/t2","config":{"pushNotificationConfig":{"url":"https://hook"}}}`,
		"another config id":     `{"configId":"c2","config":{"pushNotificationConfig":{"id":"c1","url":"https://hook"}}}`,
		"a member beside":       `{"taskId":"t1","config":{"pushNotificationConfig":{"url":"https://hook"}}}`,
		"config not an object":  `{"config":"https://hook"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, perr := ParseHTTP(protocol.V03, "POST", "/v1/tasks/t1/pushNotificationConfigs", "application/json", []byte(b), protocol.Limits{})
			require.NotNil(t, perr)
			require.Equal(t, protocol.InvalidParams, perr.Code)
		})
	}
}

// TestHistoryLengthProtoName: GET /v1/tasks/{id} takes history_length (the proto field's own
// name, as HTTP transcoding does) beside historyLength; both at once name one field twice.
func TestHistoryLengthProtoName(t *testing.T) {
	for _, q := range []string{"historyLength=2", "history_length=2"} {
		r, perr := ParseHTTP(protocol.V03, "GET", "/v1/tasks/t1?"+q, "", nil, protocol.Limits{})
		require.Nil(t, perr, "%s: %v", q, perr)
		require.JSONEq(t, `{"historyLength":2}`, string(r.Params))
	}
	_, perr := ParseHTTP(protocol.V03, "GET", "/v1/tasks/t1?historyLength=2&history_length=3", "", nil, protocol.Limits{})
	require.NotNil(t, perr)
}

func TestProtoJSON03Response(t *testing.T) {
	task := `{"kind":"task","id":"t1","contextId":"c1","status":{"state":"canceled","message":{"kind":"message","messageId":"m2","role":"agent",` +
		`"parts":[{"kind":"text","text":"bye"}]}},"artifacts":[{"artifactId":"a1","parts":[{"kind":"file","file":{"bytes":"AAEC","mimeType":"image/png"}}]}]}`
	wantTask := `{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_CANCELLED","message":{"messageId":"m2","role":"ROLE_AGENT",` +
		`"content":[{"text":"bye"}]}},"artifacts":[{"artifactId":"a1","parts":[{"file":{"fileWithBytes":"AAEC","mimeType":"image/png"}}]}]}`
	for _, tc := range []struct {
		op       protocol.Operation
		in, want string
	}{
		{protocol.SendMessage, task, `{"task":` + wantTask + `}`},
		{protocol.SendMessage, `{"kind":"message","messageId":"m3","role":"agent","parts":[{"kind":"data","data":{"a":1}}]}`,
			`{"message":{"messageId":"m3","role":"ROLE_AGENT","content":[{"data":{"data":{"a":1}}}]}}`},
		{protocol.GetTask, task, wantTask},
		{protocol.CancelTask, task, wantTask},
		{protocol.CreateTaskPushNotificationConfig, `{"taskId":"t1","pushNotificationConfig":{"id":"c1","url":"https://hook"}}`,
			`{"name":"tasks/t1/pushNotificationConfigs/c1","pushNotificationConfig":{"id":"c1","url":"https://hook"}}`},
		{protocol.ListTaskPushNotificationConfigs, `[{"taskId":"t1","pushNotificationConfig":{"id":"c1","url":"https://hook"}}]`,
			`{"configs":[{"name":"tasks/t1/pushNotificationConfigs/c1","pushNotificationConfig":{"id":"c1","url":"https://hook"}}]}`},
		{protocol.ListTaskPushNotificationConfigs, `null`, `{}`},
		{protocol.DeleteTaskPushNotificationConfig, `{}`, `{}`},
		{protocol.GetExtendedAgentCard, `{"name":"x"}`, `{"name":"x"}`},
	} {
		t.Run(string(tc.op), func(t *testing.T) {
			got, perr := ProtoJSON03Response(tc.op, []byte(tc.in))
			require.Nil(t, perr, "%v", perr)
			require.JSONEq(t, tc.want, string(got))
		})
	}
	for _, bad := range []string{`[1]`, `{"kind":"task","id":"t1","contextId":"c1","status":{"state":"completed"},` +
		`"artifacts":[{"artifactId":"a1","parts":[{"kind":"file","file":{"bytes":"not base64!"}}]}]}`} {
		_, perr := ProtoJSON03Response(protocol.GetTask, []byte(bad))
		require.NotNil(t, perr, bad)
		require.Equal(t, protocol.InvalidAgentResponse, perr.Code)
	}
}

func TestProtoJSON03Event(t *testing.T) {
	got, perr := ProtoJSON03Event([]byte(`{"kind":"status-update","taskId":"t1","contextId":"c1","final":true,"status":{"state":"completed"}}`))
	require.Nil(t, perr)
	require.JSONEq(t, `{"statusUpdate":{"taskId":"t1","contextId":"c1","final":true,"status":{"state":"TASK_STATE_COMPLETED"}}}`, string(got))
	got, perr = ProtoJSON03Event([]byte(`{"kind":"artifact-update","taskId":"t1","contextId":"c1","artifact":{"artifactId":"a","parts":[{"kind":"text","text":"x"}]}}`))
	require.Nil(t, perr)
	require.JSONEq(t, `{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a","parts":[{"text":"x"}]}}}`, string(got))
	_, perr = ProtoJSON03Event([]byte(`{"kind":"nope"}`))
	require.NotNil(t, perr)
	require.Equal(t, protocol.InvalidAgentResponse, perr.Code)
}

func TestProtoJSON03Card(t *testing.T) {
	in := `{"protocolVersion":"0.3.0","name":"A","description":"d","url":"https://a.example.com","preferredTransport":"JSONRPC",` +
		`"additionalInterfaces":[{"url":"https://a.example.com","transport":"HTTP+JSON"}],"version":"1","capabilities":{"streaming":true},` +
		`"securitySchemes":{"bearer":{"type":"http","scheme":"Bearer","bearerFormat":"JWT"}},"defaultInputModes":["text/plain"],` +
		`"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}],"supportsAuthenticatedExtendedCard":true}`
	got, perr := ProtoJSON03Card([]byte(in))
	require.Nil(t, perr, "%v", perr)
	require.JSONEq(t, `{"protocolVersion":"0.3.0","name":"A","description":"d","url":"https://a.example.com","preferredTransport":"JSONRPC",`+
		`"additionalInterfaces":[{"url":"https://a.example.com","transport":"HTTP+JSON"}],"version":"1","capabilities":{"streaming":true},`+
		`"securitySchemes":{"bearer":{"httpAuthSecurityScheme":{"scheme":"Bearer","bearerFormat":"JWT"}}},"defaultInputModes":["text/plain"],`+
		`"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}],"supportsAuthenticatedExtendedCard":true}`, string(got))
}

// TestSendFieldsOfTheOtherShapeRefused: a SendMessage body in one shape that carries a field
// under the name another shape gives it is refused, on every binding and version: the 0.3
// ProtoJSON reader of @a2a-js/sdk's legacy HTTP+JSON server reads configuration.pushNotification
// (or push_notification) and request (when message is absent) from any body, and behind
// ext_authz it reads the client's own bytes — a webhook or task it read there was never checked.
func TestSendFieldsOfTheOtherShapeRefused(t *testing.T) {
	msg03 := `{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}`
	msg10 := `{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}`
	extras := map[string]string{
		"pushNotification":           `"configuration":{"pushNotification":{"url":"https://evil.example.net/h"}}`,
		"push_notification":          `"configuration":{"push_notification":{"url":"https://evil.example.net/h"}}`,
		"request beside message":     `"request":{"messageId":"m2","taskId":"other","content":[{"text":"hi"}]}`,
		"Request (folded) beside it": `"Request":{"messageId":"m2","taskId":"other"}`,
	}
	for name, extra := range extras {
		for _, tc := range []struct {
			shape  string
			parse  func(body string) *protocol.Error
			params string
		}{
			{"0.3 /v1", func(b string) *protocol.Error {
				_, perr := ParseHTTP(protocol.V03, "POST", "/v1/message:send", "application/json", []byte(b), protocol.Limits{})
				return perr
			}, `{"message":` + msg03 + `,` + extra + `}`},
			{"0.3 un-prefixed", func(b string) *protocol.Error {
				_, perr := ParseHTTP(protocol.V03, "POST", "/message:send", "application/json", []byte(b), protocol.Limits{})
				return perr
			}, `{"message":` + msg03 + `,` + extra + `}`},
			{"0.3 JSON-RPC", func(b string) *protocol.Error {
				_, perr := jsonrpcwire.ParseJSONRPC(protocol.V03, "application/json", []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":`+b+`}`), protocol.Limits{})
				return perr
			}, `{"message":` + msg03 + `,` + extra + `}`},
			{"1.0 HTTP+JSON", func(b string) *protocol.Error {
				_, perr := ParseHTTP(protocol.V1, "POST", "/message:send", "application/json", []byte(b), protocol.Limits{})
				return perr
			}, `{"message":` + msg10 + `,` + extra + `}`},
			{"1.0 JSON-RPC", func(b string) *protocol.Error {
				_, perr := jsonrpcwire.ParseJSONRPC(protocol.V1, "application/json", []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":`+b+`}`), protocol.Limits{})
				return perr
			}, `{"message":` + msg10 + `,` + extra + `}`},
		} {
			t.Run(name+"/"+tc.shape, func(t *testing.T) {
				perr := tc.parse(tc.params)
				require.NotNil(t, perr, "a field another shape reads was not read or refused")
				require.Equal(t, protocol.InvalidParams, perr.Code, perr.Message)
			})
		}
	}
}

// TestSkillHintAlias03: in A2A 0.3, metadata.skill_id is an alias of metadata.skillId (a2a-go
// v2's 0.3 REST client snake-cases metadata keys), in the request's and the message's metadata,
// on 0.3 HTTP+JSON and 0.3 JSON-RPC; a 1.0 request has no alias; both spellings in one object
// are refused as a duplicate key.
func TestSkillHintAlias03(t *testing.T) {
	send := func(t *testing.T, v protocol.Version, reqMeta, msgMeta string) (*protocol.Request, *protocol.Error) {
		t.Helper()
		msg := `{"messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]` + msgMeta + `}`
		if v == protocol.V1 {
			msg = `{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]` + msgMeta + `}`
		}
		return ParseHTTP(v, "POST", "/message:send", "application/json", []byte(`{"message":`+msg+reqMeta+`}`), protocol.Limits{})
	}
	for _, tc := range []struct {
		name             string
		v                protocol.Version
		reqMeta, msgMeta string
		hint             string
		refused          string
	}{
		{"0.3 request metadata", protocol.V03, `,"metadata":{"skill_id":"lookup-invoice"}`, "", "lookup-invoice", ""},
		{"0.3 message metadata", protocol.V03, "", `,"metadata":{"skill_id":"lookup-invoice"}`, "lookup-invoice", ""},
		{"0.3 both spellings", protocol.V03, `,"metadata":{"skillId":"a","skill_id":"a"}`, "", "",
			`duplicate object key "skill_id" (same field as "skillId")`},
		{"0.3 alias not a string", protocol.V03, `,"metadata":{"skill_id":7}`, "", "", "metadata.skill_id must be a string"},
		{"0.3 alias null", protocol.V03, `,"metadata":{"skill_id":null}`, "", "", ""},
		{"1.0 has no alias", protocol.V1, `,"metadata":{"skill_id":"lookup-invoice"}`, "", "", ""},
		{"1.0 skillId", protocol.V1, `,"metadata":{"skillId":"lookup-invoice"}`, "", "lookup-invoice", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, perr := send(t, tc.v, tc.reqMeta, tc.msgMeta)
			if tc.refused != "" {
				require.NotNil(t, perr)
				require.Equal(t, tc.refused, perr.Message)
				return
			}
			require.Nil(t, perr, "%v", perr)
			require.Equal(t, tc.hint, r.Message.SkillHint)
		})
	}
	// The same on 0.3 JSON-RPC.
	r, perr := jsonrpcwire.ParseJSONRPC(protocol.V03, "application/json", []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":`+
		`{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"skill_id":"s"}}}}`), protocol.Limits{})
	require.Nil(t, perr, "%v", perr)
	require.Equal(t, "s", r.Message.SkillHint)
}
