package protocol

import (
	"encoding/binary"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	a2apb03 "github.com/a2aproject/a2a-go/a2apb"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
)

// gRPC service names of A2A 1.0 (package lf.a2a.v1) and 0.3 (package a2a.v1).
const (
	GRPCService    = "lf.a2a.v1.A2AService"
	GRPCServiceV03 = "a2a.v1.A2AService"
)

// grpcServiceOf is the gRPC service of A2A version v.
func grpcServiceOf(v Version) string {
	if v == V03 {
		return GRPCServiceV03
	}
	return GRPCService
}

// ParseGRPCPath maps a gRPC :path ("/lf.a2a.v1.A2AService/SendMessage") to its operation; the
// service's package gives the version. Method names are matched exactly.
func ParseGRPCPath(path string) (Operation, Version, *Error) {
	svc, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || !strings.HasPrefix(path, "/") {
		return "", "", Errorf(MethodNotFound, "gRPC method %q not found", clip(path))
	}
	switch svc {
	case GRPCService:
		if op, ok := grpcOps.op(method); ok {
			return op, V1, nil
		}
		if op, ok := grpc03Ops.op(method); ok {
			return "", "", Errorf(MethodNotFound, "gRPC method %q is an A2A 0.3 method; use %s", method, GRPCMethod(V1, op))
		}
	case GRPCServiceV03:
		if op, ok := grpc03Ops.op(method); ok {
			return op, V03, nil
		}
		if op, ok := grpcOps.op(method); ok {
			return "", "", Errorf(MethodNotFound, "gRPC method %q is not an A2A 0.3 method; use %s", method, GRPCMethod(V1, op))
		}
	}
	return "", "", Errorf(MethodNotFound, "gRPC method %q not found", clip(path))
}

// isGRPCContentType reports whether a content type is gRPC (application/grpc,
// application/grpc+proto, application/grpc-web...).
func isGRPCContentType(ct string) bool {
	return len(ct) >= len("application/grpc") && strings.EqualFold(ct[:len("application/grpc")], "application/grpc")
}

// IsGRPCContentType reports whether a content type selects the gRPC binding.
func IsGRPCContentType(ct string) bool { return isGRPCContentType(ct) }

// GRPCFrameHeader is the length of a gRPC message's prefix: a compressed
// flag and the message's length, four bytes big-endian.
const GRPCFrameHeader = 5

// AppendGRPCFrame appends msg to dst as one uncompressed, length-prefixed
// gRPC message.
func AppendGRPCFrame(dst, msg []byte) []byte {
	dst = append(dst, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(dst[len(dst)-4:], uint32(len(msg)))
	return append(dst, msg...)
}

// GRPCMessageLength returns the length the first gRPC frame header of body declares, and
// whether body holds a whole header.
func GRPCMessageLength(body []byte) (int64, bool) {
	if len(body) < GRPCFrameHeader {
		return 0, false
	}
	return int64(binary.BigEndian.Uint32(body[1:GRPCFrameHeader])), true
}

// parseGRPC reads a gRPC request: the operation and version from the :path, every resource
// from the one, uncompressed request message.
func parseGRPC(method, path, ct string, body []byte, lim Limits) (*Request, *Error) {
	lim = lim.withDefaults()
	r := &Request{Binding: GRPC, Method: path}
	op, version, perr := ParseGRPCPath(path)
	if perr != nil {
		return r, perr
	}
	r.Operation, r.Version = op, version
	if method != http.MethodPost {
		return r, Errorf(MethodNotAllowed, "gRPC requests must use POST")
	}
	if strings.HasPrefix(strings.ToLower(ct), "application/grpc-web-text") {
		return r, Errorf(ContentTypeNotSupported, "grpc-web-text requests cannot be authorized; use binary gRPC or grpc-web")
	}
	if len(body) < GRPCFrameHeader {
		return r, Errorf(InvalidRequest, "the gRPC request message is malformed")
	}
	if body[0] != 0 {
		return r, Errorf(InvalidRequest, "compressed gRPC request messages cannot be authorized; send requests to this agent uncompressed")
	}
	n, _ := GRPCMessageLength(body)
	switch rest := int64(len(body) - GRPCFrameHeader); {
	case n > lim.MaxBodyBytes:
		return r, Errorf(PayloadTooLarge, "request message is larger than the limit of %d bytes", lim.MaxBodyBytes)
	case n > rest:
		return r, Errorf(InvalidRequest, "the gRPC request message is truncated")
	case n < rest:
		return r, Errorf(InvalidRequest, "exactly one gRPC request message is expected")
	}
	msg := body[GRPCFrameHeader:]
	r.grpcMsg = msg
	var err error
	if version == V1 {
		err = grpcResources(op, msg, r)
	} else {
		err = grpcResources03(op, msg, r)
	}
	if perr := AsError(err, InvalidRequest, "the gRPC request message could not be decoded"); perr != nil {
		return r, perr
	}
	if version == V1 && r.Message != nil {
		if perr := r.grpcMessageInfo(lim); perr != nil {
			return r, perr
		}
	}
	if op.TargetsTask() && r.TaskID == "" {
		return r, Errorf(InvalidParams, "the task id is required")
	}
	for _, t := range r.Tasks {
		if err := checkIdentifier(t.Where, t.ID); err != nil {
			return r, err
		}
	}
	for _, c := range r.Contexts {
		if err := checkIdentifier(c.Where, c.ID); err != nil {
			return r, err
		}
	}
	if r.Tenant != "" && !validTenant(r.Tenant) {
		return r, Errorf(InvalidParams, "tenant must be 1 to %d characters of A-Z a-z 0-9 . _ - and not . or ..", maxTenantBytes)
	}
	return r, nil
}

// grpcTenant merges one more tenant position into r.Tenant.
func grpcTenant(r *Request, t, where string) error {
	var err *Error
	if r.Tenant, err = agree(where, r.Tenant, t); err != nil {
		return err
	}
	return nil
}

// grpcResources reads an A2A 1.0 (lf.a2a.v1) request message.
func grpcResources(op Operation, msg []byte, r *Request) error {
	target := func(tenant, id, where string) error {
		r.TaskID = id
		r.addTask(id, where)
		return grpcTenant(r, tenant, "tenant")
	}
	switch op {
	case SendMessage, SendStreamingMessage:
		var m a2apb.SendMessageRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		if err := grpcTenant(r, m.GetTenant(), "tenant"); err != nil {
			return err
		}
		r.TaskID = m.GetMessage().GetTaskId()
		r.addTask(r.TaskID, "message.task_id")
		if len(m.GetMessage().GetReferenceTaskIds()) > maxReferenceTasks {
			return Errorf(InvalidParams, "message.reference_task_ids has more than %d entries", maxReferenceTasks)
		}
		for i, id := range m.GetMessage().GetReferenceTaskIds() {
			if id == "" {
				return Errorf(InvalidParams, "message.reference_task_ids[%d] must not be empty", i)
			}
			r.addTask(id, "message.reference_task_ids["+strconv.Itoa(i)+"]")
		}
		if c := m.GetConfiguration().GetTaskPushNotificationConfig(); c != nil {
			if err := grpcTenant(r, c.GetTenant(), "configuration.task_push_notification_config.tenant"); err != nil {
				return err
			}
			r.addTask(c.GetTaskId(), "configuration.task_push_notification_config.task_id")
			r.Push = append(r.Push, PushRef{URL: c.GetUrl(), Where: "configuration.task_push_notification_config.url"})
		}
		r.Message = &MessageInfo{MessageID: m.GetMessage().GetMessageId(), TaskID: r.TaskID, ContextID: m.GetMessage().GetContextId()}
		r.addContext(r.Message.ContextID, "message.context_id")
		return nil
	case GetTask:
		var m a2apb.GetTaskRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		return target(m.GetTenant(), m.GetId(), "id")
	case CancelTask:
		var m a2apb.CancelTaskRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		return target(m.GetTenant(), m.GetId(), "id")
	case SubscribeToTask:
		var m a2apb.SubscribeToTaskRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		return target(m.GetTenant(), m.GetId(), "id")
	case CreateTaskPushNotificationConfig:
		var m a2apb.TaskPushNotificationConfig
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		r.ConfigID = m.GetId()
		r.Push = append(r.Push, PushRef{URL: m.GetUrl(), Where: "url"})
		if m.GetUrl() == "" {
			return Errorf(InvalidParams, "url is required")
		}
		return target(m.GetTenant(), m.GetTaskId(), "task_id")
	case GetTaskPushNotificationConfig:
		var m a2apb.GetTaskPushNotificationConfigRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		r.ConfigID = m.GetId()
		return target(m.GetTenant(), m.GetTaskId(), "task_id")
	case ListTaskPushNotificationConfigs:
		var m a2apb.ListTaskPushNotificationConfigsRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		return target(m.GetTenant(), m.GetTaskId(), "task_id")
	case DeleteTaskPushNotificationConfig:
		var m a2apb.DeleteTaskPushNotificationConfigRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		r.ConfigID = m.GetId()
		return target(m.GetTenant(), m.GetTaskId(), "task_id")
	case ListTasks:
		var m a2apb.ListTasksRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		r.List = &ListParams{ContextID: m.GetContextId(), PageSize: int(m.GetPageSize()), PageToken: m.GetPageToken(),
			IncludeArtifacts: m.GetIncludeArtifacts()}
		r.addContextFilter(r.List.ContextID, "context_id")
		if m.GetPageSize() < 0 || m.GetHistoryLength() < 0 {
			return Errorf(InvalidParams, "page_size and history_length must not be negative")
		}
		if st := m.GetStatus(); st != a2apb.TaskState_TASK_STATE_UNSPECIFIED {
			if r.List.Status = st.String(); !validTaskState(r.List.Status) {
				return Errorf(InvalidParams, "status must be a task state such as TASK_STATE_WORKING")
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
	case GetExtendedAgentCard:
		var m a2apb.GetExtendedAgentCardRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		return grpcTenant(r, m.GetTenant(), "tenant")
	}
	return nil
}

// grpcResources03 reads an A2A 0.3 (a2a.v1) request message, where tasks are named by resource
// names: "tasks/{id}" and "tasks/{id}/pushNotificationConfigs/{config}".
func grpcResources03(op Operation, msg []byte, r *Request) error {
	named := func(name, where string) error {
		id, ok := taskFromName(name)
		if !ok {
			return Errorf(InvalidParams, "%s must be tasks/{id}", where)
		}
		r.TaskID = id
		r.addTask(id, where)
		return nil
	}
	switch op {
	case SendMessage, SendStreamingMessage:
		var m a2apb03.SendMessageRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		r.TaskID = m.GetRequest().GetTaskId()
		r.addTask(r.TaskID, "request.task_id")
		if len(m.GetRequest().GetReferenceTaskIds()) > maxReferenceTasks {
			return Errorf(InvalidParams, "request.reference_task_ids has more than %d entries", maxReferenceTasks)
		}
		for i, id := range m.GetRequest().GetReferenceTaskIds() {
			if id == "" {
				return Errorf(InvalidParams, "request.reference_task_ids[%d] must not be empty", i)
			}
			r.addTask(id, "request.reference_task_ids["+strconv.Itoa(i)+"]")
		}
		if c := m.GetConfiguration().GetPushNotification(); c != nil {
			r.Push = append(r.Push, PushRef{URL: c.GetUrl(), Where: "configuration.push_notification.url"})
		}
		r.Message = &MessageInfo{MessageID: m.GetRequest().GetMessageId(), TaskID: r.TaskID, ContextID: m.GetRequest().GetContextId()}
		r.addContext(r.Message.ContextID, "request.context_id")
		return nil
	case GetTask:
		var m a2apb03.GetTaskRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		return named(m.GetName(), "name")
	case CancelTask:
		var m a2apb03.CancelTaskRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		return named(m.GetName(), "name")
	case SubscribeToTask:
		var m a2apb03.TaskSubscriptionRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		return named(m.GetName(), "name")
	case CreateTaskPushNotificationConfig:
		var m a2apb03.CreateTaskPushNotificationConfigRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		if err := named(m.GetParent(), "parent"); err != nil {
			return err
		}
		if n := m.GetConfig().GetName(); n != "" {
			id, ok := taskFromName(n)
			if !ok || id != r.TaskID {
				return Errorf(InvalidParams, "config.name must name the parent's task")
			}
			r.addTask(id, "config.name")
		}
		r.ConfigID = m.GetConfigId()
		u := m.GetConfig().GetPushNotificationConfig().GetUrl()
		if u == "" {
			return Errorf(InvalidParams, "config.push_notification_config.url is required")
		}
		r.Push = append(r.Push, PushRef{URL: u, Where: "config.push_notification_config.url"})
		return nil
	case GetTaskPushNotificationConfig:
		var m a2apb03.GetTaskPushNotificationConfigRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		return named(m.GetName(), "name")
	case ListTaskPushNotificationConfigs:
		var m a2apb03.ListTaskPushNotificationConfigRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		return named(m.GetParent(), "parent")
	case DeleteTaskPushNotificationConfig:
		var m a2apb03.DeleteTaskPushNotificationConfigRequest
		if err := proto.Unmarshal(msg, &m); err != nil {
			return err
		}
		return named(m.GetName(), "name")
	}
	return nil
}

// taskFromName extracts {id} from "tasks/{id}" or "tasks/{id}/pushNotificationConfigs/{c}".
func taskFromName(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "tasks/")
	if !ok {
		return "", false
	}
	id, sub, hasSub := strings.Cut(rest, "/")
	if id == "" || (hasSub && !strings.HasPrefix(sub, "pushNotificationConfigs/")) {
		return "", false
	}
	return id, true
}
