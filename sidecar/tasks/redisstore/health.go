package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/tasks"
)

// DefaultProbeInterval is how often Watch pings a Redis store that no
// operation has reached for that long.
const DefaultProbeInterval = 5 * time.Second

// health follows whether Redis answers: every command's outcome (a go-redis
// hook) and Watch's probes. It tells the observer of each change and logs
// it once.
type health struct {
	obs  tasks.Observer
	log  *zap.Logger
	base time.Time    // monotonic origin of last
	last atomic.Int64 // when a command last had an outcome, ns since base
	// up is 1 while Redis answers, 0 while it does not, -1 before the first
	// outcome.
	up atomic.Int32
	// mu orders changes of up, with their logs and the observer's calls;
	// changedBy is when the command whose outcome made the last change began
	// (since base). An outcome of a command begun before it is older news
	// and changes nothing: under load, a PING answered just before Redis
	// went away may report after a failure seen since, and must not make
	// the store flap back to reachable.
	mu        sync.Mutex
	changedBy time.Duration
}

func newHealth(o tasks.Settings) *health {
	h := &health{obs: o.Observer, log: o.Log, base: time.Now()}
	h.up.Store(-1)
	return h
}

// failed counts op as failed (a failure the caller caused — its own
// cancellation — is not the store's).
func (h *health) failed(op string, err error) {
	if h.obs != nil && !errors.Is(err, context.Canceled) {
		h.obs.Failed(op)
	}
}

// observe records the outcome of one command begun at start (since base).
func (h *health) observe(start time.Duration, err error) {
	known, ok := answered(err)
	if !known {
		return
	}
	h.last.Store(int64(time.Since(h.base)))
	v := int32(0)
	if ok {
		v = 1
	}
	if h.up.Load() == v {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.up.Load()
	if old == v || (old != -1 && start < h.changedBy) {
		return
	}
	h.up.Store(v)
	h.changedBy = start
	// Changes are logged; the first outcome is not (Dial logs a store
	// that does not answer at start).
	switch {
	case ok && old == 0:
		h.log.Info("task store reachable again")
	case !ok && old == 1:
		h.log.Warn("task store unreachable; task operations fail closed until it answers", zap.Error(err))
	}
	if h.obs != nil {
		h.obs.Reachable(ok)
	}
}

// quietFor reports whether no command had an outcome for d.
func (h *health) quietFor(d time.Duration) bool {
	return time.Since(h.base)-time.Duration(h.last.Load()) >= d
}

// notServing are the replies of a Redis that answers but cannot serve now.
var notServing = []string{"LOADING", "MASTERDOWN", "CLUSTERDOWN", "READONLY", "TRYAGAIN"}

// answered classes a command's outcome: ok when Redis answered it (an error
// reply included, but for one that says Redis cannot serve now); known is
// false when the outcome says nothing of Redis (the caller gave up, the
// client was closed).
func answered(err error) (known, ok bool) {
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		return true, true
	case errors.Is(err, context.Canceled) || errors.Is(err, redis.ErrClosed):
		return false, false
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		for _, p := range notServing {
			if redis.HasErrorPrefix(err, p) {
				return true, false
			}
		}
		return true, true
	}
	return true, false
}

// healthHook is the go-redis hook that shows health every command's
// outcome, on a single client, a failover client or a cluster client.
type healthHook struct{ h *health }

var _ redis.Hook = healthHook{}

func (k healthHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (k healthHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Since(k.h.base)
		err := next(ctx, cmd)
		k.h.observe(start, err)
		return err
	}
}

func (k healthHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Since(k.h.base)
		err := next(ctx, cmds)
		k.h.observe(start, err)
		return err
	}
}

// watchHealth hooks h onto rdb.
func watchHealth(rdb redis.UniversalClient, h *health) { rdb.AddHook(healthHook{h}) }

// unavailable is the package's unavailable, counted under op by the
// store's observer (what is op with spaces for underscores).
func (r *Store) unavailable(what string, err error) error {
	r.health.failed(strings.ReplaceAll(what, " ", "_"), err)
	return unavailable(what, err)
}

// Watch probes Redis until ctx ends, so that reachability is known without
// traffic: every probe interval (WithProbeInterval) in which no command had
// an outcome, one PING bounded by the operation timeout. A failed PING
// counts as a failed OpPing. Operations' outcomes keep the probe quiet, so
// a busy store is never pinged. Without an observer it returns at once.
func (r *Store) Watch(ctx context.Context) {
	if r.opts.Observer == nil {
		return
	}
	every := r.opts.ProbeInterval
	if every <= 0 {
		every = DefaultProbeInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !r.health.quietFor(every) {
			continue
		}
		pctx, cancel := r.op(ctx)
		if err := r.rdb.Ping(pctx).Err(); err != nil && ctx.Err() == nil {
			_ = r.unavailable(tasks.OpPing, err)
		}
		cancel()
	}
}

// Mode names of the start-up line.
const (
	modeNameSingle   = "single"
	modeNameSentinel = "sentinel"
	modeNameCluster  = "cluster"
)

func (m redisMode) String() string {
	switch m {
	case modeSentinel:
		return modeNameSentinel
	case modeCluster:
		return modeNameCluster
	}
	return modeNameSingle
}

// logStart logs the start-up line naming the store: its URL without
// credentials or query, its mode, key prefix and the replicas each
// ownership write waits for.
func (r *Store) logStart(u *storeURL) {
	fields := []zap.Field{zap.String("store", u.display), zap.String("mode", u.mode.String()),
		zap.String("key_prefix", r.opts.KeyPrefix), zap.Int("min_replicas", r.opts.MinReplicas), zap.Duration("binding_ttl", r.opts.BindingTTL)}
	if r.opts.MinReplicas > 0 {
		fields = append(fields, zap.Duration("replica_timeout", r.opts.ReplicaTimeout))
	}
	r.opts.Log.Info("task store", fields...)
}

// checkReplicas warns, at start, when a master has too few connected
// replicas for min_replicas (INFO replication's connected_slaves): fewer, and
// every ownership write fails now; no more (Sentinel, Cluster), and a
// failover leaves the new master with fewer, so writes stop until a replica
// re-attaches. Best effort: it is skipped when Redis did not answer at start,
// and an INFO that fails is logged at debug level.
func (r *Store) checkReplicas(ctx context.Context, mode redisMode) {
	if r.opts.MinReplicas == 0 || r.health.up.Load() != 1 {
		return
	}
	check := func(ctx context.Context, c *redis.Client) error {
		var where []zap.Field
		if mode == modeCluster {
			where = append(where, zap.String("master", c.Options().Addr))
		}
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		n, ok := connectedReplicas(info)
		if !ok {
			return nil
		}
		switch {
		case n < r.opts.MinReplicas:
			r.opts.Log.Warn("task store master has fewer connected replicas than min_replicas: every ownership write fails closed until enough replicas attach",
				append(where, zap.Int("connected_replicas", n), zap.Int("min_replicas", r.opts.MinReplicas))...)
		case n == r.opts.MinReplicas && mode != modeSingle:
			r.opts.Log.Warn("task store master has no more connected replicas than min_replicas: after a failover the new master has fewer, and ownership writes fail closed until a replica re-attaches to it; run more replicas than min_replicas",
				append(where, zap.Int("connected_replicas", n), zap.Int("min_replicas", r.opts.MinReplicas))...)
		}
		return nil
	}
	var err error
	switch c := r.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	}
	if err != nil {
		r.opts.Log.Debug("task store replicas not checked", zap.Error(err))
	}
}

// connectedReplicas reads connected_slaves from INFO replication.
func connectedReplicas(info string) (int, bool) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
	}
	return 0, false
}
