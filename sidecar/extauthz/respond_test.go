package extauthz

import (
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/require"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/capgate/capgate/sidecar/identity"
)

func allowDecision() *decision {
	return &decision{id: "d-1", op: "SendMessage", principal: identity.Principal{Authenticated: true, Subject: "alice", Tenant: "acme"},
		hdr: header{m: map[string]string{"x-capgate-principal": "mallory", "content-type": "application/json"}}}
}

// TestAllowResponse: an allow sets capgate's headers (overwriting what a
// client sent), removes every other client-sent x-capgate-* header —
// including the principal and tenant headers when capgate does not set
// them — and carries the decision in dynamic metadata.
func TestAllowResponse(t *testing.T) {
	opt := func(k, v string) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
	}
	md := func(id, sub, op string) *structpb.Struct {
		return &structpb.Struct{Fields: map[string]*structpb.Value{
			"decision_id": structpb.NewStringValue(id), "principal": structpb.NewStringValue(sub),
			"operation": structpb.NewStringValue(op)}}
	}
	ok := func(hs []*corev3.HeaderValueOption, remove []string, m *structpb.Struct) *authv3.CheckResponse {
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
				Headers: hs, HeadersToRemove: remove}},
			DynamicMetadata: m}
	}
	forged := header{m: map[string]string{"x-capgate-principal": "mallory", "X-Capgate-Tenant": "evil",
		"x-capgate-other": "1", "content-type": "application/json"}}
	for name, tc := range map[string]struct {
		d    *decision
		want *authv3.CheckResponse
	}{
		"authenticated with a tenant": {allowDecision(), ok(
			[]*corev3.HeaderValueOption{opt("x-capgate-decision-id", "d-1"), opt("x-capgate-principal", "alice"), opt("x-capgate-tenant", "acme")},
			nil, md("d-1", "alice", "SendMessage"))},
		"authenticated, no tenant, forged headers": {
			&decision{id: "d-2", op: "GetTask", principal: identity.Principal{Authenticated: true, Subject: "bob"}, hdr: forged}, ok(
				[]*corev3.HeaderValueOption{opt("x-capgate-decision-id", "d-2"), opt("x-capgate-principal", "bob")},
				[]string{"x-capgate-other", "x-capgate-tenant"}, md("d-2", "bob", "GetTask"))},
		"anonymous, forged headers": {&decision{id: "d-3", op: "GetAgentCard", hdr: forged}, ok(
			[]*corev3.HeaderValueOption{opt("x-capgate-decision-id", "d-3")},
			[]string{"x-capgate-other", "x-capgate-principal", "x-capgate-tenant"}, md("d-3", "", "GetAgentCard"))},
	} {
		t.Run(name, func(t *testing.T) {
			got := (&Server{}).allow(tc.d)
			slices.Sort(got.GetOkResponse().HeadersToRemove)
			require.True(t, proto.Equal(tc.want, got), "got %v", got)
		})
	}
}

func BenchmarkAllow(b *testing.B) {
	s, d := &Server{}, allowDecision()
	b.ReportAllocs()
	for b.Loop() {
		_ = s.allow(d)
	}
}

// TestRequestBody: the body read is the body Envoy sent, byte for byte, from either field.
func TestRequestBody(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"}}`
	require.Equal(t, []byte(body), requestBody(&authv3.AttributeContext_HttpRequest{Body: body}))
	require.Equal(t, []byte(body), requestBody(&authv3.AttributeContext_HttpRequest{RawBody: []byte(body)}))
	require.Nil(t, requestBody(&authv3.AttributeContext_HttpRequest{}))
}
