package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
	"github.com/capgate/capgate/sidecar/protocol/wire"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tracing"
)

const component = "gateway"

// routeOf is the http.route of a parsed request: the JSON-RPC endpoint,
// the HTTP+JSON route template under the base path (the parser's own
// template: "/{tenant}/tasks/{id}:cancel"), or the gRPC method's path.
func routeOf(req *protocol.Request, base, path string) string {
	switch req.Binding {
	case protocol.JSONRPC:
		if base == "" {
			return "/"
		}
		return base
	case protocol.HTTPJSON:
		if _, tmpl, ok := strings.Cut(req.Method, " "); ok && strings.HasPrefix(tmpl, "/") {
			if strings.HasPrefix(tmpl, "/.well-known/") {
				return tmpl
			}
			return base + tmpl
		}
	case protocol.GRPC:
		return path
	}
	return ""
}

// serveA2A reads one request through the shared parser, asks admission, and runs the
// operation. Every answer is in the binding's shape.
func (g *Gateway) serveA2A(w http.ResponseWriter, r *http.Request, rev *revision.State) {
	start := g.now()
	id := g.ids.Next()
	w.Header().Set(HeaderDecisionID, id)
	path := r.URL.EscapedPath()
	entry := &decisionlog.Entry{DecisionID: id, Binding: string(protocol.BindingOf(path, rev.BasePath)), Span: trace.SpanFromContext(r.Context()), RequestedBy: r.RemoteAddr}
	if grpcwire.IsContentType(r.Header.Get("Content-Type")) {
		entry.Binding = string(protocol.GRPC) // refused before parsing: still a gRPC answer
	}
	req := &protocol.Request{Binding: protocol.Binding(entry.Binding), ErrorData: protocol.ErrorDataShape(protocol.HTTPHeader(r.Header), r.URL.RawQuery)}
	if req.Binding == protocol.GRPC {
		// A gRPC method capgate does not serve is refused before the body is read: a client- or
		// bidi-streaming call (a reflection client's, say) half-closes only when it hears back,
		// so reading its body first would hold the stream until the caller's deadline.
		if _, _, perr := grpcwire.ParsePath(path); perr != nil {
			g.refuse(w, rev, start, entry, req, perr)
			return
		}
	}
	body, berr := readBody(r, g.limits.MaxBodyBytes)
	if berr != nil {
		g.refuse(w, rev, start, entry, req, berr)
		return
	}
	env := protocol.Envelope{Method: r.Method, Path: path, Query: r.URL.RawQuery, Header: protocol.HTTPHeader(r.Header), Body: body, GRPC: true, Methods: rev.Methods}
	parsed, perr := wire.Parse(env, rev.BasePath, g.limits)
	if parsed != nil {
		req = parsed
	}
	entry.Binding, entry.Version, entry.Operation = string(req.Binding), string(req.Version), string(req.Operation)
	if parsed != nil {
		tracing.SetRoute(entry.Span, r.Method, routeOf(parsed, rev.BasePath, r.URL.Path))
	}
	if perr != nil {
		if req.ID == nil {
			req.ID = perr.ID
		}
		g.refuse(w, rev, start, entry, req, perr)
		return
	}
	peer, perr := peerOf(r, rev)
	if perr != nil {
		g.refuse(w, rev, start, entry, req, perr)
		return
	}
	v := g.admit.Admit(r.Context(), rev, admission.Input{Request: req, Header: env.Header, Peer: peer, DecisionID: id})
	entry.Quotas = v.Quotas
	entry.Principal, entry.Tenant = v.Principal.Subject, v.Principal.Tenant
	entry.Authenticated, entry.Issuer = v.Principal.Authenticated, v.Principal.Issuer
	entry.SetScopes(v.Principal.Scopes)
	if !v.Allowed {
		g.refuse(w, rev, start, entry, req, v.Err) // Admit gives every refusal its error
		return
	}
	if len(v.Extensions) > 0 {
		list := strings.Join(v.Extensions, ", ")
		w.Header().Set(HeaderExtensions, list)
		if req.Version == protocol.V03 {
			w.Header().Set(HeaderExtensionsV03, list)
		}
	}
	call := &exchange.Call{Rev: rev, Request: req, Principal: v.Principal, Extensions: v.Extensions, DecisionID: id,
		Header: r.Header, Log: entry, Task: v.Task}
	res, toAnswer, e := g.run(r.Context(), call, w)
	for _, h := range protocol.RateLimitHeaders(entry.Quotas) { // charged at admission or once routed
		w.Header().Set(h[0], h[1])
	}
	if e == nil && toAnswer {
		var written bool
		if e, written = answer(w, req, res, g.keepAlive); written {
			g.finish(rev, start, entry, e) // the answer has begun: it carries its own end
			return
		}
	}
	if e != nil {
		g.refuse(w, rev, start, entry, req, e)
		return
	}
	g.finish(rev, start, entry, nil)
}

// refuse records a refusal and writes it in the shape of the request's binding.
func (g *Gateway) refuse(w http.ResponseWriter, rev *revision.State, start time.Time, entry *decisionlog.Entry, req *protocol.Request, e *protocol.Error) {
	g.finish(rev, start, entry, e)
	authStatus := rev.Config().Auth.JSONRPCHTTPStatus == config.JSONRPCStatusAuth
	writeRefusal(w, wire.Refuse(req.Binding, req.Version, req.ErrorData, req.Operation.Streaming(), req.ID, e, authStatus))
}

// peerOf is the mTLS peer of the request: the verified client certificate's URI SAN when the
// gateway terminates TLS itself, else the peer the trusted proxy vouches for (auth.trusted_proxy).
func peerOf(r *http.Request, rev *revision.State) (string, *protocol.Error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		if uris := r.TLS.VerifiedChains[0][0].URIs; len(uris) == 1 {
			return uris[0].String(), nil
		}
	}
	peer, _, err := rev.Proxy.Peer(r.RemoteAddr, r.Header)
	if err != nil {
		return "", protocol.Wrap(protocol.Unauthenticated, err, err.Error())
	}
	return peer, nil
}

// run serves an admitted operation: its result, for answer to write when toAnswer (false when
// run has answered itself: a card not modified). A returned error has not been written yet.
// The result is a value: a pointer to it would be an allocation per request.
func (g *Gateway) run(ctx context.Context, call *exchange.Call, w http.ResponseWriter) (_ exchange.Result, toAnswer bool, _ *protocol.Error) {
	switch call.Request.Operation {
	case protocol.GetExtendedAgentCard:
		res, perr := g.serveExtendedCard(ctx, call, call.Log, w)
		if res == nil {
			return exchange.Result{}, false, perr
		}
		return *res, true, perr
	case protocol.GetAgentCard:
		// The public card has its own route; through a binding it is the
		// same projection.
		return exchange.Value(protocol.KindCard, publicCardFor(call.Rev, call.Request.Version)), true, nil
	}
	if g.ops == nil {
		return exchange.Result{}, false, protocol.Errorf(protocol.UnsupportedOperation, "%s is not supported by this agent", call.Request.Operation)
	}
	res, perr := g.ops.Serve(ctx, call)
	return res, perr == nil, perr
}

// finish records the decision and its metrics.
func (g *Gateway) finish(rev *revision.State, start time.Time, e *decisionlog.Entry, err *protocol.Error) {
	e.Component = component
	e.Revision, e.CardVersion = rev.ID(), rev.CardVersion
	e.Latency = g.now().Sub(start)
	e.Result = decisionlog.Allow
	e.SetRefusal(err)
	if err != nil && err.Code == protocol.Internal {
		g.log.Error("request failed", zap.String("decision_id", e.DecisionID), zap.Error(err.Unwrap()))
	}
	g.countDecision(e.Operation, err)
	g.m.DecisionSeconds.WithLabelValues(component).Observe(e.Latency.Seconds())
	g.dlog.Log(e)
}

// unknownOperation is the operation label of a request refused before its operation was known.
const unknownOperation = protocol.UnknownLabel

// countDecision counts a decision on op with the code of its answer (admission.DecisionCode).
func (g *Gateway) countDecision(op string, err *protocol.Error) {
	if op == "" {
		op = unknownOperation
	}
	c, ok := g.decisions[op]
	if !ok {
		c = g.m.DecisionCounters(component, op) // an operation outside the table (none today)
	}
	c.Inc(admission.DecisionCode(err))
}

// readBody reads at most limit bytes; a larger body is refused, not truncated.
func readBody(r *http.Request, limit int64) ([]byte, *protocol.Error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, protocol.Wrap(protocol.InvalidRequest, err, "the request body could not be read")
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(limit)
	}
	return b, nil
}

func tooLarge(limit int64) *protocol.Error {
	return protocol.Errorf(protocol.PayloadTooLarge, "request body exceeds the limit of %d bytes", limit)
}
