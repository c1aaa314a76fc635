// Package tracing sets up OpenTelemetry tracing for capgate: the OTLP
// exporter (gRPC or HTTP) and sampler from the `tracing` config, W3C trace
// context and baggage propagation, and the three places a trace enters or
// leaves capgate — the gateway's HTTP handler, the ext_authz gRPC server
// (trace context read from the headers Envoy puts in the CheckRequest) and
// the HTTP calls to handlers. Spans inside (policy, routing, token minting)
// are children started only when their context already holds a recording
// span (Child), so with tracing off nothing is started, allocated or
// exported: the hooks are never installed and Child returns at once.
package tracing

import (
	"context"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/capgate/capgate/policy/config"
)

// ScopeName is the instrumentation scope of capgate's spans.
const ScopeName = "github.com/capgate/capgate"

// Provider is capgate's tracer provider. The zero value (and a nil
// *Provider) is tracing off.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// Setup builds the provider of cfg: nil when tracing is off
// (cfg.OTLPEndpoint empty). Spans are batched and exported over OTLP;
// sampling is parent-based with cfg.SampleRatio for new traces.
func Setup(ctx context.Context, cfg config.Tracing, version string, opts ...sdktrace.TracerProviderOption) (*Provider, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	exp, err := exporter(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", cfg.ServiceName),
		attribute.String("service.version", version),
	)
	base := []sdktrace.TracerProviderOption{
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	}
	tp := sdktrace.NewTracerProvider(append(base, opts...)...)
	return &Provider{
		tp:     tp,
		tracer: tp.Tracer(ScopeName),
		prop:   propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}, nil
}

func exporter(ctx context.Context, cfg config.Tracing) (*otlptrace.Exporter, error) {
	u, err := url.Parse(cfg.OTLPEndpoint)
	if err != nil {
		return nil, fmt.Errorf("otlp_endpoint: %w", err)
	}
	switch cfg.Protocol {
	case config.TracingHTTP:
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces" // OTLP/HTTP's default path
		}
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	default:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	}
}

// Enabled reports whether p records traces.
func (p *Provider) Enabled() bool { return p != nil && p.tp != nil }

// Shutdown exports what is buffered, within ctx, and stops the provider.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// ForceFlush exports what is buffered now.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.tp.ForceFlush(ctx)
}

// Child starts a span under the recording span of ctx, with its provider;
// when ctx holds none (tracing off, or the trace not sampled) it returns ctx
// and that non-recording span, starting nothing. End the span in both cases.
func Child(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(ScopeName).Start(ctx, name, trace.WithAttributes(attrs...))
}
