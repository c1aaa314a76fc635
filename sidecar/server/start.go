package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/admin"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/delegation"
	"github.com/capgate/capgate/sidecar/dispatch"
	"github.com/capgate/capgate/sidecar/extauthz"
	"github.com/capgate/capgate/sidecar/gateway"
	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/metering"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tracing"
)

// process is one run of Run: what its start-up steps built, in the order they built it, and
// what release gives back, in reverse.
type process struct {
	opts  Options
	cfg   *config.Config
	bind  config.Listen // the addresses to listen on (config, overridden by Options.Listen)
	log   *zap.Logger
	dlogz *zap.Logger // the console decision logger
	m     *metrics.Metrics

	rev    *revision.State // the first revision
	holder *revision.Holder

	tp     *tracing.Provider
	dlog   *decisionlog.Logger
	ids    *decisionlog.IDs
	limits protocol.Limits

	store tasks.Store
	// quotas counts calls against their quotas on the store, for both doors (openStore).
	quotas *metering.Enforcer
	issuer delegation.Issuer
	minter *identity.Minter
	admin  *admin.Handler
	invs   *reload.Invokers // the gateway's handler clients (nil without the gateway)

	servers      []*http.Server
	addrs        Addrs
	errc         chan error // a server that failed
	grpcDone     chan error // the ext_authz server's end (nil when not run)
	stopExtAuthz func()

	// releases undo what the steps started (tracing, decision logs, the store, ext_authz, the
	// audit stream), run in reverse by release.
	releases []func()
}

// configure is the first step: defaults, loggers, configuration warnings, the memory limit and
// the metrics registry.
func configure(opts Options) (*process, error) {
	if opts.Deployment == nil {
		return nil, errors.New("server: no deployment")
	}
	p := &process{opts: opts, log: opts.Logger, dlogz: opts.DecisionLogger, errc: make(chan error, 3), stopExtAuthz: func() {}}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	if p.dlogz == nil {
		p.dlogz = p.log
	}
	if !p.opts.Gateway && !p.opts.ExtAuthz {
		p.opts.Gateway, p.opts.ExtAuthz = true, true
	}
	if p.opts.ShutdownTimeout <= 0 {
		p.opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	p.cfg = opts.Deployment.Config
	p.bind = p.cfg.Listen.Override(opts.Listen)
	for _, w := range opts.Deployment.Warnings {
		p.log.Warn("configuration warning", zap.String("warning", w))
	}
	ApplyMemoryLimit(p.cfg)
	logMemoryLimit(p.cfg, p.log)
	p.m = metrics.New()
	p.m.BuildInfo(opts.Version, opts.Commit)
	p.limits = protocol.Limits{MaxBodyBytes: p.cfg.Limits.MaxBodyBytes, MaxDepth: p.cfg.Limits.MaxDepth}
	return p, nil
}

// startPolicy builds the first revision (the prepared policy engine, verifier, router and
// cards) and the holder every server reads revisions from.
func (p *process) startPolicy(ctx context.Context) error {
	rev, err := revision.Build(ctx, p.opts.Deployment, revisionOptions(p.opts, p.log))
	if err != nil {
		return err
	}
	// Loading parses every manifest and compiles the policy: most of what it
	// allocated is garbage now. Give it back before serving.
	debug.FreeOSMemory()
	p.rev, p.holder = rev, revision.NewHolder(rev)
	p.m.Revision.WithLabelValues(rev.ID()).Set(1)
	return nil
}

// startObservability starts tracing and the decision log; both are stopped last, after the
// servers drained, so that their last spans and decisions are exported too.
func (p *process) startObservability(ctx context.Context) error {
	tp, err := tracing.Setup(ctx, p.cfg.Tracing, p.opts.Version)
	if err != nil {
		return err
	}
	p.tp = tp
	p.onRelease(func() {
		stopCtx, cancel := p.drainContext(ctx)
		defer cancel()
		if err := tp.Shutdown(stopCtx); err != nil {
			p.log.Warn("tracing: spans not exported at shutdown", zap.Error(err))
		}
	})
	if tp.Enabled() {
		t := p.cfg.Tracing
		p.log.Info("tracing on", zap.String("otlp_endpoint", t.OTLPEndpoint), zap.String("protocol", t.Protocol), zap.Float64("sample_ratio", t.SampleRatio))
	}
	dlog, err := decisionlog.Open(ctx, decisionlog.Options{
		Services: p.cfg.Services, DecisionLogs: p.cfg.DecisionLogs, Console: p.dlogz, Logger: p.log,
		Labels: map[string]string{decisionlog.LabelCapgateVersion: cmp.Or(p.opts.Version, "dev")},
	})
	if err != nil {
		return err
	}
	p.dlog = dlog
	p.onRelease(func() {
		// Queued decisions are logged and buffered uploads sent, within
		// the drain timeout.
		stopCtx, cancel := p.drainContext(ctx)
		defer cancel()
		dlog.Stop(stopCtx)
	})
	p.m.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capgate_decision_logs_dropped_total",
			Help: "Decisions not logged because the decision-log queue was full."}, func() float64 { return float64(dlog.Dropped()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capgate_decision_logs_failed_total",
			Help: "Decision events the decision-log plugin refused (a drop or mask policy failed)."}, func() float64 { return float64(dlog.Failed()) }),
	)
	p.ids = decisionlog.NewIDs()
	return nil
}

// openStore opens the task store of the config, unless Options.Store gives one (which the
// caller then closes).
//
// The store reports its health on /metrics (capgate_store_errors_total, every operation's
// series at 0 from the start, and capgate_store_reachable); a Redis store is probed while the
// process runs (redisstore.Store.Watch). A store given by Options.Store is its caller's to watch: it
// is reported reachable.
func (p *process) openStore(ctx context.Context) error {
	health := p.m.Store(tasks.Operations())
	if p.store = p.opts.Store; p.store != nil {
		health.Reachable(true)
		p.quotas = p.newQuotas()
		return nil
	}
	store, err := newStore(ctx, p.cfg, p.log, tasks.WithObserver(health))
	if err != nil {
		return err
	}
	p.store = store
	if c, ok := store.(io.Closer); ok {
		p.onRelease(func() { _ = c.Close() })
	}
	if w, ok := store.(watcher); ok {
		watchCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Watch(watchCtx)
		}()
		p.onRelease(func() { stop(); <-done }) // before the store is closed
	}
	p.quotas = p.newQuotas()
	return nil
}

// watcher is a store that probes its backend while ctx lasts (redisstore.Store).
type watcher interface{ Watch(ctx context.Context) }

// startIdentity sets up the credentials capgate gives handlers: the token minter and the
// issuer of handler tokens (self-issued or by token exchange).
func (p *process) startIdentity(ctx context.Context) error {
	issuer, minter, err := delegation.FromConfig(ctx, p.cfg, p.log.Named("delegation"))
	if err != nil {
		return err
	}
	p.issuer, p.minter = issuer, minter
	return nil
}

// startAdmin serves the admin listener: health, readiness, metrics, the published keys, the
// usage report and the candidate routing examples (when the store keeps them).
func (p *process) startAdmin(context.Context) error {
	adminToken, err := p.cfg.AdminToken()
	if err != nil {
		return err
	}
	ids := func() []string { return admin.CapabilityIDs(p.holder.Load().Registry()) }
	opts := []admin.Option{admin.WithJWKS(publishedKeys(p.minter.JWKS, p.holder, p.log)),
		admin.WithUsage(p.store, ids, adminToken), admin.WithHeapProfile(adminToken)}
	if x, ok := p.store.(admin.ExampleStore); ok {
		ttl := func() time.Duration { return p.holder.Load().Config().Router.Learn.TTL }
		opts = append(opts, admin.WithExamples(x, ids, ttl, adminToken))
	}
	p.admin = admin.New(p.m.Registry, opts...)
	p.addrs.Admin, err = p.serveHTTP("admin", p.bind.Admin, p.admin)
	return err
}

// startExtAuthz serves the Envoy ext_authz gRPC server, when it is run.
func (p *process) startExtAuthz(ctx context.Context) error {
	if !p.opts.ExtAuthz {
		return nil
	}
	ln, err := listenOn(p.bind.ExtAuthz)
	if err != nil {
		return fmt.Errorf("listen extauthz on %s: %w", p.bind.ExtAuthz, err)
	}
	az := extauthz.New(p.holder, p.store,
		extauthz.WithLogger(p.log.Named("extauthz")),
		extauthz.WithDecisionLog(p.dlog),
		extauthz.WithDecisionIDs(p.ids),
		extauthz.WithMetrics(p.m),
		extauthz.WithLimits(p.limits),
		extauthz.WithQuotas(p.quotas),
		extauthz.WithGRPCOptions(p.tp.ServerOptions()...),
	)
	p.addrs.ExtAuthz = ln.Addr().String()
	grpcCtx, stopGRPC := context.WithCancel(context.WithoutCancel(ctx))
	p.onRelease(stopGRPC)
	p.grpcDone = make(chan error, 1)
	go func() { p.grpcDone <- extauthz.Serve(grpcCtx, ln, az, p.opts.Reflection) }()
	p.stopExtAuthz = stopGRPC
	p.log.Info("listening", zap.String("server", "extauthz"), zap.String("addr", p.addrs.ExtAuthz))
	return nil
}

// startGateway builds the handler clients, the audit stream and the dispatcher, and serves
// the A2A gateway, when it is run.
func (p *process) startGateway(ctx context.Context) error {
	if !p.opts.Gateway {
		return nil
	}
	inv, err := newInvoker(ctx, p.cfg, p.minter, p.log, p.tp)
	if err != nil {
		return err
	}
	p.invs = reload.NewInvokers(inv, p.cfg)
	auditLog, auditClose, err := openAudit(p.cfg, p.opts.AuditWriter)
	if err != nil {
		return err
	}
	p.onRelease(func() { _ = auditClose.Close() })
	pageKey, err := p.minter.DeriveKey(dispatch.PageTokenKeyPurpose)
	if err != nil {
		return err
	}
	ops := dispatch.New(p.store, p.invs, tokens{issuer: p.issuer},
		dispatch.WithPageTokenKey(pageKey),
		dispatch.WithLogger(p.log.Named("dispatch")),
		dispatch.WithMetrics(p.m),
		dispatch.WithAudit(auditLog),
		dispatch.WithQuotas(p.quotas),
	)
	gw := gateway.New(p.holder,
		gateway.WithLogger(p.log.Named("gateway")),
		gateway.WithDecisionLog(p.dlog),
		gateway.WithDecisionIDs(p.ids),
		gateway.WithMetrics(p.m),
		gateway.WithLimits(p.limits),
		gateway.WithOperations(ops),
		gateway.WithStreamKeepAlive(p.cfg.Limits.StreamKeepAlive),
		gateway.WithOwners(p.store),
		gateway.WithQuotas(p.quotas),
	)
	p.addrs.A2A, err = p.serveHTTP("gateway", p.bind.A2A, p.tp.Handler(gw), servePlainHTTP2)
	return err
}

// serveHTTP serves h on addr and returns the bound address.
func (p *process) serveHTTP(name, addr string, h http.Handler, configure ...func(*http.Server)) (string, error) {
	ln, err := listenOn(addr)
	if err != nil {
		return "", fmt.Errorf("listen %s on %s: %w", name, addr, err)
	}
	// Read, write and idle timeouts bound what one slow client can hold
	// (limits.read_timeout, write_timeout, idle_timeout); streams are
	// bounded by limits.stream_idle_timeout instead of a write timeout.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: DefaultReadHeaderTimeout, ErrorLog: zap.NewStdLog(p.log.Named(name)),
		ReadTimeout: p.cfg.Limits.ReadTimeout, WriteTimeout: p.cfg.Limits.WriteTimeout, IdleTimeout: p.cfg.Limits.IdleTimeout}
	for _, c := range configure {
		c(srv)
	}
	p.servers = append(p.servers, srv)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.errc <- fmt.Errorf("%s: %w", name, err)
		}
	}()
	p.log.Info("listening", zap.String("server", name), zap.String("addr", ln.Addr().String()))
	return ln.Addr().String(), nil
}

// serve runs the reloader, reports ready and waits for ctx to end or a server to fail, then
// shuts down.
func (p *process) serve(ctx context.Context) error {
	reloadCtx, stopReload := context.WithCancel(ctx)
	waitReload := runReload(reloadCtx, p.opts, p.holder, p.m, &reload.Live{
		Started:  p.cfg,
		Invokers: p.invs,
		NewInvoker: func(ctx context.Context, cfg *config.Config) (*handler.Invoker, error) {
			return newInvoker(ctx, cfg, p.minter, p.log, p.tp)
		},
		Log: p.log,
	})
	p.admin.SetReady(true)
	p.log.Info("capgate serving", zap.String("policy_revision", p.rev.ID()), zap.Int("capabilities", p.rev.Registry().Len()))
	if p.opts.OnReady != nil {
		p.opts.OnReady(p.addrs)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-p.errc:
		p.log.Error("server failed", zap.Error(runErr))
	}
	stopReload()
	waitReload()
	p.admin.SetReady(false)
	return p.shutdown(ctx, runErr)
}

// shutdown drains the HTTP servers and the ext_authz server within the shutdown timeout and
// returns runErr, or else the ext_authz server's error.
func (p *process) shutdown(ctx context.Context, runErr error) error {
	shutdownCtx, cancel := p.drainContext(ctx)
	defer cancel()
	p.log.Info("draining", zap.Duration("timeout", p.opts.ShutdownTimeout))
	for _, s := range p.servers {
		if err := s.Shutdown(shutdownCtx); err != nil {
			p.log.Warn("shutdown incomplete", zap.Error(err))
			_ = s.Close()
		}
	}
	p.stopExtAuthz()
	if p.grpcDone != nil {
		select {
		case err := <-p.grpcDone:
			if err != nil && runErr == nil {
				runErr = err
			}
		case <-shutdownCtx.Done():
			p.log.Warn("ext_authz shutdown incomplete")
		}
	}
	return runErr
}

// drainContext bounds a drain by the shutdown timeout, outliving ctx's cancellation.
func (p *process) drainContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), p.opts.ShutdownTimeout)
}

// closeServers closes the HTTP servers at once: a later start-up step failed.
func (p *process) closeServers() {
	for _, s := range p.servers {
		_ = s.Close()
	}
}

// onRelease registers what release undoes.
func (p *process) onRelease(f func()) { p.releases = append(p.releases, f) }

// release undoes what the steps started, last first.
func (p *process) release() {
	for i := len(p.releases) - 1; i >= 0; i-- {
		p.releases[i]()
	}
}

// newQuotas is the quota enforcer of both doors, counting on the store: on its Redis servers
// when it is a Redis store, else in memory (one replica). A charged messageId is remembered as
// long as a retry of it is (limits.message_id_window).
func (p *process) newQuotas() *metering.Enforcer {
	return metering.NewEnforcer(metering.ForStore(p.store), p.m.Registry, p.log, p.cfg.Limits.MessageIDWindow)
}
