package extauthz

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unsafe"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/revision"
)

// Envoy headers read by Check.
const (
	headerAuthorization = "authorization"
	headerContentType   = "content-type"
	headerContentLength = "content-length"
	headerVersion       = "a2a-version"
	headerExtensions    = "a2a-extensions"
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
	msgNotBytes      = "ext_authz received a gRPC request body as text: set with_request_body.pack_as_bytes: true in Envoy's ext_authz filter"
	msgNoEntitlement = "no capability of this agent is available to the caller"
	msgTaskNotFound  = "task not found"
)

// plan is what Check derives from one revision, computed once per revision.
type plan struct {
	rev             *revision.Revision
	id              string
	base            string // path of agent.url without a trailing slash; "" at the root
	anonymousPublic bool
	extensions      []protocol.Extension
}

func (s *Server) planFor(rev *revision.Revision) *plan {
	if p := s.plan.Load(); p != nil && p.rev == rev {
		return p
	}
	p := &plan{
		rev:             rev,
		id:              rev.ID(),
		base:            rev.Deployment.BasePath(),
		anonymousPublic: rev.Config().Auth.AnonymousPublic,
		extensions:      rev.Extensions,
	}
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
	reqID     jsontext.Value // JSON-RPC id to echo
	principal identity.Principal
	hdr       header
	peer      string // attributes.source.principal (mTLS)
	tokenUsed bool
	err       *protocol.Error
}

// decide runs the decision flow; d.err == nil afterwards means allow.
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
	d.peer = req.GetAttributes().GetSource().GetPrincipal()
	rev := s.holder.Load()
	if rev == nil {
		d.err = protocol.Errorf(protocol.Internal, "no policy revision is loaded")
		return
	}
	p := s.planFor(rev)
	d.plan = p

	path, query, hasQuery := strings.Cut(hr.GetPath(), "?")
	method := hr.GetMethod()
	if path == protocol.AgentCardPath && (method == http.MethodGet || method == http.MethodHead) {
		d.op = protocol.GetAgentCard // the public card: anyone
		return
	}
	ct := d.hdr.get(headerContentType)
	if isGRPC(ct) {
		s.decideGRPC(ctx, hr, path, method, ct, d)
		return
	}
	rel, ok := strings.CutPrefix(path, p.base)
	if !ok || (rel != "" && rel[0] != '/') {
		d.err = protocol.Errorf(protocol.NotFound, "no A2A route at %s", clipPath(path))
		return
	}
	if rel == "" || rel == "/" {
		s.decideJSONRPC(ctx, hr, method, ct, d)
		return
	}
	if hasQuery {
		rel += "?" + query
	}
	s.decideHTTP(ctx, hr, method, rel, ct, d)
}

func (s *Server) decideJSONRPC(ctx context.Context, hr *authv3.AttributeContext_HttpRequest, method, ct string, d *decision) {
	if method != http.MethodPost {
		// Refused at the HTTP level, as the gateway does: not a JSON-RPC call.
		d.err = protocol.Errorf(protocol.MethodNotAllowed, "the JSON-RPC endpoint accepts POST only").WithMetadata("allow", http.MethodPost)
		return
	}
	d.binding = protocol.JSONRPC
	version, verr := protocol.ParseVersion(d.hdr.get(headerVersion))
	body, berr := s.body(hr, d)
	if berr != nil {
		d.err = berr
		return
	}
	parseAs := version
	if verr != nil {
		parseAs = protocol.V1 // only to find the id to echo
	}
	r, perr := protocol.ParseJSONRPC(parseAs, ct, body, s.limits)
	switch {
	case r != nil:
		d.reqID = r.ID
	case perr != nil:
		d.reqID = perr.ID
	}
	if verr != nil {
		d.err = verr
		return
	}
	d.version = version
	if perr != nil {
		d.err = perr
		return
	}
	s.authorize(ctx, hr, r, d)
}

func (s *Server) decideHTTP(ctx context.Context, hr *authv3.AttributeContext_HttpRequest, method, target, ct string, d *decision) {
	version, verr := protocol.ParseVersion(d.hdr.get(headerVersion))
	if verr != nil {
		d.err = verr
		return
	}
	d.version = version
	var body []byte
	if method == http.MethodPost {
		var berr *protocol.Error
		if body, berr = s.body(hr, d); berr != nil {
			d.err = berr
			return
		}
	} else {
		body = requestBody(hr) // ParseHTTP refuses a body on GET and DELETE
	}
	r, perr := protocol.ParseHTTP(version, method, target, ct, body, s.limits)
	if perr != nil {
		d.err = perr
		return
	}
	s.authorize(ctx, hr, r, d)
}

// body returns the request body Envoy sent, refusing a body Envoy withheld
// or cut short: a decision is never made on a body capgate did not see.
func (s *Server) body(hr *authv3.AttributeContext_HttpRequest, d *decision) ([]byte, *protocol.Error) {
	if d.hdr.get(headerPartialBody) == "true" {
		return nil, s.misconfigured(d, msgTruncated)
	}
	b := requestBody(hr)
	n, hasLength := contentLength(d.hdr.get(headerContentLength))
	switch {
	case len(b) == 0 && hasLength && n > 0:
		return nil, s.misconfigured(d, msgNoBody)
	case hasLength && n > int64(len(b)):
		return nil, s.misconfigured(d, msgTruncated)
	}
	return b, nil
}

func (s *Server) misconfigured(d *decision, msg string) *protocol.Error {
	s.log.Warn("envoy ext_authz misconfigured", zap.String("decision_id", d.id), zap.String("problem", msg))
	return protocol.Errorf(protocol.Internal, "%s", msg)
}

// requestBody is the body as Envoy packed it: raw_body with pack_as_bytes,
// else body. The string is viewed in place, never copied or written.
func requestBody(hr *authv3.AttributeContext_HttpRequest) []byte {
	if b := hr.GetRawBody(); len(b) > 0 {
		return b
	}
	s := hr.GetBody()
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
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

// authorize decides a parsed request: identity, extensions, then what the
// operation requires.
func (s *Server) authorize(ctx context.Context, hr *authv3.AttributeContext_HttpRequest, r *protocol.Request, d *decision) {
	d.op = r.Operation
	d.version = r.Version
	if r.Operation == protocol.GetAgentCard {
		return
	}
	p, err := s.authenticate(ctx, d)
	if err != nil {
		d.err = err
		return
	}
	d.principal = p
	if len(d.plan.extensions) > 0 {
		if _, xerr := protocol.NegotiateExtensions(d.hdr.values(headerExtensions), d.plan.extensions); xerr != nil {
			d.err = xerr
			return
		}
	}
	switch r.Operation {
	case protocol.GetExtendedAgentCard, protocol.ListTasks:
		d.err = s.requireAuthenticated(d, false)
	case protocol.SendMessage, protocol.SendStreamingMessage:
		if d.err = s.requireAuthenticated(d, d.plan.anonymousPublic); d.err != nil {
			return
		}
		if d.err = s.requireEntitlement(ctx, d); d.err != nil {
			return
		}
		if r.TaskID != "" {
			d.err = s.requireOwner(ctx, d, r.TaskID)
		}
	case protocol.GetTask, protocol.CancelTask, protocol.SubscribeToTask,
		protocol.CreateTaskPushNotificationConfig, protocol.GetTaskPushNotificationConfig,
		protocol.ListTaskPushNotificationConfigs, protocol.DeleteTaskPushNotificationConfig:
		d.err = s.requireOwner(ctx, d, r.TaskID)
	default:
		d.err = protocol.Errorf(protocol.MethodNotFound, "operation %q is not recognised", r.Operation)
	}
}

// authenticate finds the caller: the bearer token when one is sent (it wins
// over a client certificate), else the mapped mTLS peer, else anonymous.
func (s *Server) authenticate(ctx context.Context, d *decision) (identity.Principal, *protocol.Error) {
	if authz := d.hdr.get(headerAuthorization); authz != "" {
		d.tokenUsed = true
		p, err := d.plan.rev.Verifier.Verify(ctx, authz)
		if err != nil {
			return identity.Principal{}, identity.ProtocolError(err)
		}
		return p, nil
	}
	if len(s.peers) > 0 {
		if p, ok := s.peers[d.peer]; ok {
			return p, nil
		}
	}
	return identity.Principal{}, nil
}

func (s *Server) requireAuthenticated(d *decision, anonymousOK bool) *protocol.Error {
	if d.principal.Authenticated || anonymousOK {
		return nil
	}
	return protocol.MissingCredentials()
}

// requireEntitlement checks that the caller may run at least one capability;
// which one is the router's decision. The view is cached per entitlement
// class, so this is a map lookup and a bit test in steady state.
func (s *Server) requireEntitlement(ctx context.Context, d *decision) *protocol.Error {
	v, err := d.plan.rev.Engine.View(ctx, d.principal.Caller())
	if err != nil {
		s.log.Error("policy evaluation failed", zap.String("decision_id", d.id), zap.Error(err))
		return protocol.Wrap(protocol.Internal, err, "the policy could not be evaluated")
	}
	if !v.AnyEntitled() {
		return protocol.Errorf(protocol.Unauthorized, msgNoEntitlement)
	}
	return nil
}

// requireOwner admits the caller to a task it owns, as the gateway's
// dispatcher does. Only an authenticated caller owns tasks, even with
// anonymous_public (a task bound to nobody would be every anonymous
// caller's): anyone else is asked for a credential before any lookup. A
// task that does not exist and a task of someone else get the same answer.
func (s *Server) requireOwner(ctx context.Context, d *decision, taskID string) *protocol.Error {
	if err := s.requireAuthenticated(d, false); err != nil {
		return err
	}
	if taskID == "" {
		return protocol.Errorf(protocol.InvalidParams, "the task id is required")
	}
	if s.owners == nil {
		return protocol.Errorf(protocol.Internal, "task ownership cannot be checked: no task store is configured")
	}
	b, ok, err := s.owners.Lookup(ctx, taskID)
	if err != nil {
		s.log.Error("task store lookup failed", zap.String("decision_id", d.id), zap.Error(err))
		return protocol.Wrap(protocol.Internal, err, "the task store is unavailable; try again later")
	}
	if !ok || !b.OwnedBy(d.principal.Subject, d.principal.Tenant) {
		return protocol.Errorf(protocol.TaskNotFound, msgTaskNotFound)
	}
	return nil
}

func clipPath(p string) string {
	const max = 128
	if len(p) > max {
		return p[:max] + "…"
	}
	return p
}

func panicType(r any) string { return fmt.Sprintf("%T", r) }
