// Package grpcwire is the A2A gRPC binding: reading a request (the :path's service and method,
// the one length-prefixed request message of lf.a2a.v1 or a2a.v1) into the request model, and
// writing an answer (each result or event converted to the method's proto response message, one
// frame each, the status in trailers: Writer, Status), its refusal (Refusal: trailers only)
// and the calls capgate makes to a gRPC handler (Request, Result). The operation table
// (protocol) names the methods and gives each row's 1.0 request and response messages. A
// message's parts are read from its ProtoJSON by jsonmodel.MessageOf, as the JSON bindings read
// theirs; grpcwire imports no other binding.
package grpcwire

import (
	"encoding/binary"
	"net/http"
	"strconv"
	"strings"
	"time"

	a2apb03 "github.com/a2aproject/a2a-go/a2apb"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/sidecar/protocol"
)

// ParsePath maps a gRPC :path ("/lf.a2a.v1.A2AService/SendMessage") to its operation; the
// service's package gives the version. Method names are matched exactly.
func ParsePath(path string) (protocol.Operation, protocol.Version, *protocol.Error) {
	svc, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || !strings.HasPrefix(path, "/") {
		return "", "", protocol.Errorf(protocol.MethodNotFound, "gRPC method %q not found", protocol.Clip(path))
	}
	switch svc {
	case protocol.GRPCService:
		if op, ok := protocol.GRPCOperation(protocol.V1, method); ok {
			return op, protocol.V1, nil
		}
		if op, ok := protocol.GRPCOperation(protocol.V03, method); ok {
			return "", "", protocol.Errorf(protocol.MethodNotFound, "gRPC method %q is an A2A 0.3 method; use %s", method, protocol.GRPCMethod(protocol.V1, op))
		}
	case protocol.GRPCServiceV03:
		if op, ok := protocol.GRPCOperation(protocol.V03, method); ok {
			return op, protocol.V03, nil
		}
		if op, ok := protocol.GRPCOperation(protocol.V1, method); ok {
			return "", "", protocol.Errorf(protocol.MethodNotFound, "gRPC method %q is not an A2A 0.3 method; use %s", method, protocol.GRPCMethod(protocol.V1, op))
		}
	}
	return "", "", protocol.Errorf(protocol.MethodNotFound, "gRPC method %q not found", protocol.Clip(path))
}

// IsContentType reports whether a content type selects the gRPC binding (application/grpc,
// application/grpc+proto, application/grpc-web...).
func IsContentType(ct string) bool {
	return len(ct) >= len("application/grpc") && strings.EqualFold(ct[:len("application/grpc")], "application/grpc")
}

// FrameHeader is the length of a gRPC message's prefix: a compressed flag and the message's
// length, four bytes big-endian.
const FrameHeader = 5

// AppendFrame appends msg to dst as one uncompressed, length-prefixed gRPC message.
func AppendFrame(dst, msg []byte) []byte {
	dst = append(dst, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(dst[len(dst)-4:], uint32(len(msg)))
	return append(dst, msg...)
}

// MessageLength returns the length the first gRPC frame header of body declares, and whether
// body holds a whole header.
func MessageLength(body []byte) (int64, bool) {
	if len(body) < FrameHeader {
		return 0, false
	}
	return int64(binary.BigEndian.Uint32(body[1:FrameHeader])), true
}

// Parse reads a gRPC request: the operation and version from the :path, every resource from
// the one, uncompressed request message, and the version the a2a-version metadata of h names,
// which must be the service's.
func Parse(method, path, ct string, h protocol.Header, body []byte, lim protocol.Limits) (*protocol.Request, *protocol.Error) {
	r, perr := parse(method, path, ct, body, lim)
	if perr == nil {
		perr = checkVersion(h, r.Version)
	}
	return r, perr
}

func parse(method, path, ct string, body []byte, lim protocol.Limits) (*protocol.Request, *protocol.Error) {
	lim = lim.WithDefaults()
	r := &protocol.Request{Binding: protocol.GRPC, Method: path, Forward: forwarder{}}
	op, version, perr := ParsePath(path)
	if perr != nil {
		return r, perr
	}
	r.Operation, r.Version = op, version
	if method != http.MethodPost {
		return r, protocol.Errorf(protocol.MethodNotAllowed, "gRPC requests must use POST")
	}
	if strings.HasPrefix(strings.ToLower(ct), "application/grpc-web-text") {
		return r, protocol.Errorf(protocol.ContentTypeNotSupported, "grpc-web-text requests cannot be authorized; use binary gRPC or grpc-web")
	}
	if len(body) < FrameHeader {
		return r, protocol.Errorf(protocol.InvalidRequest, "the gRPC request message is malformed")
	}
	if body[0] != 0 {
		return r, protocol.Errorf(protocol.InvalidRequest, "compressed gRPC request messages cannot be authorized; send requests to this agent uncompressed")
	}
	n, _ := MessageLength(body)
	switch rest := int64(len(body) - FrameHeader); {
	case n > lim.MaxBodyBytes:
		return r, protocol.Errorf(protocol.PayloadTooLarge, "request message is larger than the limit of %d bytes", lim.MaxBodyBytes)
	case n > rest:
		return r, protocol.Errorf(protocol.InvalidRequest, "the gRPC request message is truncated")
	case n < rest:
		return r, protocol.Errorf(protocol.InvalidRequest, "exactly one gRPC request message is expected")
	}
	msg := body[FrameHeader:]
	r.Proto = msg
	var err error
	if version == protocol.V1 {
		err = resources(op, msg, r)
	} else {
		err = resources03(op, msg, r)
	}
	if perr := protocol.AsError(err, protocol.InvalidRequest, "the gRPC request message could not be decoded"); perr != nil {
		return r, perr
	}
	if version == protocol.V1 && r.Message != nil {
		if perr := messageInfo(r, lim); perr != nil {
			return r, perr
		}
	}
	if op.TargetsTask() && r.TaskID == "" {
		return r, protocol.Errorf(protocol.InvalidParams, "the task id is required")
	}
	for _, t := range r.Tasks {
		if err := protocol.CheckIdentifier(t.Where, t.ID); err != nil {
			return r, err
		}
	}
	for _, c := range r.Contexts {
		if err := protocol.CheckIdentifier(c.Where, c.ID); err != nil {
			return r, err
		}
	}
	if r.Tenant != "" && !protocol.ValidTenant(r.Tenant) {
		return r, protocol.InvalidTenant()
	}
	return r, nil
}

// checkVersion checks the a2a-version metadata of a gRPC request against the version its
// service serves (the :path's package: lf.a2a.v1 is 1.0). Absent, the service's version
// holds; given, it must be one capgate supports (else VersionNotSupported, as on the other
// bindings) and the service's (a 0.3 request to the 1.0 service is VersionNotSupported, not
// served as 1.0); given more than once it is RepeatedVersion.
func checkVersion(h protocol.Header, service protocol.Version) *protocol.Error {
	vs := h.Values(protocol.VersionHeader)
	switch {
	case len(vs) == 0:
		return nil
	case len(vs) > 1:
		return protocol.RepeatedVersion()
	}
	if strings.TrimSpace(vs[0]) == "" {
		return nil // an empty value is no value: the service's version
	}
	v, err := protocol.ParseVersion(vs[0])
	if err != nil {
		return err
	}
	if v != service {
		return protocol.Errorf(protocol.VersionNotSupported, "A2A version %s is not served by %s; use %s for A2A %s",
			v, protocol.GRPCServiceOf(service), protocol.GRPCServiceOf(v), v).WithMetadata("supportedVersions", string(service))
	}
	return nil
}

// grpcTenant merges one more tenant position into r.Tenant.
func grpcTenant(r *protocol.Request, t, where string) error {
	var err *protocol.Error
	if r.Tenant, err = protocol.Agree(where, r.Tenant, t); err != nil {
		return err
	}
	return nil
}

// The generated getters the readers ask of a request message: every 1.0 message names its
// tenant; a task operation's names its task (id, or task_id where id is the push config's) and
// a push config operation's its config; 0.3 messages name the task by resource name.
type (
	hasTenant interface{ GetTenant() string }
	hasTaskID interface{ GetTaskId() string }
	hasID     interface{ GetId() string }
	hasURL    interface{ GetUrl() string }
	hasName   interface{ GetName() string }
	hasParent interface{ GetParent() string }
)

// resources reads an A2A 1.0 (lf.a2a.v1) request message: the row's message
// (protocol.RequestMessage), read through its generated getters.
func resources(op protocol.Operation, msg []byte, r *protocol.Request) error {
	m := protocol.RequestMessage(op)
	if m == nil {
		return nil
	}
	err := proto.Unmarshal(msg, m)
	if err != nil {
		return err
	}
	switch m := m.(type) {
	case *a2apb.SendMessageRequest:
		return sendResources(m, r)
	case *a2apb.ListTasksRequest:
		return listResources(m, r)
	case *a2apb.GetTaskRequest:
		if r.HistoryLength, err = historyLength(m.HistoryLength, "history_length"); err != nil {
			return err
		}
	}
	if op.TargetsTask() {
		task, where := "", "id"
		if t, ok := m.(hasTaskID); ok { // a push config operation: id is the config's
			task, where = t.GetTaskId(), "task_id"
			if c, ok := m.(hasID); ok {
				r.ConfigID = c.GetId()
			}
		} else if t, ok := m.(hasID); ok {
			task = t.GetId()
		}
		if u, ok := m.(hasURL); ok {
			r.Push = append(r.Push, protocol.PushRef{URL: u.GetUrl(), Where: "url"})
			if u.GetUrl() == "" {
				return protocol.Errorf(protocol.InvalidParams, "url is required")
			}
		}
		r.TaskID = task
		r.AddTask(task, where)
	}
	if t, ok := m.(hasTenant); ok {
		return grpcTenant(r, t.GetTenant(), "tenant")
	}
	return nil
}

// sendResources reads a 1.0 SendMessageRequest.
func sendResources(m *a2apb.SendMessageRequest, r *protocol.Request) error {
	if err := grpcTenant(r, m.GetTenant(), "tenant"); err != nil {
		return err
	}
	r.TaskID = m.GetMessage().GetTaskId()
	r.AddTask(r.TaskID, "message.task_id")
	if len(m.GetMessage().GetReferenceTaskIds()) > protocol.MaxReferenceTasks {
		return protocol.Errorf(protocol.InvalidParams, "message.reference_task_ids has more than %d entries", protocol.MaxReferenceTasks)
	}
	for i, id := range m.GetMessage().GetReferenceTaskIds() {
		if id == "" {
			return protocol.Errorf(protocol.InvalidParams, "message.reference_task_ids[%d] must not be empty", i)
		}
		r.AddTask(id, "message.reference_task_ids["+strconv.Itoa(i)+"]")
	}
	if c := m.GetConfiguration().GetTaskPushNotificationConfig(); c != nil {
		if err := grpcTenant(r, c.GetTenant(), "configuration.task_push_notification_config.tenant"); err != nil {
			return err
		}
		r.AddTask(c.GetTaskId(), "configuration.task_push_notification_config.task_id")
		r.Push = append(r.Push, protocol.PushRef{URL: c.GetUrl(), Where: "configuration.task_push_notification_config.url"})
	}
	r.Message = &protocol.MessageInfo{MessageID: m.GetMessage().GetMessageId(), TaskID: r.TaskID, ContextID: m.GetMessage().GetContextId()}
	r.AddContext(r.Message.ContextID, "message.context_id")
	if c := m.GetConfiguration(); c != nil {
		var err error
		r.HistoryLength, err = historyLength(c.HistoryLength, "configuration.history_length")
		return err
	}
	return nil
}

// historyLength reads an optional int32 history_length (name, where the message has it): nil
// when unset, refused when negative.
func historyLength(n *int32, name string) (*int, error) {
	if n == nil {
		return nil, nil
	}
	if *n < 0 {
		return nil, protocol.Errorf(protocol.InvalidParams, "%s must not be negative", name)
	}
	h := int(*n)
	return &h, nil
}

// listResources reads a 1.0 ListTasksRequest: its filters and paging.
func listResources(m *a2apb.ListTasksRequest, r *protocol.Request) error {
	r.List = &protocol.ListParams{ContextID: m.GetContextId(), PageSize: int(m.GetPageSize()), PageToken: m.GetPageToken(),
		IncludeArtifacts: m.GetIncludeArtifacts()}
	r.AddContextFilter(r.List.ContextID, "context_id")
	if m.GetPageSize() < 0 || m.GetHistoryLength() < 0 {
		return protocol.Errorf(protocol.InvalidParams, "page_size and history_length must not be negative")
	}
	if st := m.GetStatus(); st != a2apb.TaskState_TASK_STATE_UNSPECIFIED {
		if r.List.Status = st.String(); !protocol.ValidTaskState(r.List.Status) {
			return protocol.Errorf(protocol.InvalidParams, "status must be a task state such as TASK_STATE_WORKING")
		}
	}
	if m.HistoryLength != nil {
		h := int(m.GetHistoryLength())
		r.List.HistoryLength = &h
	}
	if ts := m.GetStatusTimestampAfter(); ts != nil {
		r.List.StatusTimestampAfter = ts.AsTime().Format(time.RFC3339Nano)
	}
	return grpcTenant(r, m.GetTenant(), "tenant")
}

// resources03 reads an A2A 0.3 (a2a.v1) request message (protocol.RequestMessage03), where
// tasks are named by resource names: "tasks/{id}" and "tasks/{id}/pushNotificationConfigs/{config}".
func resources03(op protocol.Operation, msg []byte, r *protocol.Request) error {
	m := protocol.RequestMessage03(op)
	if m == nil {
		return nil
	}
	if err := proto.Unmarshal(msg, m); err != nil {
		return err
	}
	target := func(name, where string) error {
		id, ok := protocol.TaskOfName(name)
		if !ok {
			return protocol.Errorf(protocol.InvalidParams, "%s must be tasks/{id}", where)
		}
		r.TaskID = id
		r.AddTask(id, where)
		return nil
	}
	switch m := m.(type) {
	case *a2apb03.SendMessageRequest:
		r.TaskID = m.GetRequest().GetTaskId()
		r.AddTask(r.TaskID, "request.task_id")
		if len(m.GetRequest().GetReferenceTaskIds()) > protocol.MaxReferenceTasks {
			return protocol.Errorf(protocol.InvalidParams, "request.reference_task_ids has more than %d entries", protocol.MaxReferenceTasks)
		}
		for i, id := range m.GetRequest().GetReferenceTaskIds() {
			if id == "" {
				return protocol.Errorf(protocol.InvalidParams, "request.reference_task_ids[%d] must not be empty", i)
			}
			r.AddTask(id, "request.reference_task_ids["+strconv.Itoa(i)+"]")
		}
		if c := m.GetConfiguration().GetPushNotification(); c != nil {
			r.Push = append(r.Push, protocol.PushRef{URL: c.GetUrl(), Where: "configuration.push_notification.url"})
		}
		r.Message = &protocol.MessageInfo{MessageID: m.GetRequest().GetMessageId(), TaskID: r.TaskID, ContextID: m.GetRequest().GetContextId()}
		r.AddContext(r.Message.ContextID, "request.context_id")
		return nil
	case *a2apb03.CreateTaskPushNotificationConfigRequest:
		if err := target(m.GetParent(), "parent"); err != nil {
			return err
		}
		if n := m.GetConfig().GetName(); n != "" {
			id, ok := protocol.TaskOfName(n)
			if !ok || id != r.TaskID {
				return protocol.Errorf(protocol.InvalidParams, "config.name must name the parent's task")
			}
			r.AddTask(id, "config.name")
		}
		r.ConfigID = m.GetConfigId()
		u := m.GetConfig().GetPushNotificationConfig().GetUrl()
		if u == "" {
			return protocol.Errorf(protocol.InvalidParams, "config.push_notification_config.url is required")
		}
		r.Push = append(r.Push, protocol.PushRef{URL: u, Where: "config.push_notification_config.url"})
		return nil
	case hasName:
		return target(m.GetName(), "name")
	case hasParent:
		return target(m.GetParent(), "parent")
	}
	return nil
}
