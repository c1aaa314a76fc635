package extauthz

import (
	"context"
	"encoding/binary"
	"net/http"
	"strings"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/proto"

	a2apb03 "github.com/a2aproject/a2a-go/a2apb"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"

	"github.com/capgate/capgate/sidecar/protocol"
)

// isGRPC reports whether a content type is gRPC (application/grpc,
// application/grpc+proto, application/grpc-web...).
func isGRPC(ct string) bool {
	return len(ct) >= len("application/grpc") && strings.EqualFold(ct[:len("application/grpc")], "application/grpc")
}

// grpcFrameHeader is the length-prefixed message header: a compressed flag
// byte and a big-endian uint32 length.
const grpcFrameHeader = 5

// decideGRPC decides a gRPC-binding request. The operation and version come
// from the :path; the task id (for task operations, and for a message that
// continues a task) is read from the request message, which Envoy must send
// as bytes (with_request_body.pack_as_bytes).
func (s *Server) decideGRPC(ctx context.Context, hr *authv3.AttributeContext_HttpRequest, path, method, ct string, d *decision) {
	d.binding = protocol.GRPC
	op, version, perr := protocol.ParseGRPCPath(path)
	if perr != nil {
		d.err = perr
		return
	}
	d.op, d.version = op, version
	if method != http.MethodPost {
		d.err = protocol.Errorf(protocol.MethodNotAllowed, "gRPC requests must use POST")
		return
	}
	r := protocol.Request{Binding: protocol.GRPC, Version: version, Operation: op, Method: path}
	if op.Message() || needsTask(op) {
		msg, err := s.grpcMessage(hr, ct, d)
		if err != nil {
			d.err = err
			return
		}
		if r.TaskID, err = grpcTaskID(version, op, msg); err != nil {
			d.err = err
			return
		}
	}
	s.authorize(ctx, hr, &r, d)
}

// needsTask reports whether op targets an existing task.
func needsTask(op protocol.Operation) bool {
	switch op {
	case protocol.GetTask, protocol.CancelTask, protocol.SubscribeToTask,
		protocol.CreateTaskPushNotificationConfig, protocol.GetTaskPushNotificationConfig,
		protocol.ListTaskPushNotificationConfigs, protocol.DeleteTaskPushNotificationConfig:
		return true
	}
	return false
}

// grpcMessage returns the one request message of a gRPC body.
func (s *Server) grpcMessage(hr *authv3.AttributeContext_HttpRequest, ct string, d *decision) ([]byte, *protocol.Error) {
	if d.hdr.get(headerPartialBody) == "true" {
		return nil, s.misconfigured(d, msgTruncated)
	}
	b := hr.GetRawBody()
	if len(b) == 0 {
		if hr.GetBody() != "" {
			return nil, s.misconfigured(d, msgNotBytes)
		}
		return nil, s.misconfigured(d, msgNoBody+" (with pack_as_bytes: true); capgate reads the task id from the gRPC request message")
	}
	if strings.HasPrefix(strings.ToLower(ct), "application/grpc-web-text") {
		return nil, protocol.Errorf(protocol.UnsupportedMediaType, "grpc-web-text requests cannot be authorized; use binary gRPC or grpc-web")
	}
	if len(b) < grpcFrameHeader {
		return nil, protocol.Errorf(protocol.InvalidRequest, "the gRPC request message is malformed")
	}
	if b[0] != 0 {
		return nil, protocol.Errorf(protocol.InvalidRequest,
			"compressed gRPC request messages cannot be authorized; send requests to this agent uncompressed")
	}
	n := int64(binary.BigEndian.Uint32(b[1:grpcFrameHeader]))
	limit := s.limits.MaxBodyBytes
	if limit <= 0 {
		limit = protocol.DefaultMaxBodyBytes
	}
	switch rest := int64(len(b) - grpcFrameHeader); {
	case n > limit:
		return nil, protocol.Errorf(protocol.PayloadTooLarge, "request message is larger than the limit of %d bytes", limit)
	case n > rest:
		return nil, s.misconfigured(d, msgTruncated)
	case n < rest:
		return nil, protocol.Errorf(protocol.InvalidRequest, "exactly one gRPC request message is expected")
	}
	return b[grpcFrameHeader:], nil
}

// grpcTaskID decodes the request message of op and returns the task it
// targets ("" for a message that starts a new task).
func grpcTaskID(v protocol.Version, op protocol.Operation, msg []byte) (string, *protocol.Error) {
	var (
		id  string
		err error
	)
	if v == protocol.V1 {
		id, err = taskIDv1(op, msg)
	} else {
		id, err = taskIDv03(op, msg)
	}
	if err != nil {
		return "", protocol.Wrap(protocol.InvalidRequest, err, "the gRPC request message could not be decoded")
	}
	if needsTask(op) && id == "" {
		return "", protocol.Errorf(protocol.InvalidParams, "the task id is required")
	}
	return id, nil
}

func taskIDv1(op protocol.Operation, msg []byte) (string, error) {
	switch op {
	case protocol.SendMessage, protocol.SendStreamingMessage:
		var m a2apb.SendMessageRequest
		err := proto.Unmarshal(msg, &m)
		return m.GetMessage().GetTaskId(), err
	case protocol.GetTask:
		var m a2apb.GetTaskRequest
		err := proto.Unmarshal(msg, &m)
		return m.GetId(), err
	case protocol.CancelTask:
		var m a2apb.CancelTaskRequest
		err := proto.Unmarshal(msg, &m)
		return m.GetId(), err
	case protocol.SubscribeToTask:
		var m a2apb.SubscribeToTaskRequest
		err := proto.Unmarshal(msg, &m)
		return m.GetId(), err
	case protocol.CreateTaskPushNotificationConfig:
		var m a2apb.TaskPushNotificationConfig
		err := proto.Unmarshal(msg, &m)
		return m.GetTaskId(), err
	case protocol.GetTaskPushNotificationConfig:
		var m a2apb.GetTaskPushNotificationConfigRequest
		err := proto.Unmarshal(msg, &m)
		return m.GetTaskId(), err
	case protocol.ListTaskPushNotificationConfigs:
		var m a2apb.ListTaskPushNotificationConfigsRequest
		err := proto.Unmarshal(msg, &m)
		return m.GetTaskId(), err
	case protocol.DeleteTaskPushNotificationConfig:
		var m a2apb.DeleteTaskPushNotificationConfigRequest
		err := proto.Unmarshal(msg, &m)
		return m.GetTaskId(), err
	}
	return "", nil
}

// taskIDv03 reads the 0.3 messages, where tasks are named by resource
// names: "tasks/{id}" and "tasks/{id}/pushNotificationConfigs/{config}".
func taskIDv03(op protocol.Operation, msg []byte) (string, error) {
	var name string
	var err error
	switch op {
	case protocol.SendMessage, protocol.SendStreamingMessage:
		var m a2apb03.SendMessageRequest
		err := proto.Unmarshal(msg, &m)
		return m.GetRequest().GetTaskId(), err
	case protocol.GetTask:
		var m a2apb03.GetTaskRequest
		err = proto.Unmarshal(msg, &m)
		name = m.GetName()
	case protocol.CancelTask:
		var m a2apb03.CancelTaskRequest
		err = proto.Unmarshal(msg, &m)
		name = m.GetName()
	case protocol.SubscribeToTask:
		var m a2apb03.TaskSubscriptionRequest
		err = proto.Unmarshal(msg, &m)
		name = m.GetName()
	case protocol.CreateTaskPushNotificationConfig:
		var m a2apb03.CreateTaskPushNotificationConfigRequest
		err = proto.Unmarshal(msg, &m)
		name = m.GetParent()
	case protocol.GetTaskPushNotificationConfig:
		var m a2apb03.GetTaskPushNotificationConfigRequest
		err = proto.Unmarshal(msg, &m)
		name = m.GetName()
	case protocol.ListTaskPushNotificationConfigs:
		var m a2apb03.ListTaskPushNotificationConfigRequest
		err = proto.Unmarshal(msg, &m)
		name = m.GetParent()
	case protocol.DeleteTaskPushNotificationConfig:
		var m a2apb03.DeleteTaskPushNotificationConfigRequest
		err = proto.Unmarshal(msg, &m)
		name = m.GetName()
	default:
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return taskFromName(name), nil
}

// taskFromName extracts {id} from "tasks/{id}" or "tasks/{id}/...", "" when
// the name has another shape.
func taskFromName(name string) string {
	rest, ok := strings.CutPrefix(name, "tasks/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}
