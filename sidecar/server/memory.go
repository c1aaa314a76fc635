package server

import (
	"math"
	"os"
	"runtime/debug"

	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
)

// ApplyMemoryLimit sets the Go runtime's soft memory limit to
// limits.memory when the config sets it; otherwise the runtime's own
// setting (the GOMEMLIMIT environment variable, or none) stays.
// `capgate serve` calls it before loading the deployment, so the limit also
// bounds the peak of loading a large registry; Run calls it again and logs
// the limit in force. It is read at start only: a reload that changes it
// logs that a restart is needed.
func ApplyMemoryLimit(cfg *config.Config) {
	if cfg != nil && cfg.Limits.Memory > 0 {
		debug.SetMemoryLimit(int64(cfg.Limits.Memory))
	}
}

// logMemoryLimit logs the soft memory limit in force and where it comes from.
func logMemoryLimit(cfg *config.Config, log *zap.Logger) {
	limit := debug.SetMemoryLimit(-1) // reads without changing
	if limit == math.MaxInt64 {
		log.Info("no memory limit: the heap may grow to twice its live size; set limits.memory in a container")
		return
	}
	source := "GOMEMLIMIT"
	if cfg != nil && cfg.Limits.Memory > 0 {
		source = "limits.memory"
	} else if os.Getenv("GOMEMLIMIT") == "" {
		source = "runtime/debug.SetMemoryLimit" // set by the program embedding the server
	}
	log.Info("memory limit", zap.String("limit", config.ByteSize(limit).String()), zap.String("source", source))
}
