package reload

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

// OnSIGHUP registers for SIGHUP before it returns (so a SIGHUP sent after
// that is never the default, fatal one) and then, in a goroutine, calls
// trigger on every SIGHUP until ctx ends. With a nil trigger (the embedded
// default: nothing to reload) SIGHUP is logged and ignored. The returned
// function waits for the goroutine to stop.
func OnSIGHUP(ctx context.Context, log *zap.Logger, trigger func()) (wait func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if trigger == nil {
					log.Warn("SIGHUP ignored: the embedded default has nothing to reload")
					continue
				}
				log.Info("SIGHUP: reloading")
				trigger()
			}
		}
	}()
	return func() { <-done }
}
