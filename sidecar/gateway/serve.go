package gateway

import (
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/revision"
)

const component = "gateway"

func (g *Gateway) serveJSONRPC(w http.ResponseWriter, r *http.Request, rev *revision.Revision) {
	start := g.now()
	id := g.ids.Next()
	w.Header().Set(HeaderDecisionID, id)
	body, berr := readBody(r, g.limits.MaxBodyBytes)
	version, verr := requestVersion(r)
	if berr != nil {
		g.finish(rev, start, &decisionlog.Entry{DecisionID: id, Binding: string(protocol.JSONRPC)}, berr)
		writeJSONRPCError(w, nil, berr)
		return
	}
	parseVersion := version
	if verr != nil {
		parseVersion = protocol.V1 // only to find the id to echo
	}
	req, perr := protocol.ParseJSONRPC(parseVersion, r.Header.Get("Content-Type"), body, g.limits)
	var reqID jsontext.Value
	switch {
	case req != nil:
		reqID = req.ID
	case perr != nil:
		reqID = perr.ID
	}
	entry := &decisionlog.Entry{DecisionID: id, Binding: string(protocol.JSONRPC), Version: string(version)}
	if verr != nil {
		g.finish(rev, start, entry, verr)
		writeJSONRPCError(w, reqID, verr)
		return
	}
	if perr != nil {
		g.finish(rev, start, entry, perr)
		writeJSONRPCError(w, reqID, perr)
		return
	}
	resp := &jsonrpcResponder{w: w, id: reqID}
	if e := g.handle(r, rev, req, id, entry, resp); e != nil {
		g.finish(rev, start, entry, e)
		if req.Operation.Streaming() {
			// A streaming call's refusal is one event of the stream, as
			// A2A clients (a2a-go among them) read it.
			writeJSONRPCStreamError(w, reqID, e)
			return
		}
		writeJSONRPCError(w, reqID, e)
		return
	}
	g.finish(rev, start, entry, nil)
}

func (g *Gateway) serveREST(w http.ResponseWriter, r *http.Request, rev *revision.Revision, rel string) {
	start := g.now()
	id := g.ids.Next()
	w.Header().Set(HeaderDecisionID, id)
	entry := &decisionlog.Entry{DecisionID: id, Binding: string(protocol.HTTPJSON)}
	version, verr := requestVersion(r)
	if verr != nil {
		g.finish(rev, start, entry, verr)
		writeStatusError(w, verr)
		return
	}
	entry.Version = string(version)
	body, berr := readBody(r, g.limits.MaxBodyBytes)
	if berr != nil {
		g.finish(rev, start, entry, berr)
		writeStatusError(w, berr)
		return
	}
	// ParseHTTP checks the query too (repeated parameters, parameters the
	// path binds): hand it the whole request target, not only the path.
	target := rel
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		target += "?" + r.URL.RawQuery
	}
	req, perr := protocol.ParseHTTP(version, r.Method, target, r.Header.Get("Content-Type"), body, g.limits)
	if perr != nil {
		g.finish(rev, start, entry, perr)
		writeStatusError(w, perr)
		return
	}
	if e := g.handle(r, rev, req, id, entry, &restResponder{w: w}); e != nil {
		g.finish(rev, start, entry, e)
		writeStatusError(w, e)
		return
	}
	g.finish(rev, start, entry, nil)
}

// handle authenticates the caller, negotiates extensions and runs the
// operation. A returned error has not been written yet.
func (g *Gateway) handle(r *http.Request, rev *revision.Revision, req *protocol.Request, id string, entry *decisionlog.Entry, resp Responder) *protocol.Error {
	ctx := r.Context()
	entry.Operation = string(req.Operation)
	// Two credentials are refused, not read one way here (the first) and
	// another way by a proxy or ext_authz (joined).
	if len(r.Header.Values("Authorization")) > 1 {
		return protocol.Errorf(protocol.Unauthenticated, "the Authorization header is given more than once")
	}
	p, err := rev.Verifier.Verify(ctx, r.Header.Get("Authorization"))
	if err != nil {
		return identity.ProtocolError(err)
	}
	entry.Principal, entry.Tenant = p.Subject, p.Tenant
	requested := r.Header.Values(HeaderExtensions)
	if req.Version == protocol.V03 {
		// 0.3 clients (a2a-go's among them) send X-A2A-Extensions.
		requested = append(requested, r.Header.Values(HeaderExtensionsV03)...)
	}
	activated, xerr := protocol.NegotiateExtensions(requested, rev.Extensions)
	if xerr != nil {
		return xerr
	}
	if len(activated) > 0 {
		list := strings.Join(activated, ", ")
		resp.Writer().Header().Set(HeaderExtensions, list)
		if req.Version == protocol.V03 {
			resp.Writer().Header().Set(HeaderExtensionsV03, list)
		}
	}
	call := &Call{Rev: rev, Request: req, Principal: p, Extensions: activated, DecisionID: id, Header: r.Header, Log: entry}
	switch req.Operation {
	case protocol.GetExtendedAgentCard:
		return g.serveExtendedCard(ctx, call, entry, resp)
	case protocol.GetAgentCard:
		// The public card has its own route; through a binding it is the
		// same projection.
		return g.writeRaw(resp, rev.PublicCard)
	}
	if g.ops == nil {
		return protocol.Errorf(protocol.UnsupportedOperation, "%s is not supported by this agent", req.Operation)
	}
	return g.ops.Serve(ctx, call, resp)
}

// finish records the decision and its metrics.
func (g *Gateway) finish(rev *revision.Revision, start time.Time, e *decisionlog.Entry, err *protocol.Error) {
	e.Component = component
	e.Revision = rev.ID()
	e.Latency = g.now().Sub(start)
	e.Result = decisionlog.Allow
	if err != nil {
		e.Result = decisionlog.Deny
		e.Code = string(err.Code)
		if e.Reasons == nil {
			e.Reasons = []string{err.Reason()}
		}
		if err.Code == protocol.Internal {
			g.log.Error("request failed", zap.String("decision_id", e.DecisionID), zap.Error(err.Unwrap()))
		}
	}
	op := e.Operation
	if op == "" {
		op = "unknown"
	}
	g.m.Decisions.WithLabelValues(component, op, e.Result).Inc()
	g.m.DecisionSeconds.WithLabelValues(component).Observe(e.Latency.Seconds())
	g.dlog.Log(e)
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

// requestVersion reads A2A-Version; the header given more than once is
// refused rather than read one way here and another way elsewhere.
func requestVersion(r *http.Request) (protocol.Version, *protocol.Error) {
	if len(r.Header.Values(HeaderVersion)) > 1 {
		return "", protocol.RepeatedVersion()
	}
	return protocol.ParseVersion(r.Header.Get(HeaderVersion))
}
