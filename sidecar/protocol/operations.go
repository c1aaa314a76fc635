package protocol

import (
	"fmt"
	"net/http"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	a2apb03 "github.com/a2aproject/a2a-go/a2apb"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
)

// Operation is a canonical A2A operation, named as in A2A 1.0.
type Operation string

// Operations. Each has one row in operationTable, which holds everything else about it.
const (
	SendMessage                      Operation = "SendMessage"
	SendStreamingMessage             Operation = "SendStreamingMessage"
	GetTask                          Operation = "GetTask"
	ListTasks                        Operation = "ListTasks"
	CancelTask                       Operation = "CancelTask"
	SubscribeToTask                  Operation = "SubscribeToTask"
	CreateTaskPushNotificationConfig Operation = "CreateTaskPushNotificationConfig"
	GetTaskPushNotificationConfig    Operation = "GetTaskPushNotificationConfig"
	ListTaskPushNotificationConfigs  Operation = "ListTaskPushNotificationConfigs"
	DeleteTaskPushNotificationConfig Operation = "DeleteTaskPushNotificationConfig"
	GetExtendedAgentCard             Operation = "GetExtendedAgentCard"
	// GetAgentCard is the public card, GET /.well-known/agent-card.json; no JSON-RPC method.
	GetAgentCard Operation = "GetAgentCard"
	// ExtensionMethod is a JSON-RPC method an extension adds (Request.Method names it,
	// Request.Extension says which extension and capability).
	ExtensionMethod Operation = "ExtensionMethod"
)

// Store is what an operation needs from the task store, as flags.
type Store uint8

// Store needs. Every operation that can name a task or a context has the owner of each looked
// up by admission (StoreLookup); the others say what more it does.
const (
	// StoreLookup: the owner of every task and context it names is looked up.
	StoreLookup Store = 1 << iota
	// StoreClaim: a context it names that nobody holds is claimed for the caller (a new
	// conversation), atomically, instead of only looked up.
	StoreClaim
	// StoreBind: the task and context the handler answers with are bound to the caller.
	StoreBind
	// StoreList: the caller's tasks are listed (capgate answers it from the store).
	StoreList
)

// Route is one HTTP+JSON route: an HTTP method and a path template. In a template, {id} is the
// task id, or the push config id when the template also has {taskId}; a segment may carry a
// literal suffix after its variable (":cancel").
type Route struct {
	Method string
	Path   string
	// Call marks the route capgate uses to call a handler for the operation.
	Call bool
}

// Spec is one operation's row of the operation table: its names on every binding and version,
// and what the parser, admission, dispatch and the handler clients need to know of it.
type Spec struct {
	Op Operation
	// JSONRPC and JSONRPC03 are its JSON-RPC methods in A2A 1.0 and 0.3; "" when that version
	// has none.
	JSONRPC, JSONRPC03 string
	// GRPC and GRPC03 are its methods of the 1.0 (GRPCService) and 0.3 (GRPCServiceV03) gRPC
	// services; "" when that service has none.
	GRPC, GRPC03 string
	// REST are its HTTP+JSON routes, those of the A2A 1.0 proto's google.api.http annotations:
	// served in both versions, also under a /{tenant} prefix, and in 0.3 also under /v1.
	REST []Route
	// REST03 are routes only the 0.3 /v1/ form has, relative to /v1.
	REST03 []Route
	// Fixed are routes at a fixed path, under no prefix (the public card's well-known paths).
	Fixed []Route
	// Streams: it answers with a stream of events.
	Streams bool
	// Message: it carries a message (Request.Message).
	Message bool
	// Contexts: it can name a context (a message's contextId, ListTasks' filter, an extension
	// method's params.contextId), whose owner admission checks.
	Contexts bool
	// Push: it is a push notification config operation.
	Push bool
	// Public: anyone may call it, without a credential or anything else admission checks.
	Public bool
	// TaskField and ConfigField are the 1.0 params members (and HTTP+JSON path variables)
	// naming the task it targets and its push config; TaskField is "" when it targets no task
	// (a message's optional message.taskId continues one, it does not target it).
	TaskField, ConfigField string
	// TaskField03 and ConfigField03 are the same members in 0.3's JSON-RPC params.
	TaskField03, ConfigField03 string
	// Params03 is the 0.3 JSON schema object of its params; "" when the schema has none.
	Params03 string
	// Store is what it needs from the task store.
	Store Store
	// Result is the kind of its unary result; 0 when the operation decides it as it runs (a
	// message's answer is a task or a message) or streams. KindEmpty: google.protobuf.Empty
	// (JSON null).
	Result Kind
	// Label is its label in ext_authz's decision metrics.
	Label string
	// Query lists the query parameters a GET route takes, by name (the HTTP+JSON reader's).
	Query map[string]QueryParam
	// grpcRequest and grpcResponse make its A2A 1.0 gRPC request message and response message
	// (one stream event for a streaming operation); nil when gRPC has none. grpc03Request makes
	// its A2A 0.3 gRPC request message; nil when the 0.3 service has none.
	grpcRequest, grpcResponse, grpc03Request func() proto.Message
}

// Kind is what a result or stream event holds.
type Kind uint8

// The kinds of results and events.
const (
	KindTask           Kind = iota + 1 // a task; a SendMessage result or stream event {"task": …} in 1.0
	KindMessage                        // a message; {"message": …} in 1.0
	KindStatusUpdate                   // a task status update event
	KindArtifactUpdate                 // a task artifact update event
	KindTaskList                       // a ListTasks page
	KindPushConfig                     // a task push notification config
	KindPushConfigList                 // a list of push notification configs
	KindEmpty                          // no content (a delete): JSON null
	KindExtension                      // an extension method's result, as its handler gave it
	KindCard                           // an agent card
)

// UnknownLabel is the metrics label of a request refused before its operation was known.
const UnknownLabel = "unknown"

// operationTable is the one list of operations. Adding an operation is adding a row here (and,
// when it has params of its own, teaching the parser to read them: params.go, grpc.go).
var operationTable = []Spec{
	{
		Op: SendMessage, JSONRPC: "SendMessage", JSONRPC03: "message/send",
		GRPC: "SendMessage", GRPC03: "SendMessage",
		REST:    []Route{{http.MethodPost, "/message:send", true}},
		Message: true, Contexts: true, Params03: "MessageSendParams", Store: StoreLookup | StoreClaim | StoreBind,
		grpcRequest:   func() proto.Message { return &a2apb.SendMessageRequest{} },
		grpcResponse:  func() proto.Message { return &a2apb.SendMessageResponse{} },
		grpc03Request: func() proto.Message { return &a2apb03.SendMessageRequest{} },
	},
	{
		Op: SendStreamingMessage, JSONRPC: "SendStreamingMessage", JSONRPC03: "message/stream",
		GRPC: "SendStreamingMessage", GRPC03: "SendStreamingMessage",
		REST:    []Route{{http.MethodPost, "/message:stream", true}},
		Streams: true, Message: true, Contexts: true, Params03: "MessageSendParams", Store: StoreLookup | StoreClaim | StoreBind,
		grpcRequest:   func() proto.Message { return &a2apb.SendMessageRequest{} },
		grpcResponse:  func() proto.Message { return &a2apb.StreamResponse{} },
		grpc03Request: func() proto.Message { return &a2apb03.SendMessageRequest{} },
	},
	{
		Op: GetTask, JSONRPC: "GetTask", JSONRPC03: "tasks/get",
		GRPC: "GetTask", GRPC03: "GetTask",
		REST:      []Route{{http.MethodGet, "/tasks/{id}", true}},
		TaskField: "id", TaskField03: "id", Params03: "TaskQueryParams", Store: StoreLookup,
		// history_length is the proto field's own name, which HTTP transcoding accepts as a
		// query parameter beside the JSON name (the 0.3 TCK's REST client sends it).
		Query:         map[string]QueryParam{"historyLength": {"historyLength", QueryInt}, "history_length": {"historyLength", QueryInt}},
		Result:        KindTask,
		grpcRequest:   func() proto.Message { return &a2apb.GetTaskRequest{} },
		grpcResponse:  func() proto.Message { return &a2apb.Task{} },
		grpc03Request: func() proto.Message { return &a2apb03.GetTaskRequest{} },
	},
	{
		Op: ListTasks, JSONRPC: "ListTasks",
		GRPC:     "ListTasks",
		REST:     []Route{{http.MethodGet, "/tasks", true}},
		Contexts: true, Store: StoreLookup | StoreList,
		// a2a-go sends lastUpdatedAfter for statusTimestampAfter.
		Query: map[string]QueryParam{
			"contextId":            {"contextId", QueryString},
			"status":               {"status", QueryString},
			"pageSize":             {"pageSize", QueryInt},
			"pageToken":            {"pageToken", QueryString},
			"historyLength":        {"historyLength", QueryInt},
			"includeArtifacts":     {"includeArtifacts", QueryBool},
			"statusTimestampAfter": {"statusTimestampAfter", QueryString},
			"lastUpdatedAfter":     {"statusTimestampAfter", QueryString},
		},
		Result:       KindTaskList,
		grpcRequest:  func() proto.Message { return &a2apb.ListTasksRequest{} },
		grpcResponse: func() proto.Message { return &a2apb.ListTasksResponse{} },
	},
	{
		Op: CancelTask, JSONRPC: "CancelTask", JSONRPC03: "tasks/cancel",
		GRPC: "CancelTask", GRPC03: "CancelTask",
		REST:      []Route{{http.MethodPost, "/tasks/{id}:cancel", true}},
		TaskField: "id", TaskField03: "id", Params03: "TaskIdParams", Store: StoreLookup,
		Result:        KindTask,
		grpcRequest:   func() proto.Message { return &a2apb.CancelTaskRequest{} },
		grpcResponse:  func() proto.Message { return &a2apb.Task{} },
		grpc03Request: func() proto.Message { return &a2apb03.CancelTaskRequest{} },
	},
	{
		Op: SubscribeToTask, JSONRPC: "SubscribeToTask", JSONRPC03: "tasks/resubscribe",
		GRPC: "SubscribeToTask", GRPC03: "TaskSubscription",
		// Also served (and called) with POST, which a2a-go sends and its server and the JS SDK's
		// accept; a2a-go's server accepts no GET.
		REST:    []Route{{http.MethodGet, "/tasks/{id}:subscribe", false}, {http.MethodPost, "/tasks/{id}:subscribe", true}},
		Streams: true, TaskField: "id", TaskField03: "id", Params03: "TaskIdParams", Store: StoreLookup,
		grpcRequest:   func() proto.Message { return &a2apb.SubscribeToTaskRequest{} },
		grpcResponse:  func() proto.Message { return &a2apb.StreamResponse{} },
		grpc03Request: func() proto.Message { return &a2apb03.TaskSubscriptionRequest{} },
	},
	{
		Op: CreateTaskPushNotificationConfig, JSONRPC: "CreateTaskPushNotificationConfig", JSONRPC03: "tasks/pushNotificationConfig/set",
		GRPC: "CreateTaskPushNotificationConfig", GRPC03: "CreateTaskPushNotificationConfig",
		REST: []Route{{http.MethodPost, "/tasks/{taskId}/pushNotificationConfigs", true}},
		Push: true, TaskField: "taskId", TaskField03: "taskId", Params03: "TaskPushNotificationConfig", Store: StoreLookup,
		Result:        KindPushConfig,
		grpcRequest:   func() proto.Message { return &a2apb.TaskPushNotificationConfig{} },
		grpcResponse:  func() proto.Message { return &a2apb.TaskPushNotificationConfig{} },
		grpc03Request: func() proto.Message { return &a2apb03.CreateTaskPushNotificationConfigRequest{} },
	},
	{
		Op: GetTaskPushNotificationConfig, JSONRPC: "GetTaskPushNotificationConfig", JSONRPC03: "tasks/pushNotificationConfig/get",
		GRPC: "GetTaskPushNotificationConfig", GRPC03: "GetTaskPushNotificationConfig",
		REST: []Route{{http.MethodGet, "/tasks/{taskId}/pushNotificationConfigs/{id}", true}},
		Push: true, TaskField: "taskId", ConfigField: "id", TaskField03: "id", ConfigField03: "pushNotificationConfigId",
		Params03: "GetTaskPushNotificationConfigParams", Store: StoreLookup,
		Result:        KindPushConfig,
		grpcRequest:   func() proto.Message { return &a2apb.GetTaskPushNotificationConfigRequest{} },
		grpcResponse:  func() proto.Message { return &a2apb.TaskPushNotificationConfig{} },
		grpc03Request: func() proto.Message { return &a2apb03.GetTaskPushNotificationConfigRequest{} },
	},
	{
		Op: ListTaskPushNotificationConfigs, JSONRPC: "ListTaskPushNotificationConfigs", JSONRPC03: "tasks/pushNotificationConfig/list",
		GRPC: "ListTaskPushNotificationConfigs", GRPC03: "ListTaskPushNotificationConfig",
		REST: []Route{{http.MethodGet, "/tasks/{taskId}/pushNotificationConfigs", true}},
		Push: true, TaskField: "taskId", TaskField03: "id", Params03: "ListTaskPushNotificationConfigParams", Store: StoreLookup,
		Query:         map[string]QueryParam{"pageSize": {"pageSize", QueryInt}, "pageToken": {"pageToken", QueryString}},
		Result:        KindPushConfigList,
		grpcRequest:   func() proto.Message { return &a2apb.ListTaskPushNotificationConfigsRequest{} },
		grpcResponse:  func() proto.Message { return &a2apb.ListTaskPushNotificationConfigsResponse{} },
		grpc03Request: func() proto.Message { return &a2apb03.ListTaskPushNotificationConfigRequest{} },
	},
	{
		Op: DeleteTaskPushNotificationConfig, JSONRPC: "DeleteTaskPushNotificationConfig", JSONRPC03: "tasks/pushNotificationConfig/delete",
		GRPC: "DeleteTaskPushNotificationConfig", GRPC03: "DeleteTaskPushNotificationConfig",
		REST: []Route{{http.MethodDelete, "/tasks/{taskId}/pushNotificationConfigs/{id}", true}},
		Push: true, TaskField: "taskId", ConfigField: "id", TaskField03: "id", ConfigField03: "pushNotificationConfigId",
		Params03: "DeleteTaskPushNotificationConfigParams", Store: StoreLookup, Result: KindEmpty,
		grpcRequest:   func() proto.Message { return &a2apb.DeleteTaskPushNotificationConfigRequest{} },
		grpcResponse:  func() proto.Message { return &emptypb.Empty{} },
		grpc03Request: func() proto.Message { return &a2apb03.DeleteTaskPushNotificationConfigRequest{} },
	},
	{
		Op: GetExtendedAgentCard, JSONRPC: "GetExtendedAgentCard", JSONRPC03: "agent/getAuthenticatedExtendedCard",
		GRPC: "GetExtendedAgentCard", GRPC03: "GetAgentCard", // 0.3's authenticated card call
		REST:         []Route{{http.MethodGet, "/extendedAgentCard", true}},
		REST03:       []Route{{http.MethodGet, "/card", false}},
		Result:       KindCard,
		grpcRequest:  func() proto.Message { return &a2apb.GetExtendedAgentCardRequest{} },
		grpcResponse: func() proto.Message { return &a2apb.AgentCard{} },
	},
	{
		Op: GetAgentCard,
		Fixed: []Route{
			{http.MethodGet, AgentCardPath, false}, {http.MethodHead, AgentCardPath, false},
			{http.MethodGet, AgentCardPathV03, false}, {http.MethodHead, AgentCardPathV03, false},
		},
		Public: true, Result: KindCard,
	},
	{
		// Its names are the deployment's (Methods); the parser resolves them after the table's.
		Op:       ExtensionMethod,
		Contexts: true, Store: StoreLookup,
		// ext_authz has always counted it under "unknown" (the gateway labels it by name).
		Label: UnknownLabel,
	},
}

// specs indexes operationTable by operation.
var specs = func() (x opIndex) {
	for i := range operationTable {
		s := &operationTable[i]
		if s.Label == "" {
			s.Label = string(s.Op)
		}
		x.add("operation", string(s.Op), s)
	}
	return x
}()

// indexOf maps the names of one binding and version to their row. A name given twice is a
// mistake in the table, caught when the package loads (and by its tests).
func indexOf(kind string, name func(*Spec) string) (x opIndex) {
	for i := range operationTable {
		if n := name(&operationTable[i]); n != "" {
			x.add(kind, n, &operationTable[i])
		}
	}
	return x
}

// The name → operation indexes, built once from the table.
var (
	jsonrpcOps   = indexOf("1.0 JSON-RPC", func(s *Spec) string { return s.JSONRPC })
	jsonrpc03Ops = indexOf("0.3 JSON-RPC", func(s *Spec) string { return s.JSONRPC03 })
	grpcOps      = indexOf("1.0 gRPC", func(s *Spec) string { return s.GRPC })
	grpc03Ops    = indexOf("0.3 gRPC", func(s *Spec) string { return s.GRPC03 })
)

// opIndex maps names to rows of the operation table, filed by length: a lookup compares the
// name with the few of the same length, as a Go switch over the names would, where a map would
// hash the whole name each time (BenchmarkOperationLookup). Measured against plain maps (this
// index, specs and the opSets below all map[string]*Spec), A B alternated on one core, 5 runs:
// BenchmarkOperationLookup 169–275 ns against 714–1690 ns (14 lookups), about 39 ns more per
// lookup on the loaded test machine; a Check makes up to 8 of them (counted), about 0.3 µs of
// BenchmarkCheck's 10 µs median, 3 %: over the 1 % a trick must save to stay, so it stays.
type opIndex struct {
	byLen [maxNameLen + 1][]indexSlot
}

type indexSlot struct {
	name string
	spec *Spec
}

// maxNameLen bounds the names an index holds.
const maxNameLen = 63

// add files name under s. A name added twice, or one longer than maxNameLen, is a mistake in
// the table and panics when the package loads.
func (x *opIndex) add(kind, name string, s *Spec) {
	if len(name) > maxNameLen {
		panic(fmt.Sprintf("protocol: %s name %q is longer than %d bytes", kind, name, maxNameLen))
	}
	if prev, dup := x.get(name); dup {
		panic(fmt.Sprintf("protocol: %s name %q is both %s's and %s's", kind, name, prev.Op, s.Op))
	}
	x.byLen[len(name)] = append(x.byLen[len(name)], indexSlot{name, s})
}

// get is the row filed under name.
func (x *opIndex) get(name string) (*Spec, bool) {
	if len(name) < len(x.byLen) {
		for _, sl := range x.byLen[len(name)] {
			if sl.name == name {
				return sl.spec, true
			}
		}
	}
	return nil, false
}

// op is the operation filed under name.
func (x *opIndex) op(name string) (Operation, bool) {
	if s, ok := x.get(name); ok {
		return s.Op, true
	}
	return "", false
}

// Operations lists every operation, in table order.
func Operations() []Operation {
	out := make([]Operation, len(operationTable))
	for i := range operationTable {
		out[i] = operationTable[i].Op
	}
	return out
}

// Spec is op's row; a zero row for an operation not in the table. It is the table's own:
// callers read it and never change it.
func (o Operation) Spec() *Spec {
	if s, ok := specs.get(string(o)); ok {
		return s
	}
	return &noSpec
}

var noSpec Spec

// The operations having each yes-or-no property, built once from the table. A door asks these
// of every request; a scan of a few operations costs what the switches it replaced did, where
// indexing the table would hash the name each time (BenchmarkOperationLookup).
var (
	streamingOps = opsWith(func(s *Spec) bool { return s.Streams })
	messageOps   = opsWith(func(s *Spec) bool { return s.Message })
	taskOps      = opsWith(func(s *Spec) bool { return s.TaskField != "" })
	pushOps      = opsWith(func(s *Spec) bool { return s.Push })
	publicOps    = opsWith(func(s *Spec) bool { return s.Public })
)

// opSet is a few operations.
type opSet []Operation

func opsWith(has func(*Spec) bool) opSet {
	var out opSet
	for i := range operationTable {
		if has(&operationTable[i]) {
			out = append(out, operationTable[i].Op)
		}
	}
	return out
}

func (s opSet) has(o Operation) bool {
	for _, x := range s {
		if x == o {
			return true
		}
	}
	return false
}

// Known reports whether the operation is in the table.
func (o Operation) Known() bool { _, ok := specs.get(string(o)); return ok }

// Streaming reports whether the operation answers with a stream of events.
func (o Operation) Streaming() bool { return streamingOps.has(o) }

// Message reports whether the operation carries a message (SendMessage, SendStreamingMessage).
func (o Operation) Message() bool { return messageOps.has(o) }

// TargetsTask reports whether the operation targets an existing task, named by a required id.
func (o Operation) TargetsTask() bool { return taskOps.has(o) }

// NamesContext reports whether the operation can name a context.
func (o Operation) NamesContext() bool { return o.Spec().Contexts }

// Push reports whether the operation is a push notification config operation.
func (o Operation) Push() bool { return pushOps.has(o) }

// Public reports whether anyone may call the operation (the public agent card).
func (o Operation) Public() bool { return publicOps.has(o) }

// Needs reports whether the operation needs all of what from the task store.
func (o Operation) Needs(what Store) bool { return what != 0 && o.Spec().Store&what == what }

// EmptyResult reports whether the operation's result is google.protobuf.Empty (JSON null).
func (o Operation) EmptyResult() bool { return o.Spec().Result == KindEmpty }

// Result is the kind of o's unary result (Spec.Result); 0 when o decides it as it runs.
func (o Operation) Result() Kind { return o.Spec().Result }

// PathFields are the A2A 1.0 params members an HTTP+JSON route's path binds: the task id's and
// the push config id's ("" when the path binds none).
func (o Operation) PathFields() (task, config string) {
	s := o.Spec()
	return s.TaskField, s.ConfigField
}

// Label is the operation's label in decision metrics; UnknownLabel for one not in the table.
func (o Operation) Label() string {
	if s, ok := specs.get(string(o)); ok {
		return s.Label
	}
	return UnknownLabel
}

// MethodName is the JSON-RPC method name of op in version v: the 1.0 name, or the 0.3 name
// ("message/send", ...); "" when v has no such method.
func MethodName(v Version, op Operation) string {
	if v == V03 {
		return op.Spec().JSONRPC03
	}
	return op.Spec().JSONRPC
}

// MethodOperation is the operation a JSON-RPC method of either version names; false for a
// name that is neither version's (the two versions share no name).
func MethodOperation(name string) (Operation, bool) {
	if op, ok := jsonrpcOps.op(name); ok {
		return op, true
	}
	return jsonrpc03Ops.op(name)
}

// gRPC service names of A2A 1.0 (package lf.a2a.v1) and 0.3 (package a2a.v1).
const (
	GRPCService    = "lf.a2a.v1.A2AService"
	GRPCServiceV03 = "a2a.v1.A2AService"
)

// GRPCServiceOf is the gRPC service of A2A version v.
func GRPCServiceOf(v Version) string {
	if v == V03 {
		return GRPCServiceV03
	}
	return GRPCService
}

// GRPCOperation is the operation of gRPC method name (without the service) in version v's
// service. Names are matched exactly.
func GRPCOperation(v Version, name string) (Operation, bool) {
	if v == V03 {
		return grpc03Ops.op(name)
	}
	return grpcOps.op(name)
}

// GRPCMethod is the gRPC full method ("/lf.a2a.v1.A2AService/SendMessage") of op in version v's
// service; "" when that service has none.
func GRPCMethod(v Version, op Operation) string {
	m := op.Spec().GRPC
	if v == V03 {
		m = op.Spec().GRPC03
	}
	if m == "" {
		return ""
	}
	return "/" + GRPCServiceOf(v) + "/" + m
}

// RequestMessage is a new A2A 1.0 request message of op (its gRPC request message, and what
// the 1.0 JSON bindings' params are read against); nil when it has none.
func RequestMessage(op Operation) proto.Message {
	if f := op.Spec().grpcRequest; f != nil {
		return f()
	}
	return nil
}

// RequestMessage03 is a new A2A 0.3 gRPC request message of op; nil when it has none.
func RequestMessage03(op Operation) proto.Message {
	if f := op.Spec().grpc03Request; f != nil {
		return f()
	}
	return nil
}

// ResponseMessage is a new A2A 1.0 gRPC response message of op (one stream event for a
// streaming operation); nil when it has none.
func ResponseMessage(op Operation) proto.Message {
	if f := op.Spec().grpcResponse; f != nil {
		return f()
	}
	return nil
}

// QueryKind is the JSON type a query parameter is written as in params.
type QueryKind int

// The JSON types of query parameters.
const (
	QueryString QueryKind = iota
	QueryInt
	QueryBool
)

// QueryParam is one query parameter an operation accepts, and the params field it sets.
type QueryParam struct {
	Field string
	Kind  QueryKind
}
