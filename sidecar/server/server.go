// Package server wires capgate's listeners — the A2A gateway, the Envoy
// ext_authz gRPC server and the admin listener — around one revision holder,
// and runs them until the context ends, then drains in-flight requests.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/admin"
	"github.com/capgate/capgate/sidecar/audit"
	"github.com/capgate/capgate/sidecar/cardsig"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/delegation"
	"github.com/capgate/capgate/sidecar/dispatch"
	"github.com/capgate/capgate/sidecar/extauthz"
	"github.com/capgate/capgate/sidecar/gateway"
	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/sidecar/serving"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tracing"
)

// Defaults.
const (
	DefaultShutdownTimeout   = 15 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
)

// Options configure Run.
type Options struct {
	// Deployment to serve (required).
	Deployment *deployment.Deployment
	// Logger for operations; decisions go to DecisionLogger (nil: Logger).
	Logger         *zap.Logger
	DecisionLogger *zap.Logger
	// Gateway and ExtAuthz select the servers to run (both when neither set).
	Gateway, ExtAuthz bool
	// ShutdownTimeout bounds draining on shutdown.
	ShutdownTimeout time.Duration
	// OnReady, when set, is called with the bound addresses once every
	// listener accepts connections (tests listen on port 0).
	OnReady func(Addrs)
	// Store holds task bindings and usage; nil: from the config.
	Store tasks.Store
	// Reflection enables gRPC reflection on the ext_authz listener.
	Reflection bool
	// AuditWriter receives the audit stream when audit.file is not set
	// (default: standard output).
	AuditWriter io.Writer
	// Source, when set, is reloaded on SIGHUP, when the files it reads
	// change and when its bundle URL has a new bundle; each good revision
	// is swapped in, a bad one rejected (see sidecar/reload). Nil: the
	// deployment is fixed (the embedded default).
	Source reload.Source
	// ReloadDebounce is the quiet period before a reload
	// (reload.DefaultDebounce when 0).
	ReloadDebounce time.Duration
	// Version is capgate's version, the service.version of its spans;
	// Version and Commit label capgate_build_info.
	Version, Commit string
	// Listen holds addresses that take the place of the config's listen
	// addresses (serve's --listen-* flags); an empty one keeps the
	// config's. Reloads compare configs only, so an override is never
	// reported as a change needing a restart.
	Listen config.Listen
}

// Addrs are the bound listener addresses ("" when a server is not run).
type Addrs struct {
	A2A, ExtAuthz, Admin string
}

// revisionOptions are the options every revision of this server is built
// with: no routing index or public card unless the gateway is served.
func revisionOptions(opts Options, log *zap.Logger) serving.Options {
	return serving.Options{Logger: log, NoGateway: !opts.Gateway}
}

// Run serves until ctx is done, then shuts down gracefully.
func Run(ctx context.Context, opts Options) error {
	if opts.Deployment == nil {
		return errors.New("server: no deployment")
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	dlogger := opts.DecisionLogger
	if dlogger == nil {
		dlogger = log
	}
	if !opts.Gateway && !opts.ExtAuthz {
		opts.Gateway, opts.ExtAuthz = true, true
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	cfg := opts.Deployment.Config
	addrsToBind := cfg.Listen.Override(opts.Listen)
	for _, w := range opts.Deployment.Warnings {
		log.Warn("configuration warning", zap.String("warning", w))
	}

	ApplyMemoryLimit(cfg)
	logMemoryLimit(cfg, log)
	m := metrics.New()
	m.BuildInfo(opts.Version, opts.Commit)
	rev, err := serving.Build(ctx, opts.Deployment, revisionOptions(opts, log))
	if err != nil {
		return err
	}
	// Loading parses every manifest and compiles the policy: most of what it
	// allocated is garbage now. Give it back before serving.
	debug.FreeOSMemory()
	holder := serving.NewHolder(rev)
	m.Revision.WithLabelValues(rev.ID()).Set(1)
	tp, err := tracing.Setup(ctx, cfg.Tracing, opts.Version)
	if err != nil {
		return err
	}
	defer func() {
		// After the servers drained: their last spans are exported too.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.ShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(stopCtx); err != nil {
			log.Warn("tracing: spans not exported at shutdown", zap.Error(err))
		}
	}()
	if tp.Enabled() {
		log.Info("tracing on", zap.String("otlp_endpoint", cfg.Tracing.OTLPEndpoint), zap.String("protocol", cfg.Tracing.Protocol), zap.Float64("sample_ratio", cfg.Tracing.SampleRatio))
	}
	dlog, err := decisionlog.Open(ctx, decisionlog.Options{
		Services: cfg.Services, DecisionLogs: cfg.DecisionLogs, Console: dlogger, Logger: log,
	})
	if err != nil {
		return err
	}
	defer func() {
		// Queued decisions are logged and buffered uploads sent, within
		// the drain timeout.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.ShutdownTimeout)
		defer cancel()
		dlog.Stop(stopCtx)
	}()
	m.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capgate_decision_logs_dropped_total",
			Help: "Decisions not logged because the decision-log queue was full."}, func() float64 { return float64(dlog.Dropped()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capgate_decision_logs_failed_total",
			Help: "Decision events the decision-log plugin refused (a drop or mask policy failed)."}, func() float64 { return float64(dlog.Failed()) }),
	)
	ids := decisionlog.NewIDs()
	limits := protocol.Limits{MaxBodyBytes: cfg.Limits.MaxBodyBytes, MaxDepth: cfg.Limits.MaxDepth}

	store := opts.Store
	if store == nil {
		if store, err = newStore(ctx, cfg, log); err != nil {
			return err
		}
		if c, ok := store.(io.Closer); ok {
			defer func() { _ = c.Close() }()
		}
	}
	issuer, minter, err := delegation.FromConfig(ctx, cfg, log.Named("delegation"))
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	adminToken, err := cfg.AdminToken()
	if err != nil {
		return err
	}
	adminH := admin.New(m.Registry, admin.WithJWKS(publishedKeys(minter.JWKS, holder, log)),
		admin.WithUsage(store, func() []string { return admin.CapabilityIDs(holder.Load().Registry()) }, adminToken))
	var servers []*http.Server
	var addrs Addrs
	stopExtAuthz := func() {}
	errc := make(chan error, 3)

	listen := func(name, addr string, h http.Handler, configure ...func(*http.Server)) (string, error) {
		ln, err := listenOn(addr)
		if err != nil {
			return "", fmt.Errorf("listen %s on %s: %w", name, addr, err)
		}
		// Read, write and idle timeouts bound what one slow client can hold
		// (limits.read_timeout, write_timeout, idle_timeout); streams are
		// bounded by limits.stream_idle_timeout instead of a write timeout.
		srv := &http.Server{Handler: h, ReadHeaderTimeout: DefaultReadHeaderTimeout, ErrorLog: zap.NewStdLog(log.Named(name)),
			ReadTimeout: cfg.Limits.ReadTimeout, WriteTimeout: cfg.Limits.WriteTimeout, IdleTimeout: cfg.Limits.IdleTimeout}
		for _, c := range configure {
			c(srv)
		}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
		log.Info("listening", zap.String("server", name), zap.String("addr", ln.Addr().String()))
		return ln.Addr().String(), nil
	}
	closeAll := func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}

	if addrs.Admin, err = listen("admin", addrsToBind.Admin, adminH); err != nil {
		return err
	}
	var grpcDone chan error
	var invs *reload.Invokers
	if opts.ExtAuthz {
		ln, err := listenOn(addrsToBind.ExtAuthz)
		if err != nil {
			closeAll()
			return fmt.Errorf("listen extauthz on %s: %w", addrsToBind.ExtAuthz, err)
		}
		az := extauthz.New(holder, store,
			extauthz.WithLogger(log.Named("extauthz")),
			extauthz.WithDecisionLog(dlog),
			extauthz.WithDecisionIDs(ids),
			extauthz.WithMetrics(m),
			extauthz.WithLimits(limits),
			extauthz.WithGRPCOptions(tp.ServerOptions()...),
		)
		addrs.ExtAuthz = ln.Addr().String()
		grpcCtx, stopGRPC := context.WithCancel(context.WithoutCancel(ctx))
		defer stopGRPC()
		grpcDone = make(chan error, 1)
		go func() { grpcDone <- extauthz.Serve(grpcCtx, ln, az, opts.Reflection) }()
		stopExtAuthz = stopGRPC
		log.Info("listening", zap.String("server", "extauthz"), zap.String("addr", addrs.ExtAuthz))
	}
	if opts.Gateway {
		inv, err := newInvoker(ctx, cfg, minter, log, tp)
		if err != nil {
			closeAll()
			return err
		}
		invs = reload.NewInvokers(inv, cfg)
		auditLog, auditClose, err := openAudit(cfg, opts.AuditWriter)
		if err != nil {
			closeAll()
			return err
		}
		defer func() { _ = auditClose.Close() }()
		pageKey, err := minter.DeriveKey(dispatch.PageTokenKeyPurpose)
		if err != nil {
			closeAll()
			return err
		}
		ops := dispatch.New(store, invs, tokens{issuer: issuer},
			dispatch.WithPageTokenKey(pageKey),
			dispatch.WithLogger(log.Named("dispatch")),
			dispatch.WithMetrics(m),
			dispatch.WithAudit(auditLog),
		)
		gw := gateway.New(holder,
			gateway.WithLogger(log.Named("gateway")),
			gateway.WithDecisionLog(dlog),
			gateway.WithDecisionIDs(ids),
			gateway.WithMetrics(m),
			gateway.WithLimits(limits),
			gateway.WithOperations(ops),
			gateway.WithStreamKeepAlive(cfg.Limits.StreamKeepAlive),
			gateway.WithOwners(store),
		)
		if addrs.A2A, err = listen("gateway", addrsToBind.A2A, tp.Handler(gw), servePlainHTTP2); err != nil {
			closeAll()
			return err
		}
	}
	reloadCtx, stopReload := context.WithCancel(ctx)
	waitReload := runReload(reloadCtx, opts, holder, m, &reload.Live{
		Started:  cfg,
		Invokers: invs,
		NewInvoker: func(ctx context.Context, cfg *config.Config) (*handler.Invoker, error) {
			return newInvoker(ctx, cfg, minter, log, tp)
		},
		Log: log,
	})
	adminH.SetReady(true)
	log.Info("capgate serving", zap.String("policy_revision", rev.ID()), zap.Int("capabilities", rev.Registry().Len()))
	if opts.OnReady != nil {
		opts.OnReady(addrs)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
		log.Error("server failed", zap.Error(runErr))
	}
	stopReload()
	waitReload()
	adminH.SetReady(false)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.ShutdownTimeout)
	defer cancel()
	log.Info("draining", zap.Duration("timeout", opts.ShutdownTimeout))
	for _, s := range servers {
		if err := s.Shutdown(shutdownCtx); err != nil {
			log.Warn("shutdown incomplete", zap.Error(err))
			_ = s.Close()
		}
	}
	stopExtAuthz()
	if grpcDone != nil {
		select {
		case err := <-grpcDone:
			if err != nil && runErr == nil {
				runErr = err
			}
		case <-shutdownCtx.Done():
			log.Warn("ext_authz shutdown incomplete")
		}
	}
	return runErr
}

// openAudit opens the audit stream: audit.file (relative to the config's
// folder) or the given writer, standard output by default.
func openAudit(cfg *config.Config, w io.Writer) (*audit.Logger, io.Closer, error) {
	ac := cfg.Audit
	if ac.File != "" && !filepath.IsAbs(ac.File) && cfg.Dir != "" {
		ac.File = filepath.Join(cfg.Dir, ac.File)
	}
	if w == nil {
		w = os.Stdout
	}
	l, c, err := audit.New(ac, w)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: %w", err)
	}
	return l, c, nil
}

// newStore opens the configured task store: memory, or Redis shared by
// replicas. A Redis that is down at start is not fatal: cards keep being
// served and task operations fail closed until it answers.
func newStore(ctx context.Context, cfg *config.Config, log *zap.Logger) (tasks.Store, error) {
	pw, err := cfg.StorePassword()
	if err != nil {
		return nil, fmt.Errorf("store_password_file: %w", err)
	}
	return tasks.Open(ctx, cfg.Store, tasks.WithLogger(log.Named("tasks")), tasks.WithPassword(pw))
}

// publishedKeys is the admin JWKS: the token minter's key and, when cards
// are signed, the current revision's card-signing key (it can change on
// reload).
func publishedKeys(minted func() []byte, holder *serving.Holder, log *zap.Logger) func() []byte {
	return func() []byte {
		set := minted()
		s := holder.Load().CardSigner
		if s == nil {
			return set
		}
		withCard, err := cardsig.AddKey(set, s)
		if err != nil {
			log.Error("card signing key not published", zap.Error(err))
			return set
		}
		return withCard
	}
}

// servePlainHTTP2 lets the A2A listener speak unencrypted HTTP/2 (h2c, with prior knowledge)
// besides HTTP/1.1, and HTTP/2 over TLS: the gRPC binding is served on the same listener as
// JSON-RPC and HTTP+JSON, and gRPC clients without TLS connect with prior knowledge.
func servePlainHTTP2(srv *http.Server) {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = &p
}
