package tracing

import (
	"context"
	"strings"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// checkMethod is the full method of Envoy's ext_authz Check.
const checkMethod = "/envoy.service.auth.v3.Authorization/Check"

// ServerOptions are the gRPC server options of the ext_authz server: a
// server span for each Check, a child of the trace in the headers of the
// HTTP request Envoy checks (the CheckRequest's attributes), else of the
// call's gRPC metadata. Nil with p off.
func (p *Provider) ServerOptions() []grpc.ServerOption {
	if !p.Enabled() {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(p.unary)}
}

func (p *Provider) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod != checkMethod {
		return handler(ctx, req)
	}
	cr, _ := req.(*authv3.CheckRequest)
	var carrier propagation.TextMapCarrier
	if h := cr.GetAttributes().GetRequest().GetHttp().GetHeaders(); h["traceparent"] != "" {
		carrier = propagation.MapCarrier(h) // Envoy lower-cases header names
	} else if md, ok := metadata.FromIncomingContext(ctx); ok {
		carrier = mdCarrier(md)
	}
	if carrier != nil {
		ctx = p.prop.Extract(ctx, carrier)
	}
	ctx, span := p.tracer.Start(ctx, strings.TrimPrefix(checkMethod, "/"), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("rpc.system", "grpc"),
		attribute.String("rpc.service", "envoy.service.auth.v3.Authorization"),
		attribute.String("rpc.method", "Check"),
	))
	defer span.End()
	resp, err := handler(ctx, req)
	if r, ok := resp.(*authv3.CheckResponse); ok {
		span.SetAttributes(attribute.Int("rpc.grpc.status_code", 0), attribute.Bool("capgate.allowed", r.GetStatus().GetCode() == 0))
		for _, h := range append(r.GetOkResponse().GetHeaders(), r.GetDeniedResponse().GetHeaders()...) {
			if strings.EqualFold(h.GetHeader().GetKey(), HeaderDecisionID) {
				span.SetAttributes(attribute.String(AttrDecisionID, h.GetHeader().GetValue()))
			}
		}
	}
	return resp, err
}

// mdCarrier reads gRPC metadata as a propagation carrier.
type mdCarrier metadata.MD

func (m mdCarrier) Get(k string) string {
	if v := metadata.MD(m).Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (m mdCarrier) Set(k, v string) { metadata.MD(m).Set(k, v) }

func (m mdCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
