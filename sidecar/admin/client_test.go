package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/admin"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/test/testnet"
)

// TestClientAgainstListener: the client reads the real listener's answers,
// sends the token when it has one, and says why a refusal happened.
func TestClientAgainstListener(t *testing.T) {
	mem := tasks.NewMemory(0)
	token := []byte("0123456789abcdef0123456789abcdef")
	srv := httptest.NewServer(admin.New(prometheus.NewRegistry(), admin.WithUsage(mem, nil, token)))
	defer srv.Close()
	q := url.Values{"capability": {"a"}}

	c, err := admin.NewClient(srv.URL+"/", token, nil)
	require.NoError(t, err)
	var ur admin.UsageResponse
	require.NoError(t, c.Do(t.Context(), http.MethodGet, admin.UsagePath, q, nil, 1<<20, &ur))
	require.Contains(t, ur.Usage, "a")

	anon, err := admin.NewClient(srv.URL, nil, nil)
	require.NoError(t, err)
	err = anon.Do(t.Context(), http.MethodGet, admin.UsagePath, q, nil, 1<<20, &ur)
	require.ErrorContains(t, err, "GET /v1/usage at "+srv.URL+": HTTP 401: usage needs the admin token")
	require.ErrorContains(t, err, "listen.admin_token_file to callers sending its token")
	require.NotErrorIs(t, err, admin.ErrUnreachable)

	err = c.Do(t.Context(), http.MethodGet, admin.UsagePath, q, nil, 8, &ur)
	require.ErrorContains(t, err, "answer larger than 8 bytes")
}

// TestClientErrors: every way a call fails names the request and never
// echoes an answer's body beyond its JSON "error", cut short.
func TestClientErrors(t *testing.T) {
	for _, raw := range []string{"ftp://x", "127.0.0.1:9090", "http://", "http://h:1/?a=b", "::"} {
		_, err := admin.NewClient(raw, nil, nil)
		require.ErrorContains(t, err, "want http(s)://host:port", raw)
	}

	c, err := admin.NewClient("http://"+testnet.RefusedAddr(t), nil, nil)
	require.NoError(t, err)
	err = c.Do(t.Context(), http.MethodGet, admin.UsagePath, nil, nil, 100, &struct{}{})
	require.ErrorIs(t, err, admin.ErrUnreachable)
	require.ErrorContains(t, err, "GET /v1/usage at http://")

	long := strings.Repeat("é", 500)
	answers := map[string]func(w http.ResponseWriter){
		"/not-json": func(w http.ResponseWriter) { _, _ = w.Write([]byte("<html>secret-body</html>")) },
		"/teapot": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte("secret-body"))
		},
		"/long-error": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": long})
		},
		"/forbidden": func(w http.ResponseWriter) { w.WriteHeader(http.StatusForbidden) },
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answers[r.URL.Path](w)
	}))
	defer srv.Close()
	c, err = admin.NewClient(srv.URL, nil, nil)
	require.NoError(t, err)
	do := func(path string) string {
		err := c.Do(t.Context(), http.MethodGet, path, nil, nil, 1<<20, &struct{}{})
		require.Error(t, err, path)
		require.NotContains(t, err.Error(), "secret-body", path)
		require.NotErrorIs(t, err, admin.ErrUnreachable, path)
		return err.Error()
	}
	require.Contains(t, do("/not-json"), "the answer is not what capgate's admin listener sends")
	require.Contains(t, do("/teapot"), "GET /teapot at "+srv.URL+": HTTP 418")
	msg := do("/long-error")
	require.Contains(t, msg, "HTTP 400: "+strings.Repeat("é", 200)+"…")
	require.NotContains(t, msg, strings.Repeat("é", 201))
	require.Contains(t, do("/forbidden"), "HTTP 403 (the admin listener answers /forbidden only to loopback peers")
}
