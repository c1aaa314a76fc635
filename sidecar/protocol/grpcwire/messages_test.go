package grpcwire_test

import (
	"encoding/binary"
	"net/http"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
	"github.com/capgate/capgate/sidecar/protocol/wire"
)

func grpcFrame(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	out := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	return append(out, b...)
}

func parseGRPC(t *testing.T, op string, m proto.Message) (*protocol.Request, *protocol.Error) {
	t.Helper()
	h := http.Header{"Content-Type": {"application/grpc"}}
	return wire.Parse(protocol.Envelope{Method: http.MethodPost, Path: "/" + protocol.GRPCService + "/" + op,
		Header: protocol.HTTPHeader(h), Body: grpcFrame(t, m), GRPC: true}, "", protocol.Limits{})
}

// TestGRPCSendMatchesJSONRPC: a gRPC SendMessage is read into the same request model as the
// JSON-RPC call carrying its forwarded params — the message the router and limits see, the tasks,
// tenant and push configs admission checks — and the handler is sent those params.
func TestGRPCSendMatchesJSONRPC(t *testing.T) {
	meta, err := structpb.NewStruct(map[string]any{"skillId": "lookup-invoice"})
	require.NoError(t, err)
	req := &a2apb.SendMessageRequest{
		Tenant: "acme",
		Message: &a2apb.Message{MessageId: "m-1", TaskId: "t-1", ContextId: "c-1", Role: a2apb.Role_ROLE_USER,
			ReferenceTaskIds: []string{"t-0"}, Metadata: meta,
			Parts: []*a2apb.Part{
				{Content: &a2apb.Part_Text{Text: "reconcile this"}},
				{Content: &a2apb.Part_Raw{Raw: []byte("%PDF-1.7")}, MediaType: "application/pdf"},
				{Content: &a2apb.Part_Data{Data: structpb.NewNumberValue(1)}},
			}},
		Configuration: &a2apb.SendMessageConfiguration{AcceptedOutputModes: []string{"text/plain"},
			TaskPushNotificationConfig: &a2apb.TaskPushNotificationConfig{TaskId: "t-1", Url: "https://hooks.example.com/a"}},
	}
	g, perr := parseGRPC(t, "SendMessage", req)
	require.Nil(t, perr)
	params, perr := g.ForwardParams()
	require.Nil(t, perr)
	require.True(t, jsontext.Value(params).IsValid())

	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + string(params) + `}`
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("A2A-Version", "1.0")
	j, perr := wire.Parse(protocol.Envelope{Method: http.MethodPost, Path: "/", Header: protocol.HTTPHeader(h), Body: []byte(body)}, "", protocol.Limits{})
	require.Nil(t, perr)

	require.Equal(t, j.Message, g.Message)
	require.Equal(t, "lookup-invoice", g.Message.SkillHint)
	require.Equal(t, []string{"text/plain", "application/pdf", "application/json"},
		[]string{g.Message.Parts[0].MediaType, g.Message.Parts[1].MediaType, g.Message.Parts[2].MediaType})
	require.Equal(t, int64(len("%PDF-1.7")), g.Message.Parts[1].InlineBytes)
	require.Equal(t, j.Tenant, g.Tenant)
	require.Equal(t, j.TaskID, g.TaskID)
	require.Equal(t, len(j.Tasks), len(g.Tasks))
	for i := range j.Tasks {
		require.Equal(t, j.Tasks[i].ID, g.Tasks[i].ID)
	}
	require.Equal(t, len(j.Push), len(g.Push))
	require.Equal(t, j.Push[0].URL, g.Push[0].URL)
}

// TestGRPCMessageChecks: a gRPC message is held to the JSON-RPC message rules.
func TestGRPCMessageChecks(t *testing.T) {
	_, perr := parseGRPC(t, "SendMessage", &a2apb.SendMessageRequest{Message: &a2apb.Message{Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hi"}}}}})
	require.NotNil(t, perr)
	require.Equal(t, protocol.InvalidParams, perr.Code)
	require.Contains(t, perr.Message, "messageId")
}

// TestGRPCForwardTaskOps: task operations are forwarded as their 1.0 JSON-RPC params.
func TestGRPCForwardTaskOps(t *testing.T) {
	hist := int32(2)
	g, perr := parseGRPC(t, "GetTask", &a2apb.GetTaskRequest{Tenant: "acme", Id: "t-1", HistoryLength: &hist})
	require.Nil(t, perr)
	params, perr := g.ForwardParams()
	require.Nil(t, perr)
	require.JSONEq(t, `{"tenant":"acme","id":"t-1","historyLength":2}`, string(params))

	g, perr = parseGRPC(t, "DeleteTaskPushNotificationConfig", &a2apb.DeleteTaskPushNotificationConfigRequest{TaskId: "t-1", Id: "c-1"})
	require.Nil(t, perr)
	params, perr = g.ForwardParams()
	require.Nil(t, perr)
	require.JSONEq(t, `{"taskId":"t-1","id":"c-1"}`, string(params))
}

// TestGRPCRefusal: a gRPC refusal is trailers-only, with the status its code maps to.
func TestGRPCRefusal(t *testing.T) {
	r := grpcwire.Refusal(protocol.Errorf(protocol.TaskNotCancelable, "%s", "100% done"))
	require.Equal(t, http.StatusOK, r.Status)
	require.Empty(t, r.Body)
	h := map[string]string{}
	for _, kv := range r.Header {
		h[kv[0]] = kv[1]
	}
	require.Equal(t, "application/grpc", h["content-type"])
	require.Equal(t, "9", h["grpc-status"]) // FAILED_PRECONDITION
	require.Equal(t, "100%25 done", h["grpc-message"])
	require.NotEmpty(t, h["grpc-status-details-bin"])
}
