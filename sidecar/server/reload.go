package server

import (
	"context"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/sidecar/revision"
)

// runReload wires package reload into the server: it reloads opts.Source
// into holder until ctx ends (file changes, bundle polls, SIGHUP), staging
// each revision with l. The returned function waits for it to stop.
func runReload(ctx context.Context, opts Options, holder *revision.Holder, m *metrics.Metrics, l *reload.Live) (wait func()) {
	log := l.Log.Named("reload")
	// Both results exist at 0 from the start, reloading or not: an alert on rejections has a
	// series to read.
	for _, r := range []string{reload.ResultOK, reload.ResultRejected} {
		m.Reloads.WithLabelValues(r)
	}
	var rl *reload.Reloader
	var trigger func()
	if src := opts.Source; src != nil {
		build := func(ctx context.Context, d *deployment.Deployment) (*revision.State, error) {
			return revision.Build(ctx, d, revisionOptions(opts, l.Log))
		}
		ropts := []reload.Option{reload.WithLogger(log), reload.WithMetrics(m), reload.WithStage(l.Stage)}
		if opts.ReloadDebounce > 0 {
			ropts = append(ropts, reload.WithDebounce(opts.ReloadDebounce))
		}
		rl = reload.New(src, build, holder, ropts...)
		trigger = rl.Trigger
	}
	waitHUP := reload.OnSIGHUP(ctx, log, trigger)
	if rl == nil {
		return waitHUP
	}
	waitRun := rl.Start(ctx)
	return func() {
		waitHUP()
		waitRun()
	}
}
