package extauthz

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/capgate/capgate/sidecar/identity"
)

func allowDecision() *decision {
	return &decision{id: "d-1", op: "SendMessage", principal: identity.Principal{Authenticated: true, Subject: "alice", Tenant: "acme"},
		hdr: header{m: map[string]string{"x-capgate-principal": "mallory", "content-type": "application/json"}}}
}

func TestAllowPlainEqualsPacked(t *testing.T) {
	s := &Server{}
	for _, d := range []*decision{allowDecision(), {id: "d-2", op: "GetAgentCard"}} {
		require.True(t, proto.Equal(s.allow(d), s.allowPlain(d)))
	}
}

func BenchmarkAllowPacked(b *testing.B) {
	s, d := &Server{}, allowDecision()
	b.ReportAllocs()
	for b.Loop() {
		_ = s.allow(d)
	}
}

func BenchmarkAllowPlain(b *testing.B) {
	s, d := &Server{}, allowDecision()
	b.ReportAllocs()
	for b.Loop() {
		_ = s.allowPlain(d)
	}
}

// allowPlain is allow written plainly: the reference the packed allow must equal.
func (s *Server) allowPlain(d *decision) *authv3.CheckResponse {
	hs := make([]*corev3.HeaderValueOption, 0, 3)
	hs = append(hs, headerOpt(HeaderDecisionID, d.id))
	if d.principal.Authenticated {
		hs = append(hs, headerOpt(HeaderPrincipal, d.principal.Subject))
		if d.principal.Tenant != "" {
			hs = append(hs, headerOpt(HeaderTenant, d.principal.Tenant))
		}
	}
	return &authv3.CheckResponse{
		Status: okStatus(),
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers:         hs,
			HeadersToRemove: d.hdr.capgateHeaders(HeaderDecisionID, HeaderPrincipal, HeaderTenant),
		}},
		DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			MetadataDecisionID: structpb.NewStringValue(d.id),
			MetadataPrincipal:  structpb.NewStringValue(d.principal.Subject),
			MetadataOperation:  structpb.NewStringValue(string(d.op)),
		}},
	}
}

// TestRequestBodyView: the body viewed in place is the body Envoy sent, byte for byte, from
// either field.
func TestRequestBodyView(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"}}`
	require.Equal(t, []byte(body), requestBody(&authv3.AttributeContext_HttpRequest{Body: body}))
	require.Equal(t, []byte(body), requestBody(&authv3.AttributeContext_HttpRequest{RawBody: []byte(body)}))
	require.Nil(t, requestBody(&authv3.AttributeContext_HttpRequest{}))
}

var sink []byte

// BenchmarkRequestBody: viewing Envoy's string body in place against copying it, at 64 KiB.
func BenchmarkRequestBody(b *testing.B) {
	hr := &authv3.AttributeContext_HttpRequest{Body: strings.Repeat("x", 64<<10)}
	b.Run("view", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = requestBody(hr)
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = []byte(hr.GetBody())
		}
	})
}
