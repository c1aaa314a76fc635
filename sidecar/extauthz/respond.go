package extauthz

import (
	"maps"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/wire"
)

// Headers capgate adds. They are informational: the gateway re-authenticates
// and never trusts them.
const (
	HeaderDecisionID = "x-capgate-decision-id"
	HeaderPrincipal  = "x-capgate-principal"
	HeaderTenant     = "x-capgate-tenant"
)

// Dynamic metadata keys (under the ext_authz filter's namespace).
const (
	MetadataDecisionID = "decision_id"
	MetadataPrincipal  = "principal"
	MetadataOperation  = "operation"
)

// finish records the decision and builds its response.
func (s *Server) finish(d *decision, start time.Time) *authv3.CheckResponse {
	var resp *authv3.CheckResponse
	if d.allowed {
		resp = s.allow(d)
	} else {
		resp = s.deny(d) // every refusal decide reaches carries its error
	}
	s.record(d, time.Since(start))
	return resp
}

// internalDenial is the answer after a panic: built from constants, so that
// it cannot fail itself.
func (s *Server) internalDenial(d *decision, start time.Time) *authv3.CheckResponse {
	d.allowed, d.err = false, protocol.Errorf(protocol.Internal, "internal error")
	d.principal.Authenticated = false
	resp := s.deny(d)
	s.record(d, time.Since(start))
	return resp
}

func (s *Server) record(d *decision, latency time.Duration) {
	e := decisionlog.Entry{
		DecisionID: d.id,
		Component:  component,
		Binding:    string(d.binding),
		Version:    string(d.version),
		Operation:  string(d.op),
		Principal:  d.principal.Subject,
		Tenant:     d.principal.Tenant,
		Issuer:     d.principal.Issuer,
		Result:     decisionlog.Allow,
		// The caller facts the policy decided on (never the token).
		Authenticated: d.principal.Authenticated,
		Latency:       latency,
		Span:          d.span,
		RequestedBy:   d.requestedBy,
	}
	e.SetScopes(d.principal.Scopes)
	e.Quotas = d.quotas
	if d.plan != nil {
		e.Revision = d.plan.id
	}
	if !d.allowed {
		e.SetRefusal(d.err)
	}
	s.dlog.Log(&e)
	s.stats.observe(d, latency)
}

func okStatus() *rpcstatus.Status { return &rpcstatus.Status{Code: int32(codes.OK)} }

// allow answers OK with capgate's headers set (overwriting any a client
// sent), every other client-sent x-capgate-* header removed, and the
// decision in dynamic metadata.
func (s *Server) allow(d *decision) *authv3.CheckResponse {
	set := make([]string, 0, 3)
	hs := make([]*corev3.HeaderValueOption, 0, 3)
	add := func(k, v string) {
		set = append(set, k)
		hs = append(hs, headerOpt(k, v))
	}
	add(HeaderDecisionID, d.id)
	if d.principal.Authenticated {
		add(HeaderPrincipal, d.principal.Subject)
		if d.principal.Tenant != "" {
			add(HeaderTenant, d.principal.Tenant)
		}
	}
	var answer []*corev3.HeaderValueOption // added to the agent's answer: the RateLimit fields
	for _, h := range protocol.RateLimitHeaders(d.quotas) {
		answer = append(answer, headerOpt(h[0], h[1]))
	}
	md := map[string]*structpb.Value{
		MetadataDecisionID: structpb.NewStringValue(d.id),
		MetadataPrincipal:  structpb.NewStringValue(d.principal.Subject),
		MetadataOperation:  structpb.NewStringValue(string(d.op)),
	}
	maps.Copy(md, d.slots) // the quotas charged, for Envoy's rate limits (policy/ratelimit)
	return &authv3.CheckResponse{
		Status: okStatus(),
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers:              hs,
			HeadersToRemove:      d.hdr.capgateHeaders(set...),
			ResponseHeadersToAdd: answer,
		}},
		DynamicMetadata: &structpb.Struct{Fields: md},
	}
}

// deny answers in the shape of the request's binding:
//   - JSON-RPC: HTTP 200, the JSON-RPC error echoing the request id;
//   - HTTP+JSON: the mapped status, a google.rpc.Status body, and a Bearer
//     challenge on 401 and 403;
//   - gRPC: HTTP 200, content-type application/grpc, grpc-status,
//     grpc-message and grpc-status-details-bin (a trailers-only gRPC error).
func (s *Server) deny(d *decision) *authv3.CheckResponse {
	e := d.err
	code := codes.PermissionDenied
	if e.Code == protocol.Unauthenticated {
		code = codes.Unauthenticated
	}
	hs := make([]*corev3.HeaderValueOption, 0, 5)
	hs = append(hs, headerOpt(HeaderDecisionID, d.id))
	denied := &authv3.DeniedHttpResponse{}
	// The same answer the gateway writes (wire.Refuse).
	authStatus := d.plan != nil && d.plan.rev.Config().Auth.JSONRPCHTTPStatus == config.JSONRPCStatusAuth
	r := wire.Refuse(d.binding, d.version, d.errorData, d.op.Streaming(), d.reqID, e, authStatus)
	denied.Status = &typev3.HttpStatus{Code: typev3.StatusCode(r.Status)}
	if len(r.Body) > 0 {
		denied.Body = string(r.Body)
	}
	for _, kv := range r.Header {
		hs = append(hs, headerOpt(kv[0], kv[1]))
	}
	denied.Headers = hs
	md := &structpb.Struct{Fields: map[string]*structpb.Value{
		MetadataDecisionID: structpb.NewStringValue(d.id),
		MetadataOperation:  structpb.NewStringValue(string(d.op)),
	}}
	if d.principal.Authenticated {
		md.Fields[MetadataPrincipal] = structpb.NewStringValue(d.principal.Subject)
	}
	return &authv3.CheckResponse{
		Status:          &rpcstatus.Status{Code: int32(code), Message: e.Message},
		HttpResponse:    &authv3.CheckResponse_DeniedResponse{DeniedResponse: denied},
		DynamicMetadata: md,
	}
}

func headerOpt(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: k, Value: v},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}
