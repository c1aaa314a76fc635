package protocol

import (
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestGRPCListParams: a gRPC ListTasksRequest gives the same ListParams as
// JSON-RPC and HTTP+JSON: every filter, not only the paging.
func TestGRPCListParams(t *testing.T) {
	after := time.Date(2026, 12, 3, 8, 0, 0, 5, time.UTC)
	hist := int32(2)
	msg, err := proto.Marshal(&a2apb.ListTasksRequest{ContextId: "c1", Status: a2apb.TaskState_TASK_STATE_COMPLETED, PageSize: proto.Int32(3),
		PageToken: "tok", HistoryLength: &hist, StatusTimestampAfter: timestamppb.New(after), IncludeArtifacts: proto.Bool(true)})
	require.NoError(t, err)
	r := &Request{}
	require.NoError(t, grpcResources(ListTasks, msg, r))
	h := 2
	require.Equal(t, &ListParams{ContextID: "c1", Status: "TASK_STATE_COMPLETED", PageSize: 3, PageToken: "tok", HistoryLength: &h,
		IncludeArtifacts: true, StatusTimestampAfter: "2026-12-03T08:00:00.000000005Z"}, r.List)

	msg, err = proto.Marshal(&a2apb.ListTasksRequest{})
	require.NoError(t, err)
	r = &Request{}
	require.NoError(t, grpcResources(ListTasks, msg, r))
	require.Equal(t, &ListParams{}, r.List, "unset fields stay unset")

	for name, m := range map[string]*a2apb.ListTasksRequest{
		"negative page size": {PageSize: proto.Int32(-1)},
		"unknown status":     {Status: a2apb.TaskState(99)},
	} {
		msg, err := proto.Marshal(m)
		require.NoError(t, err)
		err = grpcResources(ListTasks, msg, &Request{})
		var perr *Error
		require.ErrorAs(t, err, &perr, name)
		require.Equal(t, InvalidParams, perr.Code, name)
	}
}
