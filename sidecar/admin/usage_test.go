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
	h := admin.New(prometheus.NewRegistry(), admin.WithUsage(failing{mem, "c"}, func() []string { return []string{"b", "a"} }, nil))

	get := func(query string) (int, admin.UsageResponse, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, admin.UsagePath+query, nil)
		req.RemoteAddr = "127.0.0.1:40000" // without a token: loopback peers only
		h.ServeHTTP(rec, req)
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

// TestUsageAccess: /v1/usage answers only a loopback peer without listen.admin_token_file, and
// with it only a caller sending the token (from loopback too); a refusal reads nothing.
func TestUsageAccess(t *testing.T) {
	mem := tasks.NewMemory(0)
	token := []byte("0123456789abcdef0123456789abcdef")
	get := func(h http.Handler, peer string, authz ...string) int {
		req := httptest.NewRequest(http.MethodGet, admin.UsagePath+"?capability=a", nil)
		req.RemoteAddr = peer
		for _, a := range authz {
			req.Header.Add("Authorization", a)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	open := admin.New(prometheus.NewRegistry(), admin.WithUsage(mem, nil, nil))
	for peer, want := range map[string]int{
		"127.0.0.1:1": http.StatusOK, "127.8.9.10:1": http.StatusOK, "[::1]:1": http.StatusOK, "[::ffff:127.0.0.1]:1": http.StatusOK,
		"10.0.0.7:1": http.StatusForbidden, "192.0.2.1:1": http.StatusForbidden, "[fe80::1]:1": http.StatusForbidden, "": http.StatusForbidden,
	} {
		require.Equal(t, want, get(open, peer), peer)
	}
	locked := admin.New(prometheus.NewRegistry(), admin.WithUsage(mem, nil, token))
	for name, tc := range map[string]struct {
		peer  string
		authz []string
		want  int
	}{
		"token from afar":        {"10.0.0.7:1", []string{"Bearer " + string(token)}, http.StatusOK},
		"token, trailing space":  {"10.0.0.7:1", []string{"Bearer " + string(token) + " "}, http.StatusOK},
		"no token from loopback": {"127.0.0.1:1", nil, http.StatusUnauthorized},
		"no token from afar":     {"10.0.0.7:1", nil, http.StatusUnauthorized},
		"wrong token":            {"127.0.0.1:1", []string{"Bearer " + string(token[:31]) + "X"}, http.StatusUnauthorized},
		"token prefix":           {"127.0.0.1:1", []string{"Bearer " + string(token[:31])}, http.StatusUnauthorized},
		"token twice":            {"127.0.0.1:1", []string{"Bearer " + string(token), "Bearer " + string(token)}, http.StatusUnauthorized},
		"basic":                  {"127.0.0.1:1", []string{"Basic " + string(token)}, http.StatusUnauthorized},
	} {
		require.Equal(t, tc.want, get(locked, tc.peer, tc.authz...), name)
	}
}
