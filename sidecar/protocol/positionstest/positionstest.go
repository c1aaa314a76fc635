// Package positionstest is a test-only catalogue (imported by tests alone, as net/http/httptest
// is) of every place an A2A request can name a task, a context or
// a tenant, on every binding, version and operation capgate reads, each with a request template
// that puts a value there. The parser's tests check the parser against it in both directions
// (every position is read where the catalogue says; every task or context the parser reports is
// in the catalogue), and the admission sweep (test/admission) drives both doors with every position
// and caller class from it: a position added to the parser without a template fails the first
// check, so it cannot go unswept. Each position is a target (what the operation acts on: only
// its holder is admitted) or a filter (Position.Filter: it narrows the caller's own results);
// the parser must report each as the catalogue marks it, and the sweep holds each to its rule.
package positionstest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/sidecar/protocol"
)

// Kind is what a position names.
type Kind string

// Kinds.
const (
	Task    Kind = "task"
	Context Kind = "context"
	Tenant  Kind = "tenant"
)

// Placeholders in templates. Fill replaces them.
const (
	// Swept is the value at the position under test.
	Swept = "{swept}"
	// OwnTask is the caller's own task, where the request needs another task than the swept one.
	OwnTask = "{own-task}"
	// OwnTenant is the caller's own tenant, where a tenant prefix is part of the route.
	OwnTenant = "{own-tenant}"
	// URL is an allowed push webhook URL.
	URL = "{url}"
)

// Extension method of the catalogue: a JSON-RPC method an extension adds (the finance example's).
// Its templates send the extension in A2A-Extensions; a parser must be given it (Methods).
const (
	ExtensionMethodName = "finance/explainVariance"
	ExtensionURI        = "https://example.com/ext/variance/v1"
	ExtensionCapability = "reconcile-invoice"
)

// Methods is the method table the extension method positions need.
func Methods() protocol.Methods {
	return protocol.Methods{ExtensionMethodName: {URI: ExtensionURI, Capability: ExtensionCapability}}
}

// Position is one place a request names a task, a context or a tenant, with a request template.
type Position struct {
	Binding   protocol.Binding
	Version   protocol.Version
	Operation protocol.Operation
	Kind      Kind
	// Where is the position as the parser reports it (protocol.TaskRef.Where for tasks,
	// protocol.ContextRef.Where for contexts; for tenants "path", "params.tenant", ... ).
	Where string
	// Filter marks a filter position (protocol.ContextRef.Filter): the value narrows a listing
	// of the caller's own (ListTasks' contextId) rather than naming what the operation acts on.
	// A value the caller does not hold is admitted and answers an empty page, exactly as one
	// that does not exist; every other position is a target, refused unless the caller holds it.
	Filter bool
	// MustAgree marks a position that repeats another one (a body field beside the path's,
	// a config name beside its parent): a different value there is refused as InvalidParams,
	// and with the same value the parser reports the other position.
	MustAgree bool
	// Method and Target are the HTTP method and target relative to the agent's base path
	// ("/" for JSON-RPC; the gRPC :path for gRPC). Body is the JSON-RPC request, the HTTP+JSON
	// body, or the protojson text of the gRPC request message.
	Method, Target, Body string
}

// Name is a stable name for subtests.
func (p Position) Name() string {
	return string(p.Binding) + "/" + string(p.Version) + "/" + string(p.Operation) + "/" + string(p.Kind) + ":" + p.Where
}

// Fill replaces the placeholders of s.
func Fill(s, swept, ownTask, ownTenant, url string) string {
	return strings.NewReplacer(Swept, swept, OwnTask, ownTask, OwnTenant, ownTenant, URL, url).Replace(s)
}

// All returns the catalogue.
func All() []Position {
	var out []Position
	out = append(out, jsonrpc10()...)
	out = append(out, jsonrpc03()...)
	out = append(out, rest10("")...)
	out = append(out, rest10("/"+OwnTenant)...)
	out = append(out, rest03()...)
	out = append(out, grpc10()...)
	out = append(out, grpc03()...)
	out = append(out, extensionMethods()...)
	return out
}

// extensionMethods lists the positions of a method an extension adds: params.taskId and
// params.referenceTaskIds name tasks, params.contextId a context, params.tenant (1.0) the tenant.
func extensionMethods() []Position {
	var out []Position
	for _, v := range []protocol.Version{protocol.V1, protocol.V03} {
		add := func(k Kind, where, params string) {
			out = append(out, Position{Binding: protocol.JSONRPC, Version: v, Operation: protocol.ExtensionMethod, Kind: k, Where: where,
				Method: "POST", Target: "/", Body: `{"jsonrpc":"2.0","id":1,"method":"` + ExtensionMethodName + `","params":` + params + `}`})
		}
		add(Task, "params.taskId", `{"taskId":"`+Swept+`"}`)
		add(Task, "params.referenceTaskIds[0]", `{"referenceTaskIds":["`+Swept+`"]}`)
		add(Context, "params.contextId", `{"contextId":"`+Swept+`"}`)
		if v == protocol.V1 {
			add(Tenant, "params.tenant", `{"tenant":"`+Swept+`","taskId":"`+OwnTask+`"}`)
		}
	}
	return out
}

// Message bodies of each version, with a task id slot.
const (
	msg10 = `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"look up invoice INV-1"}]%s}`
	msg03 = `{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"look up invoice INV-1"}]%s}`
)

func msg(v protocol.Version, extra string) string {
	if v == protocol.V03 {
		return strings.Replace(msg03, "%s", extra, 1)
	}
	return strings.Replace(msg10, "%s", extra, 1)
}

func rpc(v protocol.Version, op protocol.Operation, params string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"` + protocol.MethodName(v, op) + `","params":` + params + `}`
}

// sendPositions are the task, context and tenant positions of SendMessage's params (JSON-RPC
// params and HTTP+JSON body alike). A message names its context in a new conversation, and
// beside the task it continues (which must then be in that context).
func sendPositions(v protocol.Version) []struct {
	kind          Kind
	where, params string
} {
	type pos = struct {
		kind          Kind
		where, params string
	}
	out := []pos{
		{Task, "params.message.taskId", `{"message":` + msg(v, `,"taskId":"`+Swept+`"`) + `}`},
		{Task, "params.message.referenceTaskIds[0]", `{"message":` + msg(v, `,"referenceTaskIds":["`+Swept+`"]`) + `}`},
		{Task, "params.message.referenceTaskIds[1]", `{"message":` + msg(v, `,"referenceTaskIds":["`+OwnTask+`","`+Swept+`"]`) + `}`},
		{Context, "params.message.contextId", `{"message":` + msg(v, `,"contextId":"`+Swept+`"`) + `}`},
		{Context, "params.message.contextId", `{"message":` + msg(v, `,"taskId":"`+OwnTask+`","contextId":"`+Swept+`"`) + `}`},
	}
	if v == protocol.V1 {
		out = append(out,
			pos{Task, "params.configuration.taskPushNotificationConfig.taskId",
				`{"message":` + msg(v, "") + `,"configuration":{"taskPushNotificationConfig":{"taskId":"` + Swept + `","url":"` + URL + `"}}}`},
			pos{Tenant, "params.tenant", `{"tenant":"` + Swept + `","message":` + msg(v, "") + `}`},
			pos{Tenant, "params.configuration.taskPushNotificationConfig.tenant",
				`{"message":` + msg(v, "") + `,"configuration":{"taskPushNotificationConfig":{"tenant":"` + Swept + `","taskId":"` + OwnTask + `","url":"` + URL + `"}}}`},
		)
	}
	return out
}

func jsonrpc10() []Position {
	v := protocol.V1
	var out []Position
	add := func(op protocol.Operation, k Kind, where, params string) {
		out = append(out, Position{Binding: protocol.JSONRPC, Version: v, Operation: op, Kind: k, Where: where,
			Method: "POST", Target: "/", Body: rpc(v, op, params)})
	}
	for _, op := range []protocol.Operation{protocol.SendMessage, protocol.SendStreamingMessage} {
		for _, p := range sendPositions(v) {
			add(op, p.kind, p.where, p.params)
		}
	}
	for _, op := range []protocol.Operation{protocol.GetTask, protocol.CancelTask, protocol.SubscribeToTask} {
		add(op, Task, "params.id", `{"id":"`+Swept+`"}`)
		add(op, Tenant, "params.tenant", `{"tenant":"`+Swept+`","id":"`+OwnTask+`"}`)
	}
	add(protocol.ListTasks, Tenant, "params.tenant", `{"tenant":"`+Swept+`"}`)
	out = append(out, Position{Binding: protocol.JSONRPC, Version: v, Operation: protocol.ListTasks, Kind: Context,
		Where: "params.contextId", Method: "POST", Target: "/", Filter: true, Body: rpc(v, protocol.ListTasks, `{"contextId":"`+Swept+`"}`)})
	add(protocol.GetExtendedAgentCard, Tenant, "params.tenant", `{"tenant":"`+Swept+`"}`)
	add(protocol.CreateTaskPushNotificationConfig, Task, "params.taskId", `{"taskId":"`+Swept+`","url":"`+URL+`"}`)
	add(protocol.CreateTaskPushNotificationConfig, Tenant, "params.tenant", `{"tenant":"`+Swept+`","taskId":"`+OwnTask+`","url":"`+URL+`"}`)
	for _, op := range []protocol.Operation{protocol.GetTaskPushNotificationConfig, protocol.DeleteTaskPushNotificationConfig} {
		add(op, Task, "params.taskId", `{"taskId":"`+Swept+`","id":"c-1"}`)
		add(op, Tenant, "params.tenant", `{"tenant":"`+Swept+`","taskId":"`+OwnTask+`","id":"c-1"}`)
	}
	add(protocol.ListTaskPushNotificationConfigs, Task, "params.taskId", `{"taskId":"`+Swept+`"}`)
	add(protocol.ListTaskPushNotificationConfigs, Tenant, "params.tenant", `{"tenant":"`+Swept+`","taskId":"`+OwnTask+`"}`)
	return out
}

func jsonrpc03() []Position {
	v := protocol.V03
	var out []Position
	addKind := func(op protocol.Operation, k Kind, where, params string) {
		out = append(out, Position{Binding: protocol.JSONRPC, Version: v, Operation: op, Kind: k, Where: where,
			Method: "POST", Target: "/", Body: rpc(v, op, params)})
	}
	add := func(op protocol.Operation, where, params string) { addKind(op, Task, where, params) }
	for _, op := range []protocol.Operation{protocol.SendMessage, protocol.SendStreamingMessage} {
		for _, p := range sendPositions(v) {
			addKind(op, p.kind, p.where, p.params)
		}
	}
	for _, op := range []protocol.Operation{protocol.GetTask, protocol.CancelTask, protocol.SubscribeToTask} {
		add(op, "params.id", `{"id":"`+Swept+`"}`)
	}
	add(protocol.CreateTaskPushNotificationConfig, "params.taskId", `{"taskId":"`+Swept+`","pushNotificationConfig":{"url":"`+URL+`"}}`)
	add(protocol.GetTaskPushNotificationConfig, "params.id", `{"id":"`+Swept+`","pushNotificationConfigId":"c-1"}`)
	add(protocol.DeleteTaskPushNotificationConfig, "params.id", `{"id":"`+Swept+`","pushNotificationConfigId":"c-1"}`)
	add(protocol.ListTaskPushNotificationConfigs, "params.id", `{"id":"`+Swept+`"}`)
	return out
}

// rest10 lists the HTTP+JSON 1.0 positions under prefix ("" or a tenant prefix).
func rest10(prefix string) []Position {
	v := protocol.V1
	var out []Position
	add := func(op protocol.Operation, k Kind, where, method, target, body string, agree bool) {
		out = append(out, Position{Binding: protocol.HTTPJSON, Version: v, Operation: op, Kind: k, Where: where,
			MustAgree: agree, Method: method, Target: target, Body: body})
	}
	send := map[protocol.Operation]string{protocol.SendMessage: "/message:send", protocol.SendStreamingMessage: "/message:stream"}
	for _, op := range []protocol.Operation{protocol.SendMessage, protocol.SendStreamingMessage} {
		for _, p := range sendPositions(v) {
			if prefix != "" && p.kind == Tenant {
				continue // the tenant positions of the body are swept without a prefix
			}
			add(op, p.kind, p.where, "POST", prefix+send[op], p.params, false)
		}
	}
	task := []struct {
		op             protocol.Operation
		method, suffix string
	}{
		{protocol.GetTask, "GET", ""}, {protocol.CancelTask, "POST", ":cancel"},
		{protocol.SubscribeToTask, "GET", ":subscribe"}, {protocol.SubscribeToTask, "POST", ":subscribe"},
	}
	for _, tc := range task {
		add(tc.op, Task, "path", tc.method, prefix+"/tasks/"+Swept+tc.suffix, "", false)
	}
	push := prefix + "/tasks/" + Swept + "/pushNotificationConfigs"
	add(protocol.CreateTaskPushNotificationConfig, Task, "path", "POST", push, `{"url":"`+URL+`"}`, false)
	add(protocol.CreateTaskPushNotificationConfig, Task, "params.taskId", "POST", prefix+"/tasks/"+OwnTask+"/pushNotificationConfigs",
		`{"taskId":"`+Swept+`","url":"`+URL+`"}`, true)
	add(protocol.ListTaskPushNotificationConfigs, Task, "path", "GET", push, "", false)
	out = append(out, Position{Binding: protocol.HTTPJSON, Version: v, Operation: protocol.ListTasks, Kind: Context,
		Where: "params.contextId", Method: "GET", Filter: true, Target: prefix + "/tasks?contextId=" + Swept})
	add(protocol.GetTaskPushNotificationConfig, Task, "path", "GET", push+"/c-1", "", false)
	add(protocol.DeleteTaskPushNotificationConfig, Task, "path", "DELETE", push+"/c-1", "", false)
	if prefix == "" {
		// The tenant prefix of every route, and the body's tenant beside it.
		own := "/tasks/" + OwnTask
		for _, r := range []struct {
			op             protocol.Operation
			method, target string
			body           string
		}{
			{protocol.SendMessage, "POST", "/message:send", `{"message":` + msg(v, "") + `}`},
			{protocol.SendStreamingMessage, "POST", "/message:stream", `{"message":` + msg(v, "") + `}`},
			{protocol.GetTask, "GET", own, ""},
			{protocol.CancelTask, "POST", own + ":cancel", ""},
			{protocol.SubscribeToTask, "GET", own + ":subscribe", ""},
			{protocol.ListTasks, "GET", "/tasks", ""},
			{protocol.GetExtendedAgentCard, "GET", "/extendedAgentCard", ""},
			{protocol.CreateTaskPushNotificationConfig, "POST", own + "/pushNotificationConfigs", `{"url":"` + URL + `"}`},
			{protocol.ListTaskPushNotificationConfigs, "GET", own + "/pushNotificationConfigs", ""},
			{protocol.GetTaskPushNotificationConfig, "GET", own + "/pushNotificationConfigs/c-1", ""},
			{protocol.DeleteTaskPushNotificationConfig, "DELETE", own + "/pushNotificationConfigs/c-1", ""},
		} {
			add(r.op, Tenant, "path", r.method, "/"+Swept+r.target, r.body, false)
		}
		add(protocol.SendMessage, Tenant, "params.tenant", "POST", "/"+OwnTenant+"/message:send",
			`{"tenant":"`+Swept+`","message":`+msg(v, "")+`}`, true)
		add(protocol.CreateTaskPushNotificationConfig, Tenant, "params.tenant", "POST", "/"+OwnTenant+own+"/pushNotificationConfigs",
			`{"tenant":"`+Swept+`","url":"`+URL+`"}`, true)
	}
	return out
}

func rest03() []Position {
	v := protocol.V03
	var out []Position
	addKind := func(op protocol.Operation, k Kind, where, method, target, body string, agree bool) {
		out = append(out, Position{Binding: protocol.HTTPJSON, Version: v, Operation: op, Kind: k, Where: where,
			MustAgree: agree, Method: method, Target: target, Body: body})
	}
	add := func(op protocol.Operation, where, method, target, body string, agree bool) {
		addKind(op, Task, where, method, target, body, agree)
	}
	for _, base := range []string{"/v1", ""} { // the 0.3 /v1 routes, and the 1.0 routes 0.3 clients also use
		for _, p := range sendPositions(v) {
			addKind(protocol.SendMessage, p.kind, p.where, "POST", base+"/message:send", p.params, false)
			addKind(protocol.SendStreamingMessage, p.kind, p.where, "POST", base+"/message:stream", p.params, false)
		}
		t := base + "/tasks/" + Swept
		add(protocol.GetTask, "path", "GET", t, "", false)
		add(protocol.CancelTask, "path", "POST", t+":cancel", "", false)
		add(protocol.SubscribeToTask, "path", "GET", t+":subscribe", "", false)
		add(protocol.SubscribeToTask, "path", "POST", t+":subscribe", "", false)
		// The 0.3 proto's CancelTaskRequest and TaskSubscriptionRequest name the task in the
		// body too (name "tasks/{id}", what the 0.3 Python client sends): it must be the path's.
		ownTask := base + "/tasks/" + OwnTask
		add(protocol.CancelTask, "params.name", "POST", ownTask+":cancel", `{"name":"tasks/`+Swept+`"}`, true)
		add(protocol.SubscribeToTask, "params.name", "POST", ownTask+":subscribe", `{"name":"tasks/`+Swept+`"}`, true)
		add(protocol.CreateTaskPushNotificationConfig, "path", "POST", t+"/pushNotificationConfigs", `{"url":"`+URL+`"}`, false)
		own := base + "/tasks/" + OwnTask + "/pushNotificationConfigs"
		// A taskId in the body, in the config's shape or 0.3's JSON-RPC shape, must be the path's.
		add(protocol.CreateTaskPushNotificationConfig, "params.taskId", "POST", own, `{"taskId":"`+Swept+`","url":"`+URL+`"}`, true)
		add(protocol.CreateTaskPushNotificationConfig, "params.taskId", "POST", own,
			`{"taskId":"`+Swept+`","pushNotificationConfig":{"url":"`+URL+`"}}`, true)
		// The 0.3 ProtoJSON form of a TaskPushNotificationConfig names the task again in name.
		add(protocol.CreateTaskPushNotificationConfig, "params.name", "POST", own,
			`{"name":"tasks/`+Swept+`/pushNotificationConfigs/c-1","pushNotificationConfig":{"id":"c-1","url":"`+URL+`"}}`, true)
		add(protocol.ListTaskPushNotificationConfigs, "path", "GET", t+"/pushNotificationConfigs", "", false)
		add(protocol.GetTaskPushNotificationConfig, "path", "GET", t+"/pushNotificationConfigs/c-1", "", false)
		add(protocol.DeleteTaskPushNotificationConfig, "path", "DELETE", t+"/pushNotificationConfigs/c-1", "", false)
		// 0.3's JSON-RPC has no ListTasks, but its HTTP+JSON surface serves the 1.0 route.
		out = append(out, Position{Binding: protocol.HTTPJSON, Version: v, Operation: protocol.ListTasks, Kind: Context,
			Where: "params.contextId", Method: "GET", Filter: true, Target: base + "/tasks?contextId=" + Swept})
	}
	// The 0.3 specification's binding (/v1 routes) also takes SendMessageRequest in ProtoJSON
	// (message.content, ROLE_USER), in either spelling of each field name; it is read as the
	// JSON-RPC params it stands for, so its tasks and contexts are reported at the same positions.
	for _, p := range protoSend03() {
		addKind(protocol.SendMessage, p.kind, p.where, "POST", "/v1/message:send", p.body, false)
		addKind(protocol.SendStreamingMessage, p.kind, p.where, "POST", "/v1/message:stream", p.body, false)
	}
	return out
}

// msgProto03 is a 0.3 Message in ProtoJSON (0.3.0's field names), with a slot.
const msgProto03 = `{"messageId":"m-1","role":"ROLE_USER","content":[{"text":"look up invoice INV-1"}]%s}`

func protoSend03() []struct {
	kind        Kind
	where, body string
} {
	m := func(extra string) string { return strings.Replace(msgProto03, "%s", extra, 1) }
	return []struct {
		kind        Kind
		where, body string
	}{
		{Task, "params.message.taskId", `{"message":` + m(`,"taskId":"`+Swept+`"`) + `}`},
		{Task, "params.message.taskId", `{"request":` + m(`,"task_id":"`+Swept+`"`) + `}`},
		{Task, "params.message.referenceTaskIds[0]", `{"message":` + m(`,"referenceTaskIds":["`+Swept+`"]`) + `}`},
		{Task, "params.message.referenceTaskIds[1]", `{"message":` + m(`,"reference_task_ids":["`+OwnTask+`","`+Swept+`"]`) + `}`},
		{Context, "params.message.contextId", `{"message":` + m(`,"contextId":"`+Swept+`"`) + `}`},
		{Context, "params.message.contextId", `{"request":` + m(`,"task_id":"`+OwnTask+`","context_id":"`+Swept+`"`) + `}`},
	}
}

func grpc10() []Position {
	v := protocol.V1
	var out []Position
	add := func(op protocol.Operation, k Kind, where, body string) {
		out = append(out, Position{Binding: protocol.GRPC, Version: v, Operation: op, Kind: k, Where: where,
			Method: "POST", Target: "/" + protocol.GRPCService + "/" + string(op), Body: body})
	}
	m := `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"look up invoice INV-1"}]%s}`
	withMsg := func(extra string) string { return strings.Replace(m, "%s", extra, 1) }
	for _, op := range []protocol.Operation{protocol.SendMessage, protocol.SendStreamingMessage} {
		add(op, Task, "message.task_id", `{"message":`+withMsg(`,"taskId":"`+Swept+`"`)+`}`)
		add(op, Task, "message.reference_task_ids[0]", `{"message":`+withMsg(`,"referenceTaskIds":["`+Swept+`"]`)+`}`)
		add(op, Context, "message.context_id", `{"message":`+withMsg(`,"contextId":"`+Swept+`"`)+`}`)
		add(op, Context, "message.context_id", `{"message":`+withMsg(`,"taskId":"`+OwnTask+`","contextId":"`+Swept+`"`)+`}`)
		add(op, Task, "configuration.task_push_notification_config.task_id",
			`{"message":`+withMsg("")+`,"configuration":{"taskPushNotificationConfig":{"taskId":"`+Swept+`","url":"`+URL+`"}}}`)
		add(op, Tenant, "tenant", `{"tenant":"`+Swept+`","message":`+withMsg("")+`}`)
		add(op, Tenant, "configuration.task_push_notification_config.tenant",
			`{"message":`+withMsg("")+`,"configuration":{"taskPushNotificationConfig":{"tenant":"`+Swept+`","taskId":"`+OwnTask+`","url":"`+URL+`"}}}`)
	}
	for _, op := range []protocol.Operation{protocol.GetTask, protocol.CancelTask, protocol.SubscribeToTask} {
		add(op, Task, "id", `{"id":"`+Swept+`"}`)
		add(op, Tenant, "tenant", `{"tenant":"`+Swept+`","id":"`+OwnTask+`"}`)
	}
	add(protocol.ListTasks, Tenant, "tenant", `{"tenant":"`+Swept+`"}`)
	out = append(out, Position{Binding: protocol.GRPC, Version: v, Operation: protocol.ListTasks, Kind: Context,
		Where: "context_id", Method: "POST", Target: "/" + protocol.GRPCService + "/" + string(protocol.ListTasks), Filter: true, Body: `{"contextId":"` + Swept + `"}`})
	add(protocol.GetExtendedAgentCard, Tenant, "tenant", `{"tenant":"`+Swept+`"}`)
	add(protocol.CreateTaskPushNotificationConfig, Task, "task_id", `{"taskId":"`+Swept+`","url":"`+URL+`"}`)
	add(protocol.CreateTaskPushNotificationConfig, Tenant, "tenant", `{"tenant":"`+Swept+`","taskId":"`+OwnTask+`","url":"`+URL+`"}`)
	for _, op := range []protocol.Operation{protocol.GetTaskPushNotificationConfig, protocol.DeleteTaskPushNotificationConfig} {
		add(op, Task, "task_id", `{"taskId":"`+Swept+`","id":"c-1"}`)
		add(op, Tenant, "tenant", `{"tenant":"`+Swept+`","taskId":"`+OwnTask+`","id":"c-1"}`)
	}
	add(protocol.ListTaskPushNotificationConfigs, Task, "task_id", `{"taskId":"`+Swept+`"}`)
	add(protocol.ListTaskPushNotificationConfigs, Tenant, "tenant", `{"tenant":"`+Swept+`","taskId":"`+OwnTask+`"}`)
	return out
}

func grpc03() []Position {
	v := protocol.V03
	var out []Position
	addKind := func(method string, op protocol.Operation, k Kind, where, body string, agree bool) {
		out = append(out, Position{Binding: protocol.GRPC, Version: v, Operation: op, Kind: k, Where: where, MustAgree: agree,
			Method: "POST", Target: "/" + protocol.GRPCServiceV03 + "/" + method, Body: body})
	}
	add := func(method string, op protocol.Operation, where, body string, agree bool) {
		addKind(method, op, Task, where, body, agree)
	}
	m := `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"look up invoice INV-1"}]%s}`
	withMsg := func(extra string) string { return strings.Replace(m, "%s", extra, 1) }
	for _, op := range []protocol.Operation{protocol.SendMessage, protocol.SendStreamingMessage} {
		add(string(op), op, "request.task_id", `{"request":`+withMsg(`,"taskId":"`+Swept+`"`)+`}`, false)
		add(string(op), op, "request.reference_task_ids[0]", `{"request":`+withMsg(`,"referenceTaskIds":["`+Swept+`"]`)+`}`, false)
		addKind(string(op), op, Context, "request.context_id", `{"request":`+withMsg(`,"contextId":"`+Swept+`"`)+`}`, false)
		addKind(string(op), op, Context, "request.context_id", `{"request":`+withMsg(`,"taskId":"`+OwnTask+`","contextId":"`+Swept+`"`)+`}`, false)
	}
	add("GetTask", protocol.GetTask, "name", `{"name":"tasks/`+Swept+`"}`, false)
	add("CancelTask", protocol.CancelTask, "name", `{"name":"tasks/`+Swept+`"}`, false)
	add("TaskSubscription", protocol.SubscribeToTask, "name", `{"name":"tasks/`+Swept+`"}`, false)
	add("CreateTaskPushNotificationConfig", protocol.CreateTaskPushNotificationConfig, "parent",
		`{"parent":"tasks/`+Swept+`","configId":"c-1","config":{"pushNotificationConfig":{"url":"`+URL+`"}}}`, false)
	add("CreateTaskPushNotificationConfig", protocol.CreateTaskPushNotificationConfig, "config.name",
		`{"parent":"tasks/`+OwnTask+`","configId":"c-1","config":{"name":"tasks/`+Swept+`/pushNotificationConfigs/c-1","pushNotificationConfig":{"url":"`+URL+`"}}}`, true)
	add("GetTaskPushNotificationConfig", protocol.GetTaskPushNotificationConfig, "name", `{"name":"tasks/`+Swept+`/pushNotificationConfigs/c-1"}`, false)
	add("ListTaskPushNotificationConfig", protocol.ListTaskPushNotificationConfigs, "parent", `{"parent":"tasks/`+Swept+`"}`, false)
	add("DeleteTaskPushNotificationConfig", protocol.DeleteTaskPushNotificationConfig, "name", `{"name":"tasks/`+Swept+`/pushNotificationConfigs/c-1"}`, false)
	return out
}

// Request builds the request of p with its placeholders filled: the HTTP method, the target
// relative to the agent's base path, the headers a client of p's version and binding sends
// (besides credentials), and the body (for gRPC the length-prefixed protobuf message).
func Request(p Position, swept, ownTask, ownTenant, url string) (method, target string, header http.Header, body []byte, err error) {
	return RequestFor(p, swept, ownTask, ownTenant, url, "")
}

// RequestFor is Request with the message's messageId set to messageID ("" keeps the
// catalogue's "m-1"): capgate runs a message once per owner and messageId, so a test that sends
// one position's request as a new message each time gives each its own id.
func RequestFor(p Position, swept, ownTask, ownTenant, url, messageID string) (method, target string, header http.Header, body []byte, err error) {
	header = http.Header{}
	if p.Version == protocol.V1 {
		header.Set(protocol.VersionHeader, "1.0")
	}
	if p.Operation == protocol.ExtensionMethod {
		header.Set(protocol.ExtensionsHeader, ExtensionURI)
	}
	target = Fill(p.Target, swept, ownTask, ownTenant, url)
	text := Fill(p.Body, swept, ownTask, ownTenant, url)
	if messageID != "" {
		id, qerr := json.Marshal(messageID)
		if qerr != nil {
			return "", "", nil, nil, qerr
		}
		text = strings.Replace(text, `"messageId":"m-1"`, `"messageId":`+string(id), 1)
	}
	if p.Binding != protocol.GRPC {
		if text != "" {
			header.Set("Content-Type", "application/json")
		}
		return p.Method, target, header, []byte(text), nil
	}
	header.Set("Content-Type", "application/grpc")
	header.Set("Te", "trailers")
	m := GRPCMessage(p.Version, p.Operation)
	if m == nil {
		return "", "", nil, nil, fmt.Errorf("no gRPC message for %s %s", p.Version, p.Operation)
	}
	if err := protojson.Unmarshal([]byte(text), m); err != nil {
		return "", "", nil, nil, fmt.Errorf("%s: %w", p.Name(), err)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return "", "", nil, nil, err
	}
	frame := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(b)))
	return p.Method, target, header, append(frame, b...), nil
}

// GRPCMessage is a new request message of op in version v: the operation table's
// (protocol.RequestMessage, RequestMessage03), which TestRequestMessagesAreTheServices holds to
// the A2A proto's service descriptors.
func GRPCMessage(v protocol.Version, op protocol.Operation) proto.Message {
	if v == protocol.V03 {
		return protocol.RequestMessage03(op)
	}
	return protocol.RequestMessage(op)
}
