package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/tracing"
)

func TestOffInstallsNothing(t *testing.T) {
	tp, err := tracing.Setup(t.Context(), config.Tracing{}, "v")
	require.NoError(t, err)
	require.Nil(t, tp)
	require.False(t, tp.Enabled())
	h := http.NewServeMux()
	require.Equal(t, http.Handler(h), tp.Handler(h), "the gateway is not wrapped")
	require.Equal(t, http.DefaultTransport, tp.Transport(http.DefaultTransport), "handler calls are not wrapped")
	require.Nil(t, tp.ServerOptions(), "no interceptor")
	require.NoError(t, tp.Shutdown(t.Context()))

	ctx, span := tracing.Child(t.Context(), "x")
	require.Equal(t, t.Context(), ctx, "no span started without a recording parent")
	require.False(t, span.IsRecording())
}

func TestChildFollowsTheParent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("t").Start(t.Context(), "parent")
	_, child := tracing.Child(ctx, "child")
	child.End()
	parent.End()
	spans := rec.Ended()
	require.Len(t, spans, 2)
	require.Equal(t, "child", spans[0].Name())
	require.Equal(t, parent.SpanContext().SpanID(), spans[0].Parent().SpanID())
}

// BenchmarkHandlerOff is the gateway's tracing cost with tracing off: the
// handler is not wrapped, so it is the bare handler's.
func BenchmarkHandlerOff(b *testing.B) {
	var tp *tracing.Provider
	h := tp.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, span := tracing.Child(r.Context(), "capgate.route")
		span.End()
	}))
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}

// BenchmarkChildOff is a hook (policy, routing, token) with tracing off.
func BenchmarkChildOff(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := tracing.Child(ctx, "capgate.policy.view")
		span.End()
	}
}

// BenchmarkChildOn is the same hook under a recording span (tracing on,
// sampled), with an in-memory processor instead of an exporter.
func BenchmarkChildOn(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	ctx, parent := tp.Tracer("b").Start(context.Background(), "parent")
	defer parent.End()
	b.ReportAllocs()
	for b.Loop() {
		_, span := tracing.Child(ctx, "capgate.policy.view")
		span.End()
	}
	_ = trace.SpanFromContext(ctx)
}
