package extauthz

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/go-json-experiment/json/jsontext"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/capgate/capgate/policy/quota"
	"github.com/capgate/capgate/policy/ratelimit"
	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
	"github.com/capgate/capgate/sidecar/protocol/wire"
	"github.com/capgate/capgate/sidecar/revision"
)

// Envoy headers read by Check.
const (
	headerAuthorization = "authorization"
	headerContentType   = "content-type"
	headerContentLength = "content-length"
	// headerPartialBody is set by Envoy when with_request_body is configured:
	// "true" when the body was cut at max_request_bytes.
	headerPartialBody = "x-envoy-auth-partial-body"
)

// Messages that name an Envoy misconfiguration. They are shown to the client
// (the request cannot succeed until an operator acts) and logged.
const (
	msgNoBody    = "ext_authz received no request body: configure with_request_body in Envoy's ext_authz filter"
	msgTruncated = "ext_authz received a request body that was truncated at max_request_bytes: " +
		"raise it or lower capgate's limit; allow_partial_message must be false"
	msgNotBytes = "ext_authz received a gRPC request body as text: set with_request_body.pack_as_bytes: true in Envoy's ext_authz filter"
)

// plan is what Check derives from one revision, computed once per revision.
type plan struct {
	rev  *revision.State
	id   string
	base string // path of agent.url without a trailing slash; "" at the root
}

func (s *Server) planFor(rev *revision.State) *plan {
	if p := s.plan.Load(); p != nil && p.rev == rev {
		return p
	}
	p := &plan{rev: rev, id: rev.ID(), base: rev.BasePath}
	s.plan.Store(p)
	return p
}

// decision is the outcome of one check, filled in as it is decided.
type decision struct {
	id        string
	plan      *plan
	binding   protocol.Binding
	version   protocol.Version
	op        protocol.Operation
	reqID     jsontext.Value     // JSON-RPC id to echo
	errorData protocol.DataShape // the shape of a JSON-RPC error's data
	principal identity.Principal
	hdr       header
	quotas    []quota.State // what is left of each quota admission charged
	// slots are the charged quotas as Envoy's rate limits read them (ratelimit.Metadata).
	slots map[string]*structpb.Value
	// allowed is set only from an admitting verdict; err holds every refusal.
	allowed bool
	err     *protocol.Error
	span    trace.Span // the Check's span, for the decision log
	// requestedBy is the downstream peer Envoy reports (the decision
	// log's requested_by), else the gRPC peer.
	requestedBy string
}

// decide reads the CheckRequest into the one request model and asks admission; the verdict is
// d.allowed, or d.err. The only rules kept here are Envoy's: a body Envoy withheld or cut short
// is never decided on.
func (s *Server) decide(ctx context.Context, req *authv3.CheckRequest, d *decision) {
	if s.hook != nil {
		s.hook()
	}
	hr := req.GetAttributes().GetRequest().GetHttp()
	d.binding = protocol.HTTPJSON
	if hr == nil {
		d.err = protocol.Errorf(protocol.InvalidRequest, "the check request carries no HTTP request attributes")
		return
	}
	d.hdr = header{m: hr.GetHeaders(), raw: hr.GetHeaderMap().GetHeaders()}
	rev := s.holder.Load()
	if rev == nil {
		d.err = protocol.Errorf(protocol.Internal, "no policy revision is loaded")
		return
	}
	p := s.planFor(rev)
	d.plan = p

	path, query, _ := strings.Cut(hr.GetPath(), "?")
	env := protocol.Envelope{Method: hr.GetMethod(), Path: path, Query: query, Header: &d.hdr, GRPC: true, Methods: rev.Methods}
	d.binding = protocol.BindingOf(path, p.base) // the shape of an answer given before the parse
	d.errorData = protocol.ErrorDataShape(&d.hdr, query)
	if grpcwire.IsContentType(d.hdr.get(headerContentType)) {
		d.binding = protocol.GRPC
		if _, _, perr := grpcwire.ParsePath(path); perr != nil {
			d.err = perr // an unknown method is refused before its body is looked for
			return
		}
	}
	if env.Method == http.MethodPost {
		body, err := s.body(hr, d)
		if err != nil {
			d.err = err
			return
		}
		env.Body = body
	} else {
		env.Body = requestBody(hr) // the parser refuses a body on GET and DELETE
	}
	r, perr := wire.Parse(env, p.base, s.limits)
	if r != nil {
		d.binding, d.version, d.op, d.reqID, d.errorData = r.Binding, r.Version, r.Operation, r.ID, r.ErrorData
	}
	if perr != nil {
		if d.reqID == nil {
			d.reqID = perr.ID
		}
		d.err = perr
		return
	}
	v := s.admit.Admit(ctx, rev, admission.Input{Request: r, Header: &d.hdr, Peer: req.GetAttributes().GetSource().GetPrincipal(), DecisionID: d.id})
	d.principal, d.quotas = v.Principal, v.Quotas
	d.allowed, d.err = v.Allowed, v.Err // Admit gives every refusal its error
	if v.Allowed && len(v.Applied) > 0 {
		// The quotas charged go to Envoy's global rate limits too (docs/deploy.md); a call
		// under more than they carry could not be counted whole there: refused.
		var err error
		if d.slots, err = ratelimit.Metadata(v.Applied, quota.Caller(v.Principal.Issuer, v.Principal.Subject)); err != nil {
			s.log.Error("quotas exceed envoy rate limit slots", zap.String("decision_id", d.id), zap.Int("quotas", len(v.Applied)))
			d.allowed, d.err = false, protocol.Errorf(protocol.Internal, "the call is under more quotas than the proxy can count")
		}
	}
}

// body returns the request body Envoy sent, refusing a body Envoy withheld
// or cut short: a decision is never made on a body capgate did not see.
// gRPC bodies must come as bytes (pack_as_bytes), whole.
func (s *Server) body(hr *authv3.AttributeContext_HttpRequest, d *decision) ([]byte, *protocol.Error) {
	if d.hdr.get(headerPartialBody) == "true" {
		return nil, s.misconfigured(d, msgTruncated)
	}
	b := requestBody(hr)
	if d.binding == protocol.GRPC {
		switch raw := hr.GetRawBody(); {
		case len(raw) == 0 && hr.GetBody() != "":
			return nil, s.misconfigured(d, msgNotBytes)
		case len(raw) == 0:
			return nil, s.misconfigured(d, msgNoBody+" (with pack_as_bytes: true); capgate reads the task id from the gRPC request message")
		}
		if n, ok := grpcwire.MessageLength(b); ok && n > int64(len(b)-5) && n <= s.maxBody() {
			return nil, s.misconfigured(d, msgTruncated)
		}
		return b, nil
	}
	n, hasLength := contentLength(d.hdr.get(headerContentLength))
	switch {
	case len(b) == 0 && hasLength && n > 0:
		return nil, s.misconfigured(d, msgNoBody)
	case hasLength && n > int64(len(b)):
		return nil, s.misconfigured(d, msgTruncated)
	}
	return b, nil
}

func (s *Server) maxBody() int64 {
	if s.limits.MaxBodyBytes > 0 {
		return s.limits.MaxBodyBytes
	}
	return protocol.DefaultMaxBodyBytes
}

func (s *Server) misconfigured(d *decision, msg string) *protocol.Error {
	s.log.Warn("envoy ext_authz misconfigured", zap.String("decision_id", d.id), zap.String("problem", msg))
	return protocol.Errorf(protocol.Internal, "%s", msg)
}

// requestBody is the body as Envoy packed it: raw_body with pack_as_bytes,
// else body.
func requestBody(hr *authv3.AttributeContext_HttpRequest) []byte {
	if b := hr.GetRawBody(); len(b) > 0 {
		return b
	}
	s := hr.GetBody()
	if s == "" {
		return nil
	}
	return []byte(s)
}

func contentLength(v string) (int64, bool) {
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

func panicType(r any) string { return fmt.Sprintf("%T", r) }
