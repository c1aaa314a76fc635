// Package reload rebuilds the serving revision when the deployment changes —
// on a file change, on SIGHUP, on a new bundle — off the request path, and
// swaps it into the revision holder only when it loaded, validated and
// compiled; a bad revision is rejected and the last good one keeps serving.
package reload

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/revision"
)

// Defaults.
const (
	// DefaultDebounce is how long a burst of changes must be quiet before
	// the reload runs (an editor's save is several file events).
	DefaultDebounce = 250 * time.Millisecond
	// maxProblems bounds the problems listed on one rejection log line.
	maxProblems = 50
)

// Results, the values of capgate_reloads_total's result label.
const (
	ResultOK       = "ok"
	ResultRejected = "rejected"
)

// Source loads the deployment to serve.
type Source interface {
	Load(ctx context.Context) (*deployment.Deployment, error)
}

// Watched is a Source whose inputs are files: the reloader watches them
// (see Watch) and reloads when they change.
type Watched interface {
	Source
	// Watches lists the directories to watch, from the last config read.
	Watches() []Watch
}

// Poller is a Source that learns of changes by polling (a bundle URL).
// Poll runs until ctx ends, calling changed when there is something new to
// load and failed when what it fetched was refused.
type Poller interface {
	Source
	Poll(ctx context.Context, changed func(), failed func(error))
}

// Builder turns a deployment into a revision (revision.Build with the
// server's options).
type Builder func(ctx context.Context, d *deployment.Deployment) (*revision.State, error)

// Stage checks a built revision against the running server before it is
// swapped in — what cannot change live is reported, what must be prepared
// beside the revision (a handler invoker) is prepared. An error rejects the
// revision; commit, when not nil, runs just before the swap.
type Stage func(ctx context.Context, cur, next *revision.State) (commit func(), err error)

// Option tunes a Reloader.
type Option func(*Reloader)

// WithLogger sets the logger (default: none).
func WithLogger(l *zap.Logger) Option { return func(r *Reloader) { r.log = l } }

// WithMetrics counts reloads and moves the revision gauge.
func WithMetrics(m *metrics.Metrics) Option { return func(r *Reloader) { r.metrics = m } }

// WithDebounce sets how long triggers must be quiet before a reload runs.
func WithDebounce(d time.Duration) Option { return func(r *Reloader) { r.debounce = d } }

// WithStage sets the check run on every built revision before the swap.
func WithStage(s Stage) Option { return func(r *Reloader) { r.stage = s } }

// Reloader reloads a Source into a revision holder. Reloads are serialized;
// requests keep reading the holder and never wait for a reload.
type Reloader struct {
	src      Source
	build    Builder
	holder   *revision.Holder
	log      *zap.Logger
	metrics  *metrics.Metrics
	debounce time.Duration
	stage    Stage

	mu      sync.Mutex // serializes Reload
	trigger chan struct{}
}

// New returns a reloader of src into holder; build prepares each revision.
func New(src Source, build Builder, holder *revision.Holder, opts ...Option) *Reloader {
	r := &Reloader{src: src, build: build, holder: holder, debounce: DefaultDebounce, trigger: make(chan struct{}, 1)}
	for _, o := range opts {
		o(r)
	}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	return r
}

// Trigger asks for a reload without waiting: triggers that arrive within
// the debounce window of each other become one reload, run by Run.
func (r *Reloader) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default: // one is pending already
	}
}

// Reload loads, validates and compiles the source now and swaps the new
// revision in. On any problem the revision is rejected: one log line lists
// the problems, capgate_reloads_total{result="rejected"} counts it and the
// current revision keeps serving; the error is returned.
func (r *Reloader) Reload(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	d, err := r.src.Load(ctx)
	if err != nil {
		return r.reject(ctx, err, "load")
	}
	next, err := r.build(ctx, d)
	if err != nil {
		return r.reject(ctx, err, "build")
	}
	cur := r.holder.Load()
	var commit func()
	if r.stage != nil {
		if commit, err = r.stage(ctx, cur, next); err != nil {
			return r.reject(ctx, err, "stage")
		}
	}
	if err := ctx.Err(); err != nil {
		return err // shutting down: nothing to swap
	}
	if commit != nil {
		commit()
	}
	r.holder.Store(next)
	if r.metrics != nil {
		r.metrics.Reloads.WithLabelValues(ResultOK).Inc()
		if cur != nil && cur.ID() != next.ID() {
			r.metrics.Revision.DeleteLabelValues(cur.ID())
		}
		r.metrics.Revision.WithLabelValues(next.ID()).Set(1)
	}
	prev := ""
	if cur != nil {
		prev = cur.ID()
	}
	if prev == next.ID() {
		// Same policy and data (a touched file, a SIGHUP, settings outside
		// the policy): nothing worth an info line, nor the warnings again.
		r.log.Debug("reloaded; policy revision unchanged", zap.String("policy_revision", next.ID()), zap.Duration("took", time.Since(start)))
		return nil
	}
	for _, w := range d.Warnings {
		r.log.Warn("configuration warning", zap.String("warning", w))
	}
	r.log.Info("reloaded",
		zap.String("policy_revision", next.ID()),
		zap.String("previous_revision", prev),
		zap.Int("capabilities", next.Registry().Len()),
		zap.Duration("took", time.Since(start)))
	// The previous revision and the build's garbage are unreachable once
	// in-flight requests finish; return what is free now.
	debug.FreeOSMemory()
	return nil
}

// Reject records a refused update that never reached Reload (a bundle the
// poller could not read or verify): logged and counted like a rejected
// reload; the current revision keeps serving.
func (r *Reloader) Reject(err error) { _ = r.reject(context.Background(), err, "fetch") }

func (r *Reloader) reject(ctx context.Context, err error, stage string) error {
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: the failure is the cancellation's
	}
	if r.metrics != nil {
		r.metrics.Reloads.WithLabelValues(ResultRejected).Inc()
	}
	fields := []zap.Field{zap.String("stage", stage), zap.Strings("problems", Problems(err))}
	if cur := r.holder.Load(); cur != nil {
		fields = append(fields, zap.String("serving_revision", cur.ID()))
	}
	r.log.Error("reload rejected; the last good revision keeps serving", fields...)
	return err
}

// Problems lists an error's problems, one string each: every problem of a
// *diag.Set (file:line: field: message — never file content), or the lines
// of any other error. At most 50 are listed.
func Problems(err error) []string {
	var out []string
	var set *diag.Set
	if errors.As(err, &set) {
		for _, p := range set.Sorted() {
			out = append(out, p.String())
		}
	} else if err != nil {
		for l := range strings.SplitSeq(err.Error(), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	if len(out) > maxProblems {
		out = append(out[:maxProblems], "… and more")
	}
	return out
}

// Run serves reload requests until ctx ends: triggers (Trigger, file
// changes of a Watched source, a Poller's news) are debounced, then Reload
// runs. A watcher that cannot start is logged; triggers still work.
func (r *Reloader) Run(ctx context.Context) { r.Start(ctx)() }

// Start is Run in the background: the source's file watcher is in place
// when Start returns, so a file changed after it (once capgate reports
// ready, say) is never missed. The returned function waits for the loop
// to end, which it does when ctx ends.
func (r *Reloader) Start(ctx context.Context) (wait func()) {
	var w *watcher
	ws, watched := r.src.(Watched)
	if watched {
		var err error
		if w, err = newWatcher(r.log.Named("watch")); err != nil {
			r.log.Warn("cannot watch files; reload on SIGHUP only", zap.Error(err))
		} else {
			w.sync(ws.Watches())
			go w.run(ctx, r.Trigger)
		}
	}
	if p, ok := r.src.(Poller); ok {
		go p.Poll(ctx, r.Trigger, r.Reject)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if w != nil {
			defer w.close()
		}
		r.loop(ctx, w, ws)
	}()
	return func() { <-done }
}

// loop debounces triggers and reloads until ctx ends.
func (r *Reloader) loop(ctx context.Context, w *watcher, ws Watched) {
	// Go 1.23 timers: Stop and Reset never leave a stale tick behind.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.trigger:
			timer.Reset(r.debounce) // restart the quiet period
		case <-timer.C:
			if w != nil {
				// Before loading, so that a change made during the load (in a
				// folder created since the last reload) triggers again.
				w.sync(ws.Watches())
			}
			_ = r.Reload(ctx)
			if w != nil {
				w.sync(ws.Watches()) // the config may name other folders now
			}
		}
	}
}
