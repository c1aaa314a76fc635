package backends_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/backends"
)

// TestOpen: the table opens the memory store, and refuses a URL no
// backend serves or its backend refuses, without echoing a password.
func TestOpen(t *testing.T) {
	s, err := backends.Open(t.Context(), tasks.MemoryURL)
	require.NoError(t, err)
	require.IsType(t, &tasks.Memory{}, s)

	for _, bad := range []string{"", "postgres://x", "redis://:secret@h:6379/0?binding_ttl=soon", "redis://:secret@h:6379/0?nope=1", "redis://:secret@h:6379/x", "postgres://u:secret@db/x", "memory://x", "redis"} {
		_, err := backends.Open(t.Context(), bad)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "secret", "the password is not echoed")
		require.ErrorContains(t, backends.Table().Check(bad), strings.TrimPrefix(err.Error(), "store: "), "Check refuses what Open refuses")
	}
}

// TestTable: every scheme has one backend; the CLI's "shared" and the
// credentials each takes come from its row.
func TestTable(t *testing.T) {
	table := backends.Table()
	seen := map[string]string{}
	for _, b := range table {
		require.NotEmpty(t, b.Name)
		require.NotNil(t, b.Open, b.Name)
		require.NotEmpty(t, b.Schemes, b.Name)
		for _, s := range b.Schemes {
			require.NotContains(t, seen, s, "scheme %s is served by %s and %s", s, seen[s], b.Name)
			seen[s] = b.Name
		}
	}
	require.False(t, table.Shared(tasks.MemoryURL), "the memory store lives in one process")
	for _, u := range []string{"redis://r:6379/0", "rediss-sentinel://s:26379/m", "redis-cluster://c:7000"} {
		require.True(t, table.Shared(u), u)
		require.NoError(t, table.Check(u), u)
	}
	require.False(t, table.Shared("postgres://db"))
	err := tasks.Config{URL: "redis://r:6379/0", SentinelPassword: "x"}.Validate(table)
	var ce *tasks.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, tasks.FieldSentinelPassword, ce.Field)
	require.NoError(t, tasks.Config{URL: "redis-sentinel://s:26379/m", Password: "p", SentinelPassword: "q"}.Validate(table))
}

// TestApplyOptions: a backend outside package tasks reads the options it is
// opened with, defaults filled in.
func TestApplyOptions(t *testing.T) {
	s := tasks.ApplyOptions()
	require.Equal(t, tasks.DefaultKeyPrefix, s.KeyPrefix)
	require.Equal(t, tasks.DefaultBindingTTL, s.BindingTTL)
	require.NotNil(t, s.Now)
	require.NotNil(t, s.Log)
	at := time.Unix(1000, 0)
	s = tasks.ApplyOptions(tasks.WithClock(func() time.Time { return at }), tasks.WithPassword("pw"), tasks.WithKeyPrefix("p:"))
	require.Equal(t, at, s.Now())
	require.Equal(t, "pw", s.Password)
	require.Equal(t, "p:", s.KeyPrefix)
}
