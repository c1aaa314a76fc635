package lifecycle_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/admin"
	"github.com/capgate/capgate/sidecar/lifecycle"
	"github.com/capgate/capgate/sidecar/tasks"
)

type fixed map[string]tasks.Usage

func (f fixed) Usage(_ context.Context, ids []string, _ time.Time) (map[string]tasks.Usage, error) {
	out := map[string]tasks.Usage{}
	for _, id := range ids {
		if u, ok := f[id]; ok {
			out[id] = u
		}
	}
	return out, nil
}

type broken struct{}

func (broken) Usage(context.Context, []string, time.Time) (map[string]tasks.Usage, error) {
	return nil, errors.New("connection refused")
}

func TestBuild(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	reg := manifest.NewRegistry([]manifest.Capability{
		{ID: "ga", State: manifest.StateGA},
		{ID: "preview", State: manifest.StatePreview},
		{ID: "dep-busy", State: manifest.StateDeprecated, ReplacedBy: "ga"},
		{ID: "dep-edge", State: manifest.StateDeprecated, ReplacedBy: "ga"},
		{ID: "dep-idle", State: manifest.StateDeprecated, ReplacedBy: "ga"},
		{ID: "dep-never", State: manifest.StateDeprecated, ReplacedBy: "ga"},
		{ID: "dep-unknown", State: manifest.StateDeprecated, ReplacedBy: "ga"},
		{ID: "dep-young", State: manifest.StateDeprecated, ReplacedBy: "ga"},
		{ID: "dep-unobserved", State: manifest.StateDeprecated, ReplacedBy: "ga"},
		{ID: "gone", State: manifest.StateRemoved, ReplacedBy: "ga"},
	})
	since := now.Add(-60 * 24 * time.Hour)
	src := fixed{
		"ga":        {Calls30d: 0, ObservedSince: since},
		"preview":   {ObservedSince: since},
		"dep-busy":  {Calls30d: 3, Total: 9, LastUsed: now.Add(-time.Hour), ObservedSince: since},
		"dep-edge":  {Calls30d: 0, Total: 1, LastUsed: now.Add(-29 * 24 * time.Hour), ObservedSince: since},
		"dep-idle":  {Calls30d: 0, Total: 5, LastUsed: now.Add(-45 * 24 * time.Hour), ObservedSince: since},
		"dep-never": {ObservedSince: since},
		// Counted for two minutes only (a memory store just started):
		// no calls proves nothing yet.
		"dep-young": {ObservedSince: now.Add(-2 * time.Minute)},
		// The source does not say since when it counts.
		"dep-unobserved": {},
		"gone":           {ObservedSince: since},
	}
	rep := lifecycle.Build(t.Context(), reg, src, "test", now)
	want := map[string]lifecycle.Verdict{
		"ga": lifecycle.NotSafe, "preview": lifecycle.NotSafe, "dep-busy": lifecycle.NotSafe,
		"dep-edge": lifecycle.NotSafe, "dep-idle": lifecycle.Safe, "dep-never": lifecycle.Safe,
		"dep-unknown": lifecycle.Unknown, "gone": lifecycle.NotSafe,
		"dep-young": lifecycle.NotEnoughHistory, "dep-unobserved": lifecycle.NotEnoughHistory,
	}
	got := map[string]lifecycle.Verdict{}
	for _, e := range rep.Entries {
		got[e.Capability] = e.SafeToRemove
		require.NotEmpty(t, e.Reason, e.Capability)
	}
	require.Equal(t, want, got)
	require.Equal(t, []string{"dep-idle", "dep-never"}, rep.SafeToRemove)
	require.Equal(t, []string{"dep-unknown"}, rep.UnknownUsage)
	require.Equal(t, now.Add(-2*time.Minute), *rep.ObservedSince, "the shortest observation is the report's")
	require.Equal(t, "2m0s", rep.Observed)

	rep = lifecycle.Build(t.Context(), reg, broken{}, "test", now)
	require.Equal(t, "connection refused", rep.UsageError)
	require.Empty(t, rep.SafeToRemove)
	require.Len(t, rep.UnknownUsage, 7)
	rep = lifecycle.Build(t.Context(), reg, nil, "", now)
	require.Empty(t, rep.SafeToRemove)
}

func TestAdminAndStoreSources(t *testing.T) {
	mem := tasks.NewMemory(0)
	now := time.Now().UTC().Truncate(time.Second)
	require.NoError(t, mem.RecordCall(t.Context(), "a", now))
	srv := httptest.NewServer(admin.New(prometheus.NewRegistry(), admin.WithUsage(mem, nil, nil)))
	defer srv.Close()

	for name, src := range map[string]lifecycle.Source{"admin": lifecycle.Admin{URL: srv.URL + "/"}, "store": lifecycle.Store{Store: mem}} {
		u, err := src.Usage(t.Context(), []string{"a", "b"}, now)
		require.NoError(t, err, name)
		require.EqualValues(t, 1, u["a"].Calls30d, name)
		require.True(t, now.Equal(u["a"].LastUsed), name)
		require.False(t, u["a"].ObservedSince.IsZero(), "%s: the memory store counts since it started", name)
		require.Contains(t, u, "b", name)
	}
	_, err := lifecycle.Admin{URL: "ftp://x"}.Usage(t.Context(), nil, now)
	require.Error(t, err)
	_, err = lifecycle.Admin{URL: srv.URL + "/nothing-here"}.Usage(t.Context(), nil, now)
	require.ErrorContains(t, err, "HTTP 404")

	// With listen.admin_token_file, the token is sent; without it the refusal says why.
	token := []byte("0123456789abcdef0123456789abcdef")
	locked := httptest.NewServer(admin.New(prometheus.NewRegistry(), admin.WithUsage(mem, nil, token)))
	defer locked.Close()
	u, err := lifecycle.Admin{URL: locked.URL, Token: token}.Usage(t.Context(), []string{"a"}, now)
	require.NoError(t, err)
	require.EqualValues(t, 1, u["a"].Calls30d)
	_, err = lifecycle.Admin{URL: locked.URL}.Usage(t.Context(), []string{"a"}, now)
	require.ErrorContains(t, err, "HTTP 401: usage needs the admin token")
	require.ErrorContains(t, err, "the admin listener answers /v1/usage only to loopback peers")
}
