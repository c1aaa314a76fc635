// Package gateway is the A2A server callers talk to: it serves the public and
// extended cards, speaks the JSON-RPC and HTTP+JSON bindings in A2A 1.0 and
// 0.3, authenticates every caller itself, negotiates extensions and hands
// message and task operations to the router.
package gateway

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/serving"
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

// Call is one authenticated, parsed A2A request on its way to an operation.
type Call struct {
	Rev        *serving.State
	Request    *protocol.Request
	Principal  identity.Principal
	Extensions []string // activated extension URIs
	DecisionID string
	Header     http.Header // the request's headers (read-only)
	// Log is this request's decision-log entry; operations record the
	// capability, routing layer and confidence they decided.
	Log *decisionlog.Entry
	// Task is the binding of the task the request targets, as admission
	// found it (owned by the caller); nil when it names none.
	Task *tasks.Binding
}

// Operations serves message and task operations (SendMessage, GetTask, ...).
// It writes its own success responses through the Responder and returns a
// *protocol.Error for the gateway to render.
type Operations interface {
	Serve(ctx context.Context, call *Call, w Responder) *protocol.Error
}

// Gateway is the A2A HTTP handler.
type Gateway struct {
	holder *serving.Holder
	log    *zap.Logger
	dlog   *decisionlog.Logger
	ids    *decisionlog.IDs
	m      *metrics.Metrics
	limits protocol.Limits
	ops    Operations
	owners admission.Owners
	admit  *admission.Admitter
	now    func() time.Time
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

// WithOperations sets the handler of message and task operations. Without
// one those operations answer UnsupportedOperation.
func WithOperations(o Operations) Option { return func(g *Gateway) { g.ops = o } }

// WithOwners sets the task store admission asks who owns a task. Without
// one, every request naming a task is refused (fail closed).
func WithOwners(o admission.Owners) Option { return func(g *Gateway) { g.owners = o } }

// WithDecisionIDs shares a decision id source.
func WithDecisionIDs(ids *decisionlog.IDs) Option { return func(g *Gateway) { g.ids = ids } }

// New returns a gateway serving the holder's current revision.
func New(h *serving.Holder, opts ...Option) *Gateway {
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
	g.admit = admission.New(g.owners, g.log)
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

// basePath is the path of the advertised interface URL, without a trailing slash.
func basePath(rev *serving.State) string {
	return rev.Deployment.BasePath()
}
