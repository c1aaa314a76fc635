// Package server is the capgate process: Run starts it in named steps
// (start.go) — configuration and memory limit, the first revision and its
// holder, tracing and decision logs, the task store, handler credentials,
// then the listeners (admin, the Envoy ext_authz gRPC server, the A2A gateway
// with its dispatcher) and the reloader — serves until the context ends, then
// drains in-flight requests.
package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/audit"
	"github.com/capgate/capgate/sidecar/cardsig"
	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/settings"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/backends"
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
func revisionOptions(opts Options, log *zap.Logger) revision.Options {
	return revision.Options{Logger: log, NoGateway: !opts.Gateway}
}

// Run serves until ctx is done, then shuts down gracefully. It starts capgate in steps, each a
// method of process with one job, in this order: configure (defaults, logging, memory limit,
// metrics), policy (the first revision and its holder), observability (tracing and decision
// logs), store (task bindings), identity (handler credentials), admin, ext_authz and gateway
// (handlers and dispatcher), then reload; serve waits for the end and shutdown drains. A step's
// error is wrapped with its name, and what the steps before it started is released.
func Run(ctx context.Context, opts Options) error {
	p, err := configure(opts)
	if err != nil {
		return err
	}
	defer p.release()
	for _, step := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"policy", p.startPolicy},
		{"observability", p.startObservability},
		{"store", p.openStore},
		{"identity", p.startIdentity},
		{"admin", p.startAdmin},
		{"extauthz", p.startExtAuthz},
		{"gateway", p.startGateway},
	} {
		if err := step.run(ctx); err != nil {
			p.closeServers()
			return fmt.Errorf("%s: %w", step.name, err)
		}
	}
	return p.serve(ctx)
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
func newStore(ctx context.Context, cfg *config.Config, log *zap.Logger, opts ...tasks.Option) (tasks.Store, error) {
	sc, err := settings.Store(cfg)
	if err != nil {
		return nil, err
	}
	return backends.Open(ctx, sc.URL, append(append(sc.Options(), tasks.WithLogger(log.Named("tasks"))), opts...)...)
}

// publishedKeys is the admin JWKS: the token minter's key and, when cards
// are signed, the current revision's card-signing key (it can change on
// reload).
func publishedKeys(minted func() []byte, holder *revision.Holder, log *zap.Logger) func() []byte {
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
