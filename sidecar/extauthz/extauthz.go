// Package extauthz is capgate's Envoy external authorization server: it answers
// envoy.service.auth.v3.Authorization/Check for every A2A request before Envoy
// forwards it, with the same parser, identity and policy as the gateway.
package extauthz

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"

	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/metering"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tasks"
)

// component is the decision-log and metrics label of this server.
const component = "extauthz"

// ServiceName is the gRPC service this package serves; the health service
// reports it (and the overall server, "") as SERVING.
const ServiceName = "envoy.service.auth.v3.Authorization"

// Server limits.
const (
	// grpcOverheadBytes is what a CheckRequest carries besides the body
	// (headers, peer attributes, metadata).
	grpcOverheadBytes = 1 << 20
	// DefaultShutdownTimeout bounds the graceful stop in Serve.
	DefaultShutdownTimeout = 10 * time.Second
)

// Server implements authv3.AuthorizationServer. It is safe for concurrent
// use and holds no per-request state.
type Server struct {
	holder     *revision.Holder
	admit      *admission.Admitter
	log        *zap.Logger
	dlog       *decisionlog.Logger
	ids        *decisionlog.IDs
	limits     protocol.Limits
	quotas     *metering.Enforcer
	reflection bool
	grpcOpts   []grpc.ServerOption
	stats      *stats

	// plan caches what is derived from the current revision.
	plan atomic.Pointer[plan]
	// hook runs at the start of every decision; tests use it to inject a panic.
	hook func()
}

var (
	_ authv3.AuthorizationServer = (*Server)(nil)
	_ authv3.AuthorizationServer = Noop{}
)

// Option configures a Server.
type Option func(*Server)

// WithLogger sets the operational logger (nil: discard).
func WithLogger(l *zap.Logger) Option { return func(s *Server) { s.log = l } }

// WithDecisionLog sets the decision logger (default: discard).
func WithDecisionLog(d *decisionlog.Logger) Option { return func(s *Server) { s.dlog = d } }

// WithMetrics sets the Prometheus collectors (default: a private registry).
func WithMetrics(m *metrics.Metrics) Option { return func(s *Server) { s.stats = newStats(m) } }

// WithQuotas counts admitted calls against their quotas (nil: not enforced).
func WithQuotas(e *metering.Enforcer) Option { return func(s *Server) { s.quotas = e } }

// WithDecisionIDs shares a decision id source with the gateway.
func WithDecisionIDs(ids *decisionlog.IDs) Option { return func(s *Server) { s.ids = ids } }

// WithLimits sets the body size and nesting limits of the parser. Envoy's
// with_request_body.max_request_bytes must be at least MaxBodyBytes.
func WithLimits(l protocol.Limits) Option { return func(s *Server) { s.limits = l } }

// WithReflection makes Register also register gRPC server reflection.
func WithReflection(on bool) Option { return func(s *Server) { s.reflection = on } }

// WithGRPCOptions adds options to the gRPC server Serve builds (tracing's
// interceptor).
func WithGRPCOptions(opts ...grpc.ServerOption) Option {
	return func(s *Server) { s.grpcOpts = append(s.grpcOpts, opts...) }
}

// New returns a Server deciding with the holder's current revision through
// the one admission function. owners answers task ownership; nil refuses
// every request naming a task (fail closed). mTLS peers (Envoy's
// attributes.source.principal) are mapped by the revision's
// auth.mtls_principals, so a reload changes them.
func New(h *revision.Holder, owners tasks.Owners, opts ...Option) *Server {
	s := &Server{holder: h}
	for _, o := range opts {
		o(s)
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.log = s.log.Named(component)
	s.admit = admission.New(owners, s.log, admission.WithQuotas(s.quotas))
	if s.dlog == nil {
		s.dlog = decisionlog.New(nil)
	}
	if s.ids == nil {
		s.ids = decisionlog.NewIDs()
	}
	if s.stats == nil {
		s.stats = newStats(metrics.New())
	}
	return s
}

// Register registers the Authorization service and the gRPC health service
// (SERVING) on g, and reflection when WithReflection(true) was given. It
// returns the health server so that a caller can report NOT_SERVING on
// shutdown.
func (s *Server) Register(g *grpc.Server) *health.Server {
	authv3.RegisterAuthorizationServer(g, s)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, hs)
	if s.reflection {
		reflection.Register(g)
	}
	return hs
}

// NewGRPCServer returns a gRPC server with limits suited to Envoy's
// ext_authz client: messages up to the body limit plus headers, keepalive
// pings from Envoy accepted.
func (s *Server) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	maxBody := s.limits.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = protocol.DefaultMaxBodyBytes
	}
	base := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(maxBody) + grpcOverheadBytes),
		grpc.MaxSendMsgSize(4 << 20),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
	}
	return grpc.NewServer(append(append(base, s.grpcOpts...), opts...)...)
}

// Serve serves s on ln until ctx is done, then stops gracefully (health
// NOT_SERVING first; in-flight checks finish within DefaultShutdownTimeout).
// It returns nil after a shutdown caused by ctx.
func Serve(ctx context.Context, ln net.Listener, s *Server, reflection bool) error {
	s.reflection = s.reflection || reflection
	g := s.NewGRPCServer()
	hs := s.Register(g)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	hs.Shutdown()
	done := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(DefaultShutdownTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		g.Stop()
		<-done
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Check implements authv3.AuthorizationServer. It never returns an error:
// every outcome, internal failures and panics included, is a CheckResponse,
// and anything but a clean allow is a denial.
func (s *Server) Check(ctx context.Context, req *authv3.CheckRequest) (resp *authv3.CheckResponse, err error) {
	start := time.Now()
	d := decision{id: s.ids.Next(), span: trace.SpanFromContext(ctx), requestedBy: requestedBy(ctx, req)}
	defer func() {
		if r := recover(); r != nil {
			fields := []zap.Field{zap.String("decision_id", d.id), zap.String("panic_type", panicType(r)), zap.Stack("stack")}
			if re, ok := r.(runtime.Error); ok { // runtime errors carry no request data
				fields = append(fields, zap.String("panic", re.Error()))
			}
			s.log.Error("check panicked; denying", fields...)
			resp, err = s.internalDenial(&d, start), nil
		}
	}()
	s.decide(ctx, req, &d)
	return s.finish(&d, start), nil
}

// requestedBy is the address of the caller Envoy checks for (the source
// of the attributes), else the gRPC peer (Envoy itself, or a test client).
func requestedBy(ctx context.Context, req *authv3.CheckRequest) string {
	if sa := req.GetAttributes().GetSource().GetAddress().GetSocketAddress(); sa.GetAddress() != "" {
		return net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// Noop is an Authorization server that allows every request without looking
// at it: the floor for load tests of the Check path.
type Noop struct{}

// Check allows.
func (Noop) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return &authv3.CheckResponse{Status: okStatus(), HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{}}}, nil
}
