package reload

import (
	"context"
	"maps"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/dispatch"
	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/revision"
)

// Live is what a reload of a running server must respect or update beside
// the revision: the config the listeners were started with, and the
// handler invokers.
type Live struct {
	// Started is the config the server was started with.
	Started *config.Config
	// Invokers are the dispatcher's handler invokers; nil without the
	// gateway.
	Invokers *Invokers
	// NewInvoker builds the handler invoker for a config.
	NewInvoker func(ctx context.Context, cfg *config.Config) (*handler.Invoker, error)
	Log        *zap.Logger
}

// Stage is the Stage of a running server. Listener addresses, the store,
// capgate's identity and request limits were wired at start: a change is
// logged as needing a restart and the running value is kept. Changed
// handlers get a new invoker, swapped in with the revision.
func (l *Live) Stage(ctx context.Context, _, next *revision.State) (func(), error) {
	nc := next.Config()
	if fields := RestartOnly(l.Started, nc); len(fields) > 0 {
		l.Log.Warn("configuration change needs a restart; the running value is kept", zap.Strings("fields", fields))
	}
	if l.Invokers == nil {
		return nil, nil
	}
	cur := l.Invokers.p.Load()
	if maps.Equal(cur.handlers, nc.Handlers) && maps.Equal(cur.bindings, nc.HandlerBindings) &&
		maps.Equal(cur.expose, nc.HandlerExposeErrors) && cur.timeout == nc.Limits.HandlerTimeout {
		return nil, nil
	}
	inv, err := l.NewInvoker(ctx, nc)
	if err != nil {
		return nil, err
	}
	return func() { l.Invokers.swap(inv, nc) }, nil
}

// RestartOnly lists the fields of next that differ from the config the
// server was started with and cannot be applied live.
func RestartOnly(started, next *config.Config) []string {
	var out []string
	for _, f := range []struct {
		name     string
		was, now any
	}{
		{"listen.a2a", started.Listen.A2A, next.Listen.A2A},
		{"listen.extauthz", started.Listen.ExtAuthz, next.Listen.ExtAuthz},
		{"listen.admin", started.Listen.Admin, next.Listen.Admin},
		{"store", started.Store, next.Store},
		{"store_password_file", started.StorePasswordFile, next.StorePasswordFile},
		{"store_password_env", started.StorePasswordEnv, next.StorePasswordEnv},
		{"store_sentinel_password_file", started.StoreSentinelPasswordFile, next.StoreSentinelPasswordFile},
		{"store_sentinel_password_env", started.StoreSentinelPasswordEnv, next.StoreSentinelPasswordEnv},
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

// Invokers is the dispatcher's handler invoker across reloads. A request
// that loaded the previous revision may still name a handler the new config
// dropped: it is served by the previous invoker, so a reload never fails a
// request in flight.
type Invokers struct {
	p atomic.Pointer[invokerSet]
}

type invokerSet struct {
	cur, prev          *handler.Invoker
	handlers, prevSeen map[string]string
	bindings           map[string]string // config HandlerBindings
	expose             map[string]bool   // config HandlerExposeErrors
	timeout            time.Duration
}

var _ dispatch.Invoker = (*Invokers)(nil)

// NewInvokers starts the invokers with inv, built for cfg.
func NewInvokers(inv *handler.Invoker, cfg *config.Config) *Invokers {
	x := &Invokers{}
	x.p.Store(&invokerSet{cur: inv, handlers: maps.Clone(cfg.Handlers), bindings: maps.Clone(cfg.HandlerBindings),
		expose: maps.Clone(cfg.HandlerExposeErrors), timeout: cfg.Limits.HandlerTimeout})
	return x
}

func (x *Invokers) swap(inv *handler.Invoker, cfg *config.Config) {
	old := x.p.Load()
	x.p.Store(&invokerSet{cur: inv, prev: old.cur, handlers: maps.Clone(cfg.Handlers), bindings: maps.Clone(cfg.HandlerBindings),
		expose: maps.Clone(cfg.HandlerExposeErrors), prevSeen: old.handlers, timeout: cfg.Limits.HandlerTimeout})
	if old.prev != nil {
		_ = old.prev.Close() // idle connections only; calls in flight finish
	}
}

func (x *Invokers) pick(name string) *handler.Invoker {
	s := x.p.Load()
	if _, ok := s.handlers[name]; !ok && s.prev != nil {
		if _, ok := s.prevSeen[name]; ok {
			return s.prev
		}
	}
	return s.cur
}

// Call calls the handler through the invoker that knows it.
func (x *Invokers) Call(ctx context.Context, req handler.Request) (jsontext.Value, *protocol.Error) {
	return x.pick(req.Handler).Call(ctx, req)
}

// Stream streams from the handler through the invoker that knows it.
func (x *Invokers) Stream(ctx context.Context, req handler.Request, yield func(jsontext.Value) error) *protocol.Error {
	return x.pick(req.Handler).Stream(ctx, req, yield)
}
