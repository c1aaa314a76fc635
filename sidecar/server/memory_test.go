package server

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/policy/config"
)

func TestApplyMemoryLimit(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })
	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(math.MaxInt64)

	logged := func(cfg *config.Config) map[string]any {
		core, logs := observer.New(zap.InfoLevel)
		logMemoryLimit(cfg, zap.New(core))
		require.Equal(t, 1, logs.Len())
		e := logs.All()[0]
		fields := e.ContextMap()
		fields["msg"] = e.Message
		return fields
	}

	ApplyMemoryLimit(&config.Config{}) // unset: the runtime's setting stays
	require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))
	require.Contains(t, logged(&config.Config{})["msg"], "no memory limit")

	cfg := &config.Config{Limits: config.Limits{Memory: 48 << 20}}
	ApplyMemoryLimit(cfg)
	require.Equal(t, int64(48<<20), debug.SetMemoryLimit(-1))
	require.Equal(t, map[string]any{"msg": "memory limit", "limit": "48 MiB", "source": "limits.memory"}, logged(cfg))

	// Without limits.memory, a limit from the environment is kept and named.
	t.Setenv("GOMEMLIMIT", "40MiB")
	debug.SetMemoryLimit(40 << 20) // what the runtime read from it at start
	ApplyMemoryLimit(&config.Config{})
	require.Equal(t, int64(40<<20), debug.SetMemoryLimit(-1))
	require.Equal(t, map[string]any{"msg": "memory limit", "limit": "40 MiB", "source": "GOMEMLIMIT"}, logged(&config.Config{}))
}
