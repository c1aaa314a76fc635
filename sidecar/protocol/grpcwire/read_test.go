package grpcwire

import (
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/capgate/capgate/sidecar/protocol"
)

// TestGRPCListParams: a gRPC ListTasksRequest gives the same protocol.ListParams as
// JSON-RPC and HTTP+JSON: every filter, not only the paging.
func TestGRPCListParams(t *testing.T) {
	after := time.Date(2026, 12, 3, 8, 0, 0, 5, time.UTC)
	hist := int32(2)
	msg, err := proto.Marshal(&a2apb.ListTasksRequest{ContextId: "c1", Status: a2apb.TaskState_TASK_STATE_COMPLETED, PageSize: proto.Int32(3),
		PageToken: "tok", HistoryLength: &hist, StatusTimestampAfter: timestamppb.New(after), IncludeArtifacts: proto.Bool(true)})
	require.NoError(t, err)
	r := &protocol.Request{}
	require.NoError(t, resources(protocol.ListTasks, msg, r))
	h := 2
	require.Equal(t, &protocol.ListParams{ContextID: "c1", Status: "TASK_STATE_COMPLETED", PageSize: 3, PageToken: "tok", HistoryLength: &h,
		IncludeArtifacts: true, StatusTimestampAfter: "2026-12-03T08:00:00.000000005Z"}, r.List)

	msg, err = proto.Marshal(&a2apb.ListTasksRequest{})
	require.NoError(t, err)
	r = &protocol.Request{}
	require.NoError(t, resources(protocol.ListTasks, msg, r))
	require.Equal(t, &protocol.ListParams{}, r.List, "unset fields stay unset")

	for name, m := range map[string]*a2apb.ListTasksRequest{
		"negative page size": {PageSize: proto.Int32(-1)},
		"unknown status":     {Status: a2apb.TaskState(99)},
	} {
		msg, err := proto.Marshal(m)
		require.NoError(t, err)
		err = resources(protocol.ListTasks, msg, &protocol.Request{})
		var perr *protocol.Error
		require.ErrorAs(t, err, &perr, name)
		require.Equal(t, protocol.InvalidParams, perr.Code, name)
	}
}

func TestParsePath(t *testing.T) {
	tests := []struct {
		path string
		op   protocol.Operation
		v    protocol.Version
		msg  string
	}{
		{path: "/lf.a2a.v1.A2AService/SendMessage", op: protocol.SendMessage, v: protocol.V1},
		{path: "/lf.a2a.v1.A2AService/SendStreamingMessage", op: protocol.SendStreamingMessage, v: protocol.V1},
		{path: "/lf.a2a.v1.A2AService/GetTask", op: protocol.GetTask, v: protocol.V1},
		{path: "/lf.a2a.v1.A2AService/ListTasks", op: protocol.ListTasks, v: protocol.V1},
		{path: "/lf.a2a.v1.A2AService/CancelTask", op: protocol.CancelTask, v: protocol.V1},
		{path: "/lf.a2a.v1.A2AService/SubscribeToTask", op: protocol.SubscribeToTask, v: protocol.V1},
		{path: "/lf.a2a.v1.A2AService/CreateTaskPushNotificationConfig", op: protocol.CreateTaskPushNotificationConfig, v: protocol.V1},
		{path: "/lf.a2a.v1.A2AService/GetTaskPushNotificationConfig", op: protocol.GetTaskPushNotificationConfig, v: protocol.V1},
		{path: "/lf.a2a.v1.A2AService/ListTaskPushNotificationConfigs", op: protocol.ListTaskPushNotificationConfigs, v: protocol.V1},
		{path: "/lf.a2a.v1.A2AService/DeleteTaskPushNotificationConfig", op: protocol.DeleteTaskPushNotificationConfig, v: protocol.V1},
		{path: "/lf.a2a.v1.A2AService/GetExtendedAgentCard", op: protocol.GetExtendedAgentCard, v: protocol.V1},
		{path: "/a2a.v1.A2AService/SendMessage", op: protocol.SendMessage, v: protocol.V03},
		{path: "/a2a.v1.A2AService/SendStreamingMessage", op: protocol.SendStreamingMessage, v: protocol.V03},
		{path: "/a2a.v1.A2AService/GetTask", op: protocol.GetTask, v: protocol.V03},
		{path: "/a2a.v1.A2AService/CancelTask", op: protocol.CancelTask, v: protocol.V03},
		{path: "/a2a.v1.A2AService/TaskSubscription", op: protocol.SubscribeToTask, v: protocol.V03},
		{path: "/a2a.v1.A2AService/CreateTaskPushNotificationConfig", op: protocol.CreateTaskPushNotificationConfig, v: protocol.V03},
		{path: "/a2a.v1.A2AService/GetTaskPushNotificationConfig", op: protocol.GetTaskPushNotificationConfig, v: protocol.V03},
		{path: "/a2a.v1.A2AService/ListTaskPushNotificationConfig", op: protocol.ListTaskPushNotificationConfigs, v: protocol.V03},
		{path: "/a2a.v1.A2AService/DeleteTaskPushNotificationConfig", op: protocol.DeleteTaskPushNotificationConfig, v: protocol.V03},
		{path: "/a2a.v1.A2AService/GetAgentCard", op: protocol.GetExtendedAgentCard, v: protocol.V03},
		{path: "/lf.a2a.v1.A2AService/TaskSubscription", msg: `gRPC method "TaskSubscription" is an A2A 0.3 method; use /lf.a2a.v1.A2AService/SubscribeToTask`},
		{path: "/a2a.v1.A2AService/ListTasks", msg: `gRPC method "ListTasks" is not an A2A 0.3 method; use /lf.a2a.v1.A2AService/ListTasks`},
		{path: "/lf.a2a.v1.A2AService/sendMessage", msg: `gRPC method "/lf.a2a.v1.A2AService/sendMessage" not found`},
		{path: "/lf.a2a.v1.A2AService/SendMessage/", msg: `gRPC method "/lf.a2a.v1.A2AService/SendMessage/" not found`},
		{path: "lf.a2a.v1.A2AService/SendMessage", msg: `gRPC method "lf.a2a.v1.A2AService/SendMessage" not found`},
		{path: "/grpc.health.v1.Health/Check", msg: `gRPC method "/grpc.health.v1.Health/Check" not found`},
		{path: "", msg: `gRPC method "" not found`},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			op, v, err := ParsePath(tc.path)
			if tc.msg != "" {
				require.NotNil(t, err)
				require.Equal(t, protocol.MethodNotFound, err.Code)
				require.Equal(t, tc.msg, err.Message)
				return
			}
			require.Nil(t, err)
			require.Equal(t, tc.op, op)
			require.Equal(t, tc.v, v)
		})
	}
}

// TestParsePathTable: every gRPC method of the operation table reads back as its operation and
// version.
func TestParsePathTable(t *testing.T) {
	for _, op := range protocol.Operations() {
		for _, v := range []protocol.Version{protocol.V1, protocol.V03} {
			full := protocol.GRPCMethod(v, op)
			if full == "" {
				continue
			}
			got, gv, perr := ParsePath(full)
			require.Nil(t, perr, full)
			require.Equal(t, op, got)
			require.Equal(t, v, gv)
		}
	}
}
