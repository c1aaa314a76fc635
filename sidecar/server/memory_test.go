package server

import (
	"io/fs"
	"math"
	"runtime/debug"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/policy/config"
)

func TestApplyMemoryLimit(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })

	// A container with a 512 MiB cgroup v2 limit, one without a limit, and
	// one whose limit file cannot be read as a number.
	limited := fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"sys/fs/cgroup/memory.max": {Data: []byte("536870912\n")},
	}
	unlimited := fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"sys/fs/cgroup/memory.max": {Data: []byte("max\n")},
	}
	broken := fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"sys/fs/cgroup/memory.max": {Data: []byte("lots\n")},
	}
	auto := config.MemoryLimit{Auto: true}
	size := config.MemoryLimit{Size: 48 << 20}
	const autoSource = "limits.memory auto: 90% of /sys/fs/cgroup/memory.max (512 MiB)"
	const unset = math.MaxInt64

	tests := []struct {
		name      string
		memory    config.MemoryLimit
		root      fs.FS
		env       string // GOMEMLIMIT, already read by the runtime at start
		wantLimit int64
		wantLog   map[string]any
	}{
		{name: "0 leaves no limit", root: limited, wantLimit: unset,
			wantLog: map[string]any{"msg": "no memory limit: the heap may grow to twice its live size; set limits.memory in a container without a cgroup memory limit"}},
		{name: "0 keeps GOMEMLIMIT", root: limited, env: "40MiB", wantLimit: 40 << 20,
			wantLog: map[string]any{"msg": "memory limit", "limit": "40 MiB", "source": "GOMEMLIMIT"}},
		{name: "a size", memory: size, root: limited, wantLimit: 48 << 20,
			wantLog: map[string]any{"msg": "memory limit", "limit": "48 MiB", "source": "limits.memory"}},
		{name: "a size wins over GOMEMLIMIT", memory: size, root: limited, env: "40MiB", wantLimit: 48 << 20,
			wantLog: map[string]any{"msg": "memory limit", "limit": "48 MiB", "source": "limits.memory"}},
		{name: "auto: 90% of the cgroup limit", memory: auto, root: limited, wantLimit: 536870912 / 100 * 90,
			wantLog: map[string]any{"msg": "memory limit", "limit": "461 MiB", "source": autoSource}},
		{name: "auto yields to GOMEMLIMIT", memory: auto, root: limited, env: "40MiB", wantLimit: 40 << 20,
			wantLog: map[string]any{"msg": "memory limit", "limit": "40 MiB", "source": "GOMEMLIMIT"}},
		{name: "auto without a cgroup limit", memory: auto, root: unlimited, wantLimit: unset,
			wantLog: map[string]any{"msg": "no memory limit: the heap may grow to twice its live size; set limits.memory in a container without a cgroup memory limit"}},
		{name: "auto outside any cgroup", memory: auto, root: fstest.MapFS{}, wantLimit: unset,
			wantLog: map[string]any{"msg": "no memory limit: the heap may grow to twice its live size; set limits.memory in a container without a cgroup memory limit"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.env)
			start := int64(unset)
			if tc.env != "" {
				start = 40 << 20 // what the runtime read from it at start
			}
			debug.SetMemoryLimit(start)
			cfg := &config.Config{Limits: config.Limits{Memory: tc.memory}}

			applyMemoryLimit(cfg, tc.root)
			require.Equal(t, tc.wantLimit, debug.SetMemoryLimit(-1))
			applyMemoryLimit(cfg, tc.root) // Run applies it again after serve did
			require.Equal(t, tc.wantLimit, debug.SetMemoryLimit(-1))

			core, logs := observer.New(zap.InfoLevel)
			logMemoryLimitFrom(cfg, zap.New(core), tc.root)
			require.Equal(t, 1, logs.Len())
			e := logs.All()[0]
			fields := e.ContextMap()
			fields["msg"] = e.Message
			require.Equal(t, tc.wantLog, fields)
		})
	}

	t.Run("auto with an unreadable cgroup limit warns and sets none", func(t *testing.T) {
		t.Setenv("GOMEMLIMIT", "")
		debug.SetMemoryLimit(unset)
		cfg := &config.Config{Limits: config.Limits{Memory: auto}}
		applyMemoryLimit(cfg, broken)
		require.Equal(t, int64(unset), debug.SetMemoryLimit(-1))
		core, logs := observer.New(zap.InfoLevel)
		logMemoryLimitFrom(cfg, zap.New(core), broken)
		require.Equal(t, 2, logs.Len())
		require.Equal(t, zap.WarnLevel, logs.All()[0].Level)
		require.Equal(t, `/sys/fs/cgroup/memory.max: "lots" is not a number of bytes`, logs.All()[0].ContextMap()["error"])
	})
}
