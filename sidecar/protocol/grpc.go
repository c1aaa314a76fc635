package protocol

import "strings"

// gRPC service names of A2A 1.0 (package lf.a2a.v1) and 0.3 (package a2a.v1).
const (
	GRPCService    = "lf.a2a.v1.A2AService"
	GRPCServiceV03 = "a2a.v1.A2AService"
)

// ParseGRPCPath maps a gRPC :path ("/lf.a2a.v1.A2AService/SendMessage") to its operation; the
// service's package gives the version. Method names are matched exactly.
func ParseGRPCPath(path string) (Operation, Version, *Error) {
	svc, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || !strings.HasPrefix(path, "/") {
		return "", "", Errorf(MethodNotFound, "gRPC method %q not found", clip(path))
	}
	switch svc {
	case GRPCService:
		if op, ok := v10Operation(method); ok {
			return op, V1, nil
		}
		if op, ok := grpcV03Operation(method); ok {
			return "", "", Errorf(MethodNotFound, "gRPC method %q is an A2A 0.3 method; use /%s/%s", method, GRPCService, op)
		}
	case GRPCServiceV03:
		if op, ok := grpcV03Operation(method); ok {
			return op, V03, nil
		}
		if _, ok := v10Operation(method); ok {
			return "", "", Errorf(MethodNotFound, "gRPC method %q is not an A2A 0.3 method; use /%s/%s", method, GRPCService, method)
		}
	}
	return "", "", Errorf(MethodNotFound, "gRPC method %q not found", clip(path))
}

// grpcV03Operation maps a method of the 0.3 gRPC service.
func grpcV03Operation(method string) (Operation, bool) {
	switch method {
	case "SendMessage":
		return SendMessage, true
	case "SendStreamingMessage":
		return SendStreamingMessage, true
	case "GetTask":
		return GetTask, true
	case "CancelTask":
		return CancelTask, true
	case "TaskSubscription":
		return SubscribeToTask, true
	case "CreateTaskPushNotificationConfig":
		return CreateTaskPushNotificationConfig, true
	case "GetTaskPushNotificationConfig":
		return GetTaskPushNotificationConfig, true
	case "ListTaskPushNotificationConfig":
		return ListTaskPushNotificationConfigs, true
	case "DeleteTaskPushNotificationConfig":
		return DeleteTaskPushNotificationConfig, true
	case "GetAgentCard": // 0.3's authenticated card call
		return GetExtendedAgentCard, true
	default:
		return "", false
	}
}
