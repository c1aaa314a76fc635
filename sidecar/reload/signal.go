package reload

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

// OnSIGHUP calls trigger on every SIGHUP until ctx ends. With a nil trigger
// (the embedded default: nothing to reload) SIGHUP is logged and ignored.
func OnSIGHUP(ctx context.Context, log *zap.Logger, trigger func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
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
}
