package admin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/admin"
)

func get(t *testing.T, h http.Handler, path string) (int, string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Code, string(b), rec.Result().Header
}

func TestAdminEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "capgate_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	h := admin.New(reg, admin.WithJWKS(func() []byte { return []byte(`{"keys":[]}`) }))

	code, body, _ := get(t, h, "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)

	code, _, _ = get(t, h, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, "not ready until the server says so")
	h.SetReady(true)
	code, _, _ = get(t, h, "/readyz")
	require.Equal(t, http.StatusOK, code)
	h.SetReady(false)
	code, _, _ = get(t, h, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, "draining")

	code, body, _ = get(t, h, "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "capgate_test_total 1")

	code, body, hdr := get(t, h, "/.well-known/jwks.json")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, `{"keys":[]}`, body)
	require.Equal(t, "application/jwk-set+json", hdr.Get("Content-Type"))

	code, _, _ = get(t, h, "/nope")
	require.Equal(t, http.StatusNotFound, code)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/healthz", strings.NewReader("")))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

func TestNoJWKSWithoutOption(t *testing.T) {
	h := admin.New(prometheus.NewRegistry())
	code, _, _ := get(t, h, "/.well-known/jwks.json")
	require.Equal(t, http.StatusNotFound, code)
}
