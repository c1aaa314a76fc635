package httpjsonwire

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

func TestParseHTTPAccepts(t *testing.T) {
	send10 := `{"message":{"messageId":"m1","taskId":"t1","parts":[{"text":"hi"},{"url":"https://x/a.pdf","mediaType":"application/pdf"}]},"metadata":{"skillId":"s"}}`
	tests := []struct {
		name   string
		v      protocol.Version
		method string
		target string
		body   string
		op     protocol.Operation
		route  string
		tenant string
		task   string
		config string
		msg    *protocol.MessageInfo
	}{
		{name: "send", v: protocol.V1, method: "POST", target: "/message:send", body: send10, op: protocol.SendMessage, route: "POST /message:send", task: "t1",
			msg: &protocol.MessageInfo{MessageID: "m1", TaskID: "t1", SkillHint: "s", Parts: []protocol.PartInfo{{Kind: protocol.PartText, MediaType: "text/plain", Text: "hi"}, {Kind: protocol.PartURL, MediaType: "application/pdf"}}}},
		{name: "send tenant", v: protocol.V1, method: "POST", target: "/acme/message:send", body: `{"tenant":"acme","message":{"messageId":"m1","parts":[{"text":"hi"}]}}`,
			op: protocol.SendMessage, route: "POST /{tenant}/message:send", tenant: "acme", msg: &protocol.MessageInfo{MessageID: "m1", Parts: []protocol.PartInfo{{Kind: protocol.PartText, MediaType: "text/plain", Text: "hi"}}}},
		{name: "stream", v: protocol.V1, method: "POST", target: "/message:stream", body: `{"message":{"messageId":"m1","parts":[{"data":{}}]}}`,
			op: protocol.SendStreamingMessage, route: "POST /message:stream", msg: &protocol.MessageInfo{MessageID: "m1", Parts: []protocol.PartInfo{{Kind: protocol.PartData, MediaType: "application/json", Data: jsontext.Value(`{}`)}}}},
		{name: "get task", v: protocol.V1, method: "GET", target: "/tasks/t1?historyLength=2", op: protocol.GetTask, route: "GET /tasks/{id}", task: "t1"},
		{name: "get task escaped id", v: protocol.V1, method: "GET", target: "/tasks/a%20b", op: protocol.GetTask, route: "GET /tasks/{id}", task: "a b"},
		{name: "get task tenant", v: protocol.V1, method: "GET", target: "/acme/tasks/t1", op: protocol.GetTask, route: "GET /{tenant}/tasks/{id}", tenant: "acme", task: "t1"},
		{name: "list tasks", v: protocol.V1, method: "GET", target: "/tasks?pageSize=10&contextId=c", op: protocol.ListTasks, route: "GET /tasks"},
		{name: "list tasks tenant", v: protocol.V1, method: "GET", target: "/t_1.x-y/tasks", op: protocol.ListTasks, route: "GET /{tenant}/tasks", tenant: "t_1.x-y"},
		{name: "cancel", v: protocol.V1, method: "POST", target: "/tasks/t1:cancel", op: protocol.CancelTask, route: "POST /tasks/{id}:cancel", task: "t1"},
		{name: "cancel with body", v: protocol.V1, method: "POST", target: "/acme/tasks/t1:cancel", body: `{"id":"t1","tenant":"acme","metadata":{}}`, op: protocol.CancelTask, route: "POST /{tenant}/tasks/{id}:cancel", tenant: "acme", task: "t1"},
		{name: "subscribe GET", v: protocol.V1, method: "GET", target: "/tasks/t1:subscribe", op: protocol.SubscribeToTask, route: "GET /tasks/{id}:subscribe", task: "t1"},
		{name: "subscribe POST", v: protocol.V1, method: "POST", target: "/tasks/t1:subscribe", op: protocol.SubscribeToTask, route: "POST /tasks/{id}:subscribe", task: "t1"},
		{name: "push create", v: protocol.V1, method: "POST", target: "/tasks/t1/pushNotificationConfigs", body: `{"taskId":"t1","url":"https://hook","id":"c1"}`,
			op: protocol.CreateTaskPushNotificationConfig, route: "POST /tasks/{taskId}/pushNotificationConfigs", task: "t1", config: "c1"},
		{name: "push list", v: protocol.V1, method: "GET", target: "/tasks/t1/pushNotificationConfigs", op: protocol.ListTaskPushNotificationConfigs, route: "GET /tasks/{taskId}/pushNotificationConfigs", task: "t1"},
		{name: "push get", v: protocol.V1, method: "GET", target: "/tasks/t1/pushNotificationConfigs/c1", op: protocol.GetTaskPushNotificationConfig, route: "GET /tasks/{taskId}/pushNotificationConfigs/{id}", task: "t1", config: "c1"},
		{name: "push delete tenant", v: protocol.V1, method: "DELETE", target: "/acme/tasks/t1/pushNotificationConfigs/c1", op: protocol.DeleteTaskPushNotificationConfig, route: "DELETE /{tenant}/tasks/{taskId}/pushNotificationConfigs/{id}", tenant: "acme", task: "t1", config: "c1"},
		{name: "extended card", v: protocol.V1, method: "GET", target: "/extendedAgentCard", op: protocol.GetExtendedAgentCard, route: "GET /extendedAgentCard"},
		{name: "extended card tenant", v: protocol.V1, method: "GET", target: "/acme/extendedAgentCard", op: protocol.GetExtendedAgentCard, route: "GET /{tenant}/extendedAgentCard", tenant: "acme"},
		{name: "public card", v: protocol.V1, method: "GET", target: "/.well-known/agent-card.json", op: protocol.GetAgentCard, route: "GET /.well-known/agent-card.json"},
		{name: "public card HEAD", v: protocol.V03, method: "HEAD", target: "/.well-known/agent-card.json", op: protocol.GetAgentCard, route: "HEAD /.well-known/agent-card.json"},
		{name: "ambiguous tasks/tasks is a task", v: protocol.V1, method: "GET", target: "/tasks/tasks", op: protocol.GetTask, route: "GET /tasks/{id}", task: "tasks"},
		{name: "0.3 send", v: protocol.V03, method: "POST", target: "/message:send", body: `{"message":{"kind":"message","message_id":"m1","parts":[{"kind":"file","file":{"mime_type":"image/png","uri":"https://x"}}]},"configuration":{"accepted_output_modes":["text/plain"]}}`,
			op: protocol.SendMessage, route: "POST /message:send", msg: &protocol.MessageInfo{MessageID: "m1", AcceptedOutputModes: []string{"text/plain"}, Parts: []protocol.PartInfo{{Kind: protocol.PartURL, MediaType: "image/png"}}}},
		{name: "0.3 v1 send", v: protocol.V03, method: "POST", target: "/v1/message:send", body: msg03, op: protocol.SendMessage, route: "POST /v1/message:send",
			msg: &protocol.MessageInfo{MessageID: "m1", Parts: []protocol.PartInfo{{Kind: protocol.PartText, MediaType: "text/plain", Text: "hi"}}}},
		{name: "0.3 v1 get task", v: protocol.V03, method: "GET", target: "/v1/tasks/t1", op: protocol.GetTask, route: "GET /v1/tasks/{id}", task: "t1"},
		{name: "0.3 v1 subscribe", v: protocol.V03, method: "POST", target: "/v1/tasks/t1:subscribe", op: protocol.SubscribeToTask, route: "POST /v1/tasks/{id}:subscribe", task: "t1"},
		{name: "0.3 v1 card", v: protocol.V03, method: "GET", target: "/v1/card", op: protocol.GetExtendedAgentCard, route: "GET /v1/card"},
		{name: "0.3 push create body is config", v: protocol.V03, method: "POST", target: "/tasks/t1/pushNotificationConfigs", body: `{"url":"https://hook","id":"c1"}`,
			op: protocol.CreateTaskPushNotificationConfig, route: "POST /tasks/{taskId}/pushNotificationConfigs", task: "t1", config: "c1"},
		{name: "1.0 tenant named v1", v: protocol.V1, method: "GET", target: "/v1/tasks/t1", op: protocol.GetTask, route: "GET /{tenant}/tasks/{id}", tenant: "v1", task: "t1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseHTTP(tc.v, tc.method, tc.target, ctJSON, []byte(tc.body), protocol.Limits{})
			require.Nil(t, err)
			require.Equal(t, protocol.HTTPJSON, r.Binding)
			require.Equal(t, tc.v, r.Version)
			require.Equal(t, tc.op, r.Operation)
			require.Equal(t, tc.route, r.Method)
			require.Equal(t, tc.tenant, r.Tenant)
			require.Equal(t, tc.task, r.TaskID)
			require.Equal(t, tc.config, r.ConfigID)
			require.Equal(t, tc.msg, r.Message)
			require.Nil(t, r.ID)
			if _, q, ok := strings.Cut(tc.target, "?"); ok && tc.body == "" {
				// The query stands for params: the same fields, typed.
				require.NotNil(t, r.Params, q)
				require.True(t, r.Params.IsValid())
			} else if tc.body == "" {
				require.Nil(t, r.Params)
			} else {
				require.JSONEq(t, tc.body, string(r.Params))
			}
		})
	}
}

func TestParseHTTPRejects(t *testing.T) {
	tests := []struct {
		name   string
		v      protocol.Version
		method string
		target string
		ct     string
		body   string
		lim    protocol.Limits
		code   protocol.Code
		status int
		msg    string
	}{
		{name: "unknown route", method: "GET", target: "/admin", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/admin"`},
		{name: "root", method: "GET", target: "/", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/"`},
		{name: "no leading slash", method: "GET", target: "tasks", code: protocol.NotFound, status: 404, msg: `no A2A route matches "tasks"`},
		{name: "trailing slash", method: "GET", target: "/tasks/", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/tasks/"`},
		{name: "double slash", method: "GET", target: "//tasks", code: protocol.NotFound, status: 404, msg: `no A2A route matches "//tasks"`},
		{name: "dotdot tenant", method: "GET", target: "/../tasks/x", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/../tasks/x"`},
		{name: "encoded dotdot tenant", method: "GET", target: "/%2e%2e/tasks/x", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/%2e%2e/tasks/x"`},
		{name: "dot tenant", method: "GET", target: "/./tasks", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/./tasks"`},
		{name: "encoded slash tenant", method: "GET", target: "/a%2Fb/tasks", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/a%2Fb/tasks"`},
		{name: "encoded slash task id", method: "GET", target: "/tasks/a%2Fb", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/tasks/a%2Fb"`},
		{name: "dotdot task id", method: "GET", target: "/tasks/..", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/tasks/.."`},
		{name: "encoded dotdot task id", method: "GET", target: "/tasks/%2E%2E", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/tasks/%2E%2E"`},
		{name: "backslash task id", method: "GET", target: "/tasks/a%5Cb", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/tasks/a%5Cb"`},
		{name: "nul task id", method: "GET", target: "/tasks/a%00", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/tasks/a%00"`},
		{name: "bad escape", method: "GET", target: "/tasks/a%zz", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/tasks/a%zz"`},
		{name: "encoded literal", method: "POST", target: "/message%3Asend", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/message%3Asend"`},
		{name: "double verb", method: "POST", target: "/tasks/t:cancel:cancel", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/tasks/t:cancel:cancel"`},
		{name: "unknown verb", method: "POST", target: "/tasks/t:delete", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/tasks/t:delete"`},
		{name: "empty task id", method: "POST", target: "/tasks/:cancel", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/tasks/:cancel"`},
		{name: "case variant route", method: "POST", target: "/Message:send", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/Message:send"`},
		{name: "two tenants", method: "GET", target: "/a/b/tasks", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/a/b/tasks"`},
		{name: "tenant on card", method: "GET", target: "/acme/.well-known/agent-card.json", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/acme/.well-known/agent-card.json"`},
		{name: "v1 card on 1.0", v: protocol.V1, method: "GET", target: "/v1/card", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/v1/card"`},
		{name: "v1 with tenant on 0.3", v: protocol.V03, method: "GET", target: "/v1/acme/tasks", code: protocol.NotFound, status: 404, msg: `no A2A route matches "/v1/acme/tasks"`},
		{name: "GET send", method: "GET", target: "/message:send", code: protocol.MethodNotAllowed, status: 405, msg: `method "GET" is not allowed for /message:send; use POST`},
		{name: "PUT task", method: "PUT", target: "/acme/tasks/t1", code: protocol.MethodNotAllowed, status: 405, msg: `method "PUT" is not allowed for /{tenant}/tasks/{id}; use GET`},
		{name: "lowercase method", method: "get", target: "/tasks", code: protocol.MethodNotAllowed, status: 405, msg: `method "get" is not allowed for /tasks; use GET`},
		{name: "GET with body", method: "GET", target: "/tasks/t1", body: `{"id":"other"}`, code: protocol.InvalidRequest, status: 400, msg: "GET requests must not have a body"},
		{name: "wrong content type", method: "POST", target: "/message:send", ct: "text/plain", body: msg10, code: protocol.ContentTypeNotSupported, status: 415, msg: "Content-Type is not supported; use application/json"},
		{name: "form content type", method: "POST", target: "/message:send", ct: "application/x-www-form-urlencoded", body: msg10, code: protocol.ContentTypeNotSupported, status: 415, msg: "Content-Type is not supported; use application/json"},
		{name: "oversize", method: "POST", target: "/message:send", body: msg10, lim: protocol.Limits{MaxBodyBytes: 10}, code: protocol.PayloadTooLarge, status: 413, msg: "request body is larger than the limit of 10 bytes"},
		{name: "depth", method: "POST", target: "/message:send", body: `{"metadata":` + strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 101), code: protocol.InvalidRequest, status: 400, msg: "request body nests deeper than the limit of 64 levels"},
		{name: "duplicate key", method: "POST", target: "/message:send", body: `{"message":{"messageId":"m","parts":[{"text":"x"}]},"message":{}}`, code: protocol.ParseError, status: 400, msg: `duplicate object key "message"`},
		{name: "invalid json", method: "POST", target: "/message:send", body: `{"message":`, code: protocol.ParseError, status: 400, msg: "request body is not valid JSON: unexpected end of input"},
		{name: "array body", method: "POST", target: "/message:send", body: `[]`, code: protocol.InvalidRequest, status: 400, msg: "request body must be a JSON object"},
		{name: "trailing garbage", method: "POST", target: "/tasks/t:cancel", body: `{} {}`, code: protocol.ParseError, status: 400, msg: "request body has data after the JSON value"},
		{name: "send without body", method: "POST", target: "/message:send", code: protocol.InvalidParams, status: 400, msg: "message is required"},
		{name: "body tenant mismatch", method: "POST", target: "/acme/message:send", body: `{"tenant":"evil","message":{"messageId":"m","parts":[{"text":"x"}]}}`, code: protocol.InvalidParams, status: 400, msg: "tenant in the body does not match the path"},
		{name: "body id mismatch", method: "POST", target: "/tasks/t1:cancel", body: `{"id":"t2"}`, code: protocol.InvalidParams, status: 400, msg: "id in the body does not match the path"},
		{name: "body taskId mismatch", method: "POST", target: "/tasks/t1/pushNotificationConfigs", body: `{"taskId":"t2","url":"https://x"}`, code: protocol.InvalidParams, status: 400, msg: "taskId in the body does not match the path"},
		{name: "push create without url", method: "POST", target: "/tasks/t1/pushNotificationConfigs", body: `{}`, code: protocol.InvalidParams, status: 400, msg: "url is required"},
		{name: "query tenant", method: "GET", target: "/tasks/t1?tenant=other", code: protocol.InvalidRequest, status: 400, msg: `query parameter "tenant" is not allowed; the path names it`},
		{name: "query id", method: "GET", target: "/tasks/t1?ID=t2", code: protocol.InvalidRequest, status: 400, msg: `query parameter "ID" is not allowed; the path names it`},
		{name: "query task_id", method: "GET", target: "/tasks/t1/pushNotificationConfigs?task_id=t2", code: protocol.InvalidRequest, status: 400, msg: `query parameter "task_id" is not allowed; the path names it`},
		{name: "query repeated", method: "GET", target: "/tasks?pageSize=1&pageSize=2", code: protocol.InvalidRequest, status: 400, msg: `query parameter "pageSize" is repeated`},
		{name: "query malformed", method: "GET", target: "/tasks?a=%zz", code: protocol.InvalidRequest, status: 400, msg: "query string is malformed"},
		{name: "query semicolon", method: "GET", target: "/tasks?a=1;b=2", code: protocol.InvalidRequest, status: 400, msg: "query string is malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v
			if v == "" {
				v = protocol.V1
			}
			ct := tc.ct
			if ct == "" {
				ct = ctJSON
			}
			r, err := ParseHTTP(v, tc.method, tc.target, ct, []byte(tc.body), tc.lim)
			require.Nil(t, r)
			require.NotNil(t, err)
			require.Equal(t, tc.code, err.Code)
			require.Equal(t, tc.status, err.HTTPStatus())
			require.Equal(t, tc.msg, err.Message)
		})
	}
}

func TestParseHTTPMethodNotAllowedListsAllow(t *testing.T) {
	_, err := ParseHTTP(protocol.V1, http.MethodPut, "/tasks/t1/pushNotificationConfigs", ctJSON, nil, protocol.Limits{})
	require.NotNil(t, err)
	require.Equal(t, "POST, GET", err.Metadata["allow"])
}

func TestNegotiateExtensions(t *testing.T) {
	declared := []protocol.Extension{{URI: "https://ext/a"}, {URI: "https://ext/b", Required: true}, {URI: "https://ext/c", Required: true}}
	tests := []struct {
		name    string
		header  []string
		decl    []protocol.Extension
		want    []string
		missing string
	}{
		{name: "none declared", header: []string{"https://ext/x"}, decl: nil, want: nil},
		{name: "all required present", header: []string{"https://ext/c, https://ext/b"}, decl: declared, want: []string{"https://ext/b", "https://ext/c"}},
		{name: "repeated header and unknown", header: []string{"https://ext/c", " https://ext/x ,https://ext/a", "https://ext/b,https://ext/b"}, decl: declared, want: []string{"https://ext/a", "https://ext/b", "https://ext/c"}},
		{name: "one required missing", header: []string{"https://ext/b"}, decl: declared, missing: "https://ext/c"},
		{name: "no header", header: nil, decl: declared, missing: "https://ext/b,https://ext/c"},
		{name: "case differs", header: []string{"HTTPS://ext/b,https://ext/c"}, decl: declared, missing: "https://ext/b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.NegotiateExtensions(tc.header, tc.decl)
			if tc.missing != "" {
				require.Nil(t, got)
				require.NotNil(t, err)
				require.Equal(t, protocol.ExtensionSupportRequired, err.Code)
				require.Equal(t, -32008, err.JSONRPCCode())
				require.Equal(t, tc.missing, err.Metadata["extensions"])
				require.Equal(t, "the agent requires extensions the request did not activate: "+
					strings.ReplaceAll(tc.missing, ",", ", ")+"; send them in A2A-Extensions", err.Message)
				return
			}
			require.Nil(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestMethodName(t *testing.T) {
	require.Equal(t, "SendMessage", protocol.MethodName(protocol.V1, protocol.SendMessage))
	require.Equal(t, "message/send", protocol.MethodName(protocol.V03, protocol.SendMessage))
	require.Equal(t, "tasks/resubscribe", protocol.MethodName(protocol.V03, protocol.SubscribeToTask))
	require.Equal(t, "", protocol.MethodName(protocol.V1, protocol.GetAgentCard))
	require.Equal(t, "", protocol.MethodName(protocol.V03, protocol.ListTasks))
}

// TestHTTPCallRoundTrips: the request capgate builds for each operation is
// the one the same table parses back, with its ids and tenant.
func TestHTTPCallRoundTrips(t *testing.T) {
	ops := map[protocol.Operation]bool{}
	for _, r := range httpRoutes {
		ops[r.op] = true
	}
	require.Len(t, ops, 11)
	for op := range ops {
		for _, tenant := range []string{"", "acme"} {
			method, path, ok := HTTPCall(op, tenant, "t 1", "c-1")
			require.True(t, ok, op)
			rt, gotTenant, perr := matchRoute(protocol.V1, path)
			require.Nil(t, perr, path)
			require.Equal(t, tenant, gotTenant)
			i := slices.Index(rt.methods, method)
			require.GreaterOrEqual(t, i, 0, "%s %s", method, path)
			require.Equal(t, op, rt.ops[i], path)
			switch op {
			case protocol.GetTask, protocol.CancelTask, protocol.SubscribeToTask, protocol.CreateTaskPushNotificationConfig, protocol.ListTaskPushNotificationConfigs:
				require.Equal(t, "t 1", rt.taskID, path)
			case protocol.GetTaskPushNotificationConfig, protocol.DeleteTaskPushNotificationConfig:
				require.Equal(t, "t 1", rt.taskID, path)
				require.Equal(t, "c-1", rt.configID, path)
			}
		}
	}
	_, _, ok := HTTPCall(protocol.GetTask, "", "a/b", "")
	require.False(t, ok)
	_, _, ok = HTTPCall(protocol.GetTask, "bad tenant", "t", "")
	require.False(t, ok)
	_, _, ok = HTTPCall(protocol.GetAgentCard, "", "", "")
	require.False(t, ok)
	method, path, _ := HTTPCall(protocol.SubscribeToTask, "", "t", "")
	require.Equal(t, "POST /tasks/t:subscribe", method+" "+path)
	require.Empty(t, HTTPQueryFields(protocol.SendMessage))
	require.Equal(t, []string{"contextId", "historyLength", "includeArtifacts", "pageSize", "pageToken", "status", "statusTimestampAfter"}, HTTPQueryFields(protocol.ListTasks))
}

func TestCodeOfReason(t *testing.T) {
	for _, c := range []protocol.Code{protocol.TaskNotFound, protocol.Internal, protocol.Unauthorized, protocol.VersionNotSupported, protocol.InvalidParams} {
		got, ok := protocol.CodeOfReason(string(c))
		require.True(t, ok, c)
		require.Equal(t, c, got)
	}
	for _, r := range []string{"NOT_FOUND", "METHOD_NOT_ALLOWED", "", "task_not_found"} {
		_, ok := protocol.CodeOfReason(r)
		require.False(t, ok, r)
	}
}

// BenchmarkParseHTTP is an HTTP+JSON SendMessage read and its params built for the handler, as
// the gateway does per routed message (test/loadgen's body).
func BenchmarkParseHTTP(b *testing.B) {
	body := []byte(`{"configuration":{"acceptedOutputModes":["application/json"]},"message":{"contextId":"ctx-caller-3",` +
		`"messageId":"loadgen-msg-00007","parts":[{"text":"what is the balance on my checking account"}],"role":"ROLE_USER"}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := ParseHTTP(protocol.V1, http.MethodPost, "/message:send", "application/json", body, protocol.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.ForwardParams(); err != nil {
			b.Fatal(err)
		}
	}
}
