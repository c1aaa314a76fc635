package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/admin"
	"github.com/capgate/capgate/sidecar/tasks"
)

// failing fails for one capability id.
type failing struct {
	*tasks.Memory
	id string
}

func (f failing) Usage(ctx context.Context, id string, now time.Time) (tasks.Usage, error) {
	if id == f.id {
		return tasks.Usage{}, errors.Join(tasks.ErrUnavailable, errors.New("dial tcp: secret-host:6379"))
	}
	return f.Memory.Usage(ctx, id, now)
}

func TestUsage(t *testing.T) {
	mem := tasks.NewMemory(0)
	called := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, mem.RecordCall(t.Context(), "a", called))
	require.NoError(t, mem.RecordCall(t.Context(), "a", called.Add(time.Hour)))
	h := admin.New(prometheus.NewRegistry(), admin.WithUsage(failing{mem, "c"}, func() []string { return []string{"b", "a"} }))

	get := func(query string) (int, admin.UsageResponse, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, admin.UsagePath+query, nil))
		var r admin.UsageResponse
		if rec.Code == http.StatusOK {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
		}
		return rec.Code, r, rec.Body.String()
	}

	code, r, _ := get("?now=2026-03-10T00:00:00Z")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "720h0m0s", r.Window)
	since := r.Usage["a"].ObservedSince
	require.False(t, since.IsZero(), "the store says since when it counts")
	require.Equal(t, tasks.Usage{Capability: "a", Calls30d: 2, Total: 2, LastUsed: called.Add(time.Hour), ObservedSince: since}, r.Usage["a"])
	require.Equal(t, tasks.Usage{Capability: "b", ObservedSince: since}, r.Usage["b"])

	code, r, _ = get("?now=2026-04-10T00:00:00Z&capability=a")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, r.Usage, 1)
	require.Zero(t, r.Usage["a"].Calls30d, "out of the window")
	require.EqualValues(t, 2, r.Usage["a"].Total)

	code, r, body := get("?capability=a&capability=c")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, r.Usage, "a")
	require.NotContains(t, r.Usage, "c", "unknown usage is not zero usage")
	require.Equal(t, tasks.ErrUnavailable.Error(), r.Errors["c"])
	require.NotContains(t, body, "secret-host", "store errors are not echoed")

	for _, q := range []string{"?now=yesterday", "?capability=../etc", "?capability=A"} {
		code, _, _ := get(q)
		require.Equal(t, http.StatusBadRequest, code, q)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, admin.UsagePath, nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}
