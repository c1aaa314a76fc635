package server

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime/debug"

	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/cgroup"
)

// ApplyMemoryLimit sets the Go runtime's soft memory limit from
// limits.memory: a size sets it; "auto" (the default) sets it to 90% of the
// cgroup's memory limit when one is set and no limit is in force yet (a
// GOMEMLIMIT environment variable, or a program embedding the server,
// keeps its own); 0 leaves the runtime's setting. `capgate serve` calls it
// before loading the deployment, so the limit also bounds the peak of
// loading a large registry; Run calls it again and logs the limit in
// force. It is read at start only: a reload that changes it logs that a
// restart is needed.
func ApplyMemoryLimit(cfg *config.Config) {
	applyMemoryLimit(cfg, os.DirFS("/"))
}

func applyMemoryLimit(cfg *config.Config, root fs.FS) {
	want, _, err := wantedMemoryLimit(cfg, root)
	if err != nil || want == 0 {
		return
	}
	if cfg.Limits.Memory.Auto {
		if cur := debug.SetMemoryLimit(-1); cur != math.MaxInt64 && cur != want {
			return // set by GOMEMLIMIT or by the embedding program: auto yields
		}
	}
	debug.SetMemoryLimit(want)
}

// wantedMemoryLimit is the limit cfg asks for (0: none) and its source.
func wantedMemoryLimit(cfg *config.Config, root fs.FS) (int64, string, error) {
	switch {
	case cfg == nil:
		return 0, "", nil
	case cfg.Limits.Memory.Auto:
		lim, err := cgroup.MemoryLimit(root)
		if err != nil || lim.Bytes == 0 {
			return 0, "", err
		}
		return lim.Bytes / 100 * config.AutoMemoryPercent,
			fmt.Sprintf("limits.memory auto: %d%% of %s (%s)", config.AutoMemoryPercent, lim.File, config.ByteSize(lim.Bytes)), nil
	default:
		return int64(cfg.Limits.Memory.Size), "limits.memory", nil
	}
}

// logMemoryLimit logs the soft memory limit in force and where it comes from.
func logMemoryLimit(cfg *config.Config, log *zap.Logger) {
	logMemoryLimitFrom(cfg, log, os.DirFS("/"))
}

func logMemoryLimitFrom(cfg *config.Config, log *zap.Logger, root fs.FS) {
	want, source, err := wantedMemoryLimit(cfg, root)
	if err != nil {
		log.Warn("limits.memory auto: cannot read the cgroup memory limit", zap.Error(err))
	}
	limit := debug.SetMemoryLimit(-1) // reads without changing
	switch {
	case limit == math.MaxInt64:
		log.Info("no memory limit: the heap may grow to twice its live size; set limits.memory in a container without a cgroup memory limit")
		return
	case want == limit:
	case os.Getenv("GOMEMLIMIT") != "":
		source = "GOMEMLIMIT"
	default:
		source = "runtime/debug.SetMemoryLimit" // set by the program embedding the server
	}
	log.Info("memory limit", zap.String("limit", config.ByteSize(limit).String()), zap.String("source", source))
}
