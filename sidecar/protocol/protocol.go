// Package protocol is the A2A request model and error model shared by the gateway and the
// ext_authz server, and the operation table: Request (and the Envelope a door reads it from),
// Operation and its table, Error and Code with each code's JSON-RPC code, HTTP status and
// google.rpc.Code, and the refusal a door answers (Refusal: what each code, challenge and quota
// header is). It holds no codec: the bindings read into the model and write from it, each in
// a package of its own that holds its reading and its writing, both versions —
// jsonrpcwire (JSON-RPC), httpjsonwire (HTTP+JSON, with 0.3's ProtoJSON form), grpcwire (gRPC) —
// the two JSON bindings sharing jsonmodel (the params both carry) and sse (their streams); wire
// picks the binding of a request as a door received it, and of its refusal.
//
// The operations are listed once, in operations.go's operation table: each row gives an
// operation's names on every binding and version (JSON-RPC methods of 1.0 and 0.3, the methods
// of both gRPC services, the HTTP+JSON routes), whether it streams, carries a message or
// targets a task (and the params members that name the task and its push config), what it
// needs from the task store, its 0.3 params schema, its 1.0 gRPC messages and its metrics
// label. The parser's name lookups are indexes built from the table when the package loads, and
// the properties other packages ask of an Operation (Streaming, TargetsTask, Push, PathFields,
// ...) are the row's. Adding an operation is adding a row, and — when its params are new —
// teaching the readers to read them (jsonmodel's params.go, grpcwire) and the positions catalogue (positionstest) where they
// name a task, context or tenant (docs/walkthroughs.md). operations_test.go fails when a product
// file spells a wire name of an operation outside the table.
package protocol

import (
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Binding is an A2A protocol binding.
type Binding string

// Bindings.
const (
	JSONRPC  Binding = "jsonrpc"
	HTTPJSON Binding = "http+json"
	GRPC     Binding = "grpc"
)

// Version is an A2A protocol version, as carried by the A2A-Version header.
type Version string

// Versions.
const (
	V1  Version = "1.0"
	V03 Version = "0.3"
)

// VersionHeader and ExtensionsHeader are the A2A service parameter headers.
const (
	VersionHeader    = "A2A-Version"
	ExtensionsHeader = "A2A-Extensions"
)

// MethodExtension is what the deployment says of a method an extension adds.
type MethodExtension struct {
	URI        string // the extension
	Capability string // the capability whose handler serves the method
}

// Methods maps the JSON-RPC methods extensions add to their extension; nil when none.
type Methods map[string]MethodExtension

// Defaults of [Limits].
const (
	DefaultMaxBodyBytes int64 = 1 << 20
	DefaultMaxDepth           = 64
)

// Limits bound what the parser reads. Zero fields take the defaults.
type Limits struct {
	// MaxBodyBytes is the largest body accepted. Callers read at most MaxBodyBytes+1 bytes and
	// pass what they read, so an oversize body is reported rather than truncated.
	MaxBodyBytes int64
	// MaxDepth is the deepest nesting of JSON objects and arrays accepted.
	MaxDepth int
}

// WithDefaults is l with its zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// Request is one parsed A2A request, the same whichever binding carried it.
type Request struct {
	Binding   Binding
	Version   Version
	Operation Operation
	// Method is the name as sent: the JSON-RPC method, "POST /message:send"-style route for
	// HTTP+JSON, or the gRPC method.
	Method string
	// ID is the raw JSON-RPC id (string, number or null) to echo; nil for other bindings.
	ID jsontext.Value
	// ErrorData is the shape of the data of a JSON-RPC error answer to it (ErrorDataShape).
	ErrorData DataShape
	// Params is the raw JSON-RPC params or HTTP+JSON body; nil when absent.
	Params jsontext.Value
	// Proto is a gRPC request's message as read (binary protobuf), for ForwardParams; nil for
	// other bindings.
	Proto []byte
	// Tenant is the request's tenant: the HTTP+JSON /{tenant} prefix, params.tenant (1.0), or the
	// tenant of a push config it carries; every position that names one agrees.
	Tenant string
	// TaskID is the task the operation targets; for SendMessage the message's taskId.
	TaskID string
	// Tasks is every task the request names, wherever it appears (see TaskRef); the target
	// TaskID, when set, is first.
	Tasks []TaskRef
	// Contexts is every context the request names, wherever it appears (see ContextRef): a
	// message's contextId, ListTasks' contextId filter (a filter position), an extension
	// method's params.contextId.
	Contexts []ContextRef
	// ConfigID is the push notification config id, when the operation names one.
	ConfigID string
	// Push lists the push notification configs the request carries (a push config operation's,
	// or one set in SendMessage's configuration): each one's webhook URL.
	Push []PushRef
	// List holds ListTasks' parameters.
	List *ListParams
	// HistoryLength is how much of a task's history the request asks the task it is answered
	// with to carry (see HistoryKept): GetTask's historyLength (gRPC history_length), or
	// SendMessage's configuration.historyLength; nil when not given. ListTasks' is
	// List.HistoryLength.
	HistoryLength *int
	// Message is set for SendMessage and SendStreamingMessage.
	Message *MessageInfo
	// Extension is set for an ExtensionMethod: the extension that adds it and its capability.
	Extension *MethodExtension

	// Forward builds the params a handler is sent for the request (ForwardParams). The
	// binding's reader sets it, as it alone knows what it read (the values an HTTP+JSON path
	// bound, a params object checked as the proto request message, a gRPC message); nil: the
	// params as sent.
	Forward Forwarder
}

// TaskRef is one task a request names and where: "path", "params.id", "params.taskId",
// "params.message.taskId", "params.message.referenceTaskIds[2]",
// "params.configuration.taskPushNotificationConfig.taskId", "grpc.name", ...
type TaskRef struct {
	ID    string
	Where string
}

// ContextRef is one context a request names and where: "params.message.contextId",
// "params.contextId" (ListTasks' filter, an extension method's), "message.context_id",
// "request.context_id", "context_id" (gRPC).
type ContextRef struct {
	ID    string
	Where string
	// Filter marks a filter position: the context narrows a listing of the caller's own
	// (ListTasks' contextId). A context the caller does not hold narrows it to nothing, exactly
	// as one that does not exist, so admission does not refuse it: the answer is an empty page,
	// never an error that tells "not yours" from "does not exist". Every other position is a
	// target: the operation acts in the context, which must be the caller's.
	Filter bool
}

// PushRef is a push notification config a request carries.
type PushRef struct {
	URL   string
	Where string
}

// ListParams are ListTasks' filters and paging. Zero values are "not given".
type ListParams struct {
	ContextID            string
	Status               string
	PageSize             int
	PageToken            string
	HistoryLength        *int
	IncludeArtifacts     bool
	StatusTimestampAfter string // RFC 3339
}

// AddTask records a task the request names. The target task is recorded first.
func (r *Request) AddTask(id, where string) {
	if id != "" {
		r.Tasks = append(r.Tasks, TaskRef{ID: id, Where: where})
	}
}

// AddContext records a context the request names as a target.
func (r *Request) AddContext(id, where string) {
	if id != "" {
		r.Contexts = append(r.Contexts, ContextRef{ID: id, Where: where})
	}
}

// AddContextFilter records a context the request names as a filter (ContextRef.Filter).
func (r *Request) AddContextFilter(id, where string) {
	if id != "" {
		r.Contexts = append(r.Contexts, ContextRef{ID: id, Where: where, Filter: true})
	}
}

// MessageInfo is what the gateway and policy need from a message, normalised across versions.
type MessageInfo struct {
	MessageID string
	TaskID    string
	ContextID string
	Parts     []PartInfo
	// SkillHint is metadata.skillId (in 0.3 also its alias metadata.skill_id: SkillHintAlias03)
	// from the request metadata, else from the message metadata.
	SkillHint string
	// AcceptedOutputModes is configuration.acceptedOutputModes.
	AcceptedOutputModes []string
}

// Part kinds.
const (
	PartText = "text"
	PartRaw  = "raw"
	PartURL  = "url"
	PartData = "data"
)

// PartInfo is one message part. MediaType is the lower-case type/subtype without parameters:
// the part's mediaType (0.3: file.mimeType) when given, else text/plain for text,
// application/json for data and application/octet-stream for raw and url parts.
type PartInfo struct {
	Kind      string
	MediaType string
	Text      string // text parts only
	// Data is the JSON value of a data part (a copy, not the body's memory); nil for other kinds.
	Data jsontext.Value
	// InlineBytes is the decoded size of a raw part's inline content (0.3: file.bytes), counted
	// from its base64 text without decoding; 0 for other kinds.
	InlineBytes int64
}

// ParseVersion reads the A2A-Version header: absent means 0.3 (spec rule), "1.0" or "1" means
// 1.0, "0.3" means 0.3. A value with a comma is the header given more than once, as a proxy
// passes it on (Envoy joins repeated headers with commas), or a list: RepeatedVersion. Anything
// else is VersionNotSupported.
func ParseVersion(header string) (Version, *Error) {
	if strings.Contains(header, ",") {
		return "", RepeatedVersion()
	}
	switch strings.TrimSpace(header) {
	case "":
		return V03, nil
	case "1.0", "1":
		return V1, nil
	case "0.3":
		return V03, nil
	default:
		return "", Errorf(VersionNotSupported, "A2A version %q is not supported; supported versions: 1.0, 0.3",
			Clip(strings.TrimSpace(header))).WithMetadata("supportedVersions", "1.0,0.3")
	}
}

// RepeatedVersion is the error for an A2A-Version header given more than once: the gateway
// sees the repeated header, ext_authz the values Envoy joined, and both answer this.
func RepeatedVersion() *Error {
	return Errorf(InvalidRequest, "the A2A-Version header must be given once, with one version").
		WithMetadata("supportedVersions", "1.0,0.3")
}

// JSONRPCOperation is the operation of a JSON-RPC method of version v; its error names the
// method of the other version when the caller sent that. resolves a JSON-RPC method for version v. Names are matched exactly: no case or
// Unicode folding, no trimming.
func JSONRPCOperation(v Version, method string) (Operation, *Error) {
	if v == V1 {
		if op, ok := jsonrpcOps.op(method); ok {
			return op, nil
		}
		if op, ok := jsonrpc03Ops.op(method); ok {
			return "", Errorf(MethodNotFound, "method %q is not an A2A 1.0 method; send %s: 0.3 or use %s",
				method, VersionHeader, MethodName(V1, op))
		}
	} else {
		if op, ok := jsonrpc03Ops.op(method); ok {
			return op, nil
		}
		if op, ok := jsonrpcOps.op(method); ok {
			if m := MethodName(V03, op); m != "" {
				return "", Errorf(MethodNotFound, "method %q is not an A2A 0.3 method; send %s: 1.0 or use %s",
					method, VersionHeader, m)
			}
			return "", Errorf(MethodNotFound, "method %q is not an A2A 0.3 method; send %s: 1.0", method, VersionHeader)
		}
	}
	return "", Errorf(MethodNotFound, "method %q not found", Clip(method))
}

// Clip shortens client-supplied text echoed in messages.
func Clip(s string) string { return cut(s, 64) }

// cut shortens s to at most max bytes, at a rune boundary, with "…" appended when it cut.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// MaxLoggedBytes bounds client-supplied text (ids, hints) in log lines.
const MaxLoggedBytes = 128

// ForLog shortens client-supplied text for a log line to at most MaxLoggedBytes (cut at a rune
// boundary, "…" appended) with invalid UTF-8 replaced.
func ForLog(s string) string { return cut(strings.ToValidUTF8(s, "\uFFFD"), MaxLoggedBytes) }

// ProtoJSON03 reports whether r is a request of the 0.3 specification's HTTP+JSON binding (a
// 0.3 request on a /v1/ route), answered in ProtoJSON (httpjsonwire.ProtoJSON03Response and
// ProtoJSON03Event).
func (r *Request) ProtoJSON03() bool {
	return r.Binding == HTTPJSON && r.Version == V03 && strings.Contains(r.Method, " /v1/")
}

// Forwarder builds the JSON-RPC params a handler is sent for a request of one binding
// (Request.ForwardParams). A value of it is comparable, so parsed requests compare equal.
type Forwarder interface {
	ForwardParams(r *Request) (jsontext.Value, *Error)
}

// ForwardParams is what a handler is sent for r: the JSON-RPC params of r's operation in r's
// version, as admission read them, built by r's binding (Request.Forward): an A2A 1.0 request
// is its request message re-encoded as ProtoJSON, a 0.3 request the params as sent (for
// HTTP+JSON with the path's values written in). A request no reader built is forwarded with
// its params as they are ({} when absent).
func (r *Request) ForwardParams() (jsontext.Value, *Error) {
	if r.Forward != nil {
		return r.Forward.ForwardParams(r)
	}
	if r.Params == nil {
		return jsontext.Value("{}"), nil
	}
	return r.Params, nil
}
