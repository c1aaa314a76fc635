// Package gateway is the A2A server callers talk to: it serves the public and
// extended cards, speaks the JSON-RPC, HTTP+JSON and gRPC bindings in A2A 1.0
// and 0.3, authenticates every caller itself, negotiates extensions, hands
// message and task operations to their server (exchange.Server), and writes
// each answer in the caller's binding.
package gateway

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/metering"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tasks"
)

// Header names.
const (
	HeaderVersion    = protocol.VersionHeader
	HeaderExtensions = protocol.ExtensionsHeader
	// HeaderExtensionsV03 is the A2A 0.3 name of HeaderExtensions, read
	// and echoed for 0.3 requests only.
	HeaderExtensionsV03 = protocol.ExtensionsHeaderV03
	HeaderDecisionID    = "X-Capgate-Decision-Id"
	PublicCardPath      = protocol.AgentCardPath
	// PublicCardPathV03 is where A2A 0.3 clients look for the card; it
	// serves the 0.3 shape.
	PublicCardPathV03 = protocol.AgentCardPathV03
)

// Gateway is the A2A HTTP handler.
type Gateway struct {
	quotas *metering.Enforcer
	holder *revision.Holder
	log    *zap.Logger
	dlog   *decisionlog.Logger
	ids    *decisionlog.IDs
	m      *metrics.Metrics
	// decisions are the decision counters of every operation label, resolved
	// (and so created at 0) once.
	decisions map[string]*metrics.DecisionCounters
	limits    protocol.Limits
	ops       exchange.Server
	// keepAlive is the SSE keep-alive interval of streamed answers (0: none).
	keepAlive time.Duration
	owners    tasks.Owners
	admit     *admission.Admitter
	now       func() time.Time
}

var _ http.Handler = (*Gateway)(nil)

// Option configures a Gateway.
type Option func(*Gateway)

// WithLogger sets the operational logger.
func WithLogger(l *zap.Logger) Option { return func(g *Gateway) { g.log = l } }

// WithDecisionLog sets the decision logger.
func WithDecisionLog(d *decisionlog.Logger) Option { return func(g *Gateway) { g.dlog = d } }

// WithMetrics sets the Prometheus collectors.
func WithMetrics(m *metrics.Metrics) Option { return func(g *Gateway) { g.m = m } }

// WithLimits sets request size and nesting limits.
func WithLimits(l protocol.Limits) Option { return func(g *Gateway) { g.limits = l } }

// WithOperations sets the server of message and task operations. Without
// one those operations answer UnsupportedOperation.
func WithOperations(o exchange.Server) Option { return func(g *Gateway) { g.ops = o } }

// WithStreamKeepAlive sends an SSE comment on a streamed answer that has been
// quiet for every (config limits.stream_keepalive; 0, the default: none).
func WithStreamKeepAlive(every time.Duration) Option {
	return func(g *Gateway) { g.keepAlive = every }
}

// WithOwners sets the task store admission asks who owns a task. Without
// one, every request naming a task is refused (fail closed).
func WithOwners(o tasks.Owners) Option { return func(g *Gateway) { g.owners = o } }

// WithQuotas counts admitted calls against their quotas (nil: not enforced).
func WithQuotas(e *metering.Enforcer) Option { return func(g *Gateway) { g.quotas = e } }

// WithDecisionIDs shares a decision id source.
func WithDecisionIDs(ids *decisionlog.IDs) Option { return func(g *Gateway) { g.ids = ids } }

// New returns a gateway serving the holder's current revision.
func New(h *revision.Holder, opts ...Option) *Gateway {
	g := &Gateway{holder: h, now: time.Now}
	for _, o := range opts {
		o(g)
	}
	if g.log == nil {
		g.log = zap.NewNop()
	}
	if g.dlog == nil {
		g.dlog = decisionlog.New(nil)
	}
	if g.ids == nil {
		g.ids = decisionlog.NewIDs()
	}
	if g.m == nil {
		g.m = metrics.New()
	}
	g.decisions = map[string]*metrics.DecisionCounters{unknownOperation: g.m.DecisionCounters(component, unknownOperation)}
	for _, op := range protocol.Operations() {
		g.decisions[string(op)] = g.m.DecisionCounters(component, string(op))
	}
	g.admit = admission.New(g.owners, g.log, admission.WithQuotas(g.quotas))
	if g.limits.MaxBodyBytes <= 0 {
		g.limits.MaxBodyBytes = protocol.DefaultMaxBodyBytes
	}
	return g
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rev := g.holder.Load()
	if path := r.URL.EscapedPath(); path == PublicCardPath || path == PublicCardPathV03 {
		g.servePublicCard(w, r, rev)
		return
	}
	g.serveA2A(w, r, rev)
}
