package tracing

import (
	"net"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys capgate sets besides the semantic conventions.
const (
	AttrDecisionID = "capgate.decision_id"
)

// HeaderDecisionID is the response header that carries the decision id
// (the gateway's and ext_authz's).
const HeaderDecisionID = "X-Capgate-Decision-Id"

// SetRoute records the route a request matched on its server span: the
// http.route attribute (a low-cardinality template such as
// "/tasks/{id}:cancel", never the path with its ids) and the span name
// "METHOD route" the semantic conventions give a server span with a route.
// A span that is not recording is left alone.
func SetRoute(span trace.Span, method, route string) {
	if span == nil || !span.IsRecording() || route == "" {
		return
	}
	span.SetAttributes(attribute.String("http.route", route))
	span.SetName(method + " " + route)
}

// Handler wraps the gateway: each request gets a server span, a child of the
// trace in its traceparent/tracestate (and baggage) headers when it has one,
// with the http.* and server.* attributes of the semantic conventions and
// the decision id the gateway answers with. With p off, h is returned as is.
func (p *Provider) Handler(h http.Handler) http.Handler {
	if !p.Enabled() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := p.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		attrs := []attribute.KeyValue{
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
			attribute.String("url.scheme", scheme(r)),
		}
		if host, port, err := net.SplitHostPort(r.Host); err == nil {
			attrs = append(attrs, attribute.String("server.address", host))
			if n, err := strconv.Atoi(port); err == nil {
				attrs = append(attrs, attribute.Int("server.port", n))
			}
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			attrs = append(attrs, attribute.String("network.peer.address", host))
		}
		ctx, span := p.tracer.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
		if id := rec.Header().Get(HeaderDecisionID); id != "" {
			span.SetAttributes(attribute.String(AttrDecisionID, id))
		}
		if rec.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rec.status))
		}
	})
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// recorder remembers the status; it passes Flush through (streams) and
// unwraps for http.ResponseController.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		r.wrote = true
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Transport wraps the round tripper of handler calls: each call is a client
// span, and the trace context (traceparent, tracestate, baggage) of the
// request's context is sent to the handler, so the handler's own spans join
// the caller's trace. With p off, rt is returned as is.
func (p *Provider) Transport(rt http.RoundTripper) http.RoundTripper {
	if !p.Enabled() {
		return rt
	}
	return &transport{p: p, base: rt}
}

type transport struct {
	p    *Provider
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", req.Method),
		attribute.String("url.full", (&urlNoQuery{req}).String()),
		attribute.String("server.address", req.URL.Hostname()),
	}
	if port := req.URL.Port(); port != "" {
		if n, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attribute.Int("server.port", n))
		}
	}
	ctx, span := t.p.tracer.Start(req.Context(), "handler "+req.Method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	out := req.Clone(ctx)
	t.p.prop.Inject(ctx, propagation.HeaderCarrier(out.Header))
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		span.SetStatus(codes.Error, "handler unreachable")
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
	}
	return resp, nil
}

// urlNoQuery renders a request URL without query, fragment or user info.
type urlNoQuery struct{ r *http.Request }

func (u *urlNoQuery) String() string {
	c := *u.r.URL
	c.RawQuery, c.Fragment, c.User = "", "", nil
	return c.String()
}
