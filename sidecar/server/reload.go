package server

import (
	"context"
	"maps"
	"os"
	"os/signal"
	"reflect"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/dispatch"
	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tracing"
)

// live is what a reload must respect or update beside the revision: the
// config the listeners were started with, and the handler invoker.
type live struct {
	started  *config.Config
	invokers *invokers // nil without the gateway
	minter   *identity.Minter
	log      *zap.Logger
	tracing  *tracing.Provider
}

// stage is the reload.Stage of a running server. Listener addresses, the
// store, capgate's identity and request limits were wired at start: a
// change is logged as needing a restart and the running value is kept.
// Changed handlers get a new invoker, swapped in with the revision.
func (l *live) stage(ctx context.Context, _, next *revision.Revision) (func(), error) {
	nc := next.Config()
	if fields := restartOnly(l.started, nc); len(fields) > 0 {
		l.log.Warn("configuration change needs a restart; the running value is kept", zap.Strings("fields", fields))
	}
	if l.invokers == nil {
		return nil, nil
	}
	cur := l.invokers.p.Load()
	if maps.Equal(cur.handlers, nc.Handlers) && cur.timeout == nc.Limits.HandlerTimeout {
		return nil, nil
	}
	inv, err := newInvoker(ctx, nc, l.minter, l.log, l.tracing)
	if err != nil {
		return nil, err
	}
	return func() { l.invokers.swap(inv, nc) }, nil
}

// restartOnly lists the fields of next that differ from the config the
// server was started with and cannot be applied live.
func restartOnly(started, next *config.Config) []string {
	var out []string
	for _, f := range []struct {
		name     string
		was, now any
	}{
		{"listen.a2a", started.Listen.A2A, next.Listen.A2A},
		{"listen.extauthz", started.Listen.ExtAuthz, next.Listen.ExtAuthz},
		{"listen.admin", started.Listen.Admin, next.Listen.Admin},
		{"store", started.Store, next.Store},
		{"identity", started.Identity, next.Identity},
		{"limits.max_body_bytes", started.Limits.MaxBodyBytes, next.Limits.MaxBodyBytes},
		{"limits.max_depth", started.Limits.MaxDepth, next.Limits.MaxDepth},
		{"limits.memory", started.Limits.Memory, next.Limits.Memory},
		{"services", started.Services, next.Services},
		{"decision_logs", started.DecisionLogs, next.DecisionLogs},
		{"tracing", started.Tracing, next.Tracing},
	} {
		if !reflect.DeepEqual(f.was, f.now) {
			out = append(out, f.name)
		}
	}
	return out
}

// invokers is the dispatcher's handler invoker across reloads. A request
// that loaded the previous revision may still name a handler the new config
// dropped: it is served by the previous invoker, so a reload never fails a
// request in flight.
type invokers struct {
	p atomic.Pointer[invokerSet]
}

type invokerSet struct {
	cur, prev          *handler.Invoker
	handlers, prevSeen map[string]string
	timeout            time.Duration
}

var _ dispatch.Invoker = (*invokers)(nil)

func newInvokers(inv *handler.Invoker, cfg *config.Config) *invokers {
	x := &invokers{}
	x.p.Store(&invokerSet{cur: inv, handlers: maps.Clone(cfg.Handlers), timeout: cfg.Limits.HandlerTimeout})
	return x
}

func (x *invokers) swap(inv *handler.Invoker, cfg *config.Config) {
	old := x.p.Load()
	x.p.Store(&invokerSet{cur: inv, prev: old.cur, handlers: maps.Clone(cfg.Handlers), prevSeen: old.handlers, timeout: cfg.Limits.HandlerTimeout})
	if old.prev != nil {
		_ = old.prev.Close() // idle connections only; calls in flight finish
	}
}

func (x *invokers) pick(name string) *handler.Invoker {
	s := x.p.Load()
	if _, ok := s.handlers[name]; !ok && s.prev != nil {
		if _, ok := s.prevSeen[name]; ok {
			return s.prev
		}
	}
	return s.cur
}

func (x *invokers) Call(ctx context.Context, req handler.Request) (jsontext.Value, *protocol.Error) {
	return x.pick(req.Handler).Call(ctx, req)
}

func (x *invokers) Stream(ctx context.Context, req handler.Request, yield func(jsontext.Value) error) *protocol.Error {
	return x.pick(req.Handler).Stream(ctx, req, yield)
}

// runReload reloads src into holder until ctx ends: on file changes, bundle
// polls and SIGHUP. Without a source (the embedded default) SIGHUP is
// logged and ignored. The returned function waits for the reloader to stop.
func runReload(ctx context.Context, opts Options, holder *revision.Holder, m *metrics.Metrics, l *live) (wait func()) {
	log := l.log.Named("reload")
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var rl *reload.Reloader
	if src := opts.Source; src != nil {
		build := func(ctx context.Context, d *deployment.Deployment) (*revision.Revision, error) {
			return revision.Build(ctx, d, revisionOptions(opts, l.log))
		}
		ropts := []reload.Option{reload.WithLogger(log), reload.WithMetrics(m), reload.WithStage(l.stage)}
		if opts.ReloadDebounce > 0 {
			ropts = append(ropts, reload.WithDebounce(opts.ReloadDebounce))
		}
		rl = reload.New(src, build, holder, ropts...)
	}
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if rl == nil {
					log.Warn("SIGHUP ignored: the embedded default has nothing to reload")
					continue
				}
				log.Info("SIGHUP: reloading")
				rl.Trigger()
			}
		}
	}()
	n := 1
	if rl != nil {
		n++
		go func() {
			defer func() { done <- struct{}{} }()
			rl.Run(ctx)
		}()
	}
	return func() {
		for range n {
			<-done
		}
	}
}
