package envoy

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/admin"
	"github.com/capgate/capgate/test/testutil"
)

// The admin listener binds the pod's interfaces in every mode of the chart
// (the kubelet's probes and Prometheus reach the pod IP), and loopback is
// no boundary in a pod: every container shares it, and Istio's sidecar
// relays outside callers from 127.0.0.6. So in every mode the chart sets
// listen.admin_token_file from a Secret, and nothing on the admin listener
// but the probes, the metrics and the published key set answers without it.

// adminPublic are the admin endpoints served to anyone: the probes,
// Prometheus' scrape, and capgate's public key set (handlers verify its
// tokens with it).
var adminPublic = []string{"/healthz", "/readyz", "/metrics", "/.well-known/jwks.json"}

// adminGuarded are the admin endpoints that read state: the token only.
var adminGuarded = []string{admin.UsagePath, admin.HeapPath, admin.ExamplesPath}

// chartModes are the chart's modes (the enum of values.schema.json).
var chartModes = []string{"envoy", "istio"}

// TestChartAdminClosed renders each mode, loads what the capgate container
// mounts (the config, the manifests and the generated token Secret) with
// capgate's loader, runs capgate's server with it on loopback, and calls
// every admin endpoint from 127.0.0.6 — the address istio-proxy relays
// inbound calls from, a loopback peer — without and with the token.
func TestChartAdminClosed(t *testing.T) {
	for _, mode := range chartModes {
		t.Run(mode, func(t *testing.T) {
			vals := ownValues()
			vals["mode"] = mode
			const release = "weather-agent"
			k, _ := mustRenderRelease(t, release, vals)
			cfg, err := config.LoadFS(capgateFS(t, k, release), capgateConfigPath)
			require.NoError(t, err)
			require.NotEmpty(t, cfg.Listen.AdminTokenFile, "mode %s: the admin listener binds %s without listen.admin_token_file", mode, cfg.Listen.Admin)
			host, _, err := net.SplitHostPort(cfg.Listen.Admin)
			require.NoError(t, err)
			require.False(t, net.ParseIP(host).IsLoopback(), "the chart's admin listener is reached by probes on the pod IP")
			token, err := cfg.AdminToken()
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(token), config.MinAdminTokenBytes)

			d, err := deployment.FromConfig(cfg)
			require.NoError(t, err)
			srv := testutil.Start(t, d)
			client := fromAddr(t, "127.0.0.6")

			for _, path := range adminPublic {
				require.Equal(t, http.StatusOK, get(t, client, srv.AdminURL+path, ""), "%s without the token", path)
			}
			for _, path := range adminGuarded {
				require.Equal(t, http.StatusUnauthorized, get(t, client, srv.AdminURL+path, ""), "%s without the token", path)
				require.Equal(t, http.StatusUnauthorized, get(t, client, srv.AdminURL+path, "Bearer not-the-token-"+string(token[:8])), "%s with a wrong token", path)
				require.Equal(t, http.StatusOK, get(t, client, srv.AdminURL+path, "Bearer "+string(token)), "%s with the token", path)
			}
			// Forgetting candidate examples (a POST) is guarded before its method is read.
			drop := srv.AdminURL + admin.ExamplesDropPath
			require.Equal(t, http.StatusUnauthorized, get(t, client, drop, ""), "%s without the token", admin.ExamplesDropPath)
			require.Equal(t, http.StatusMethodNotAllowed, get(t, client, drop, "Bearer "+string(token)), "%s with the token", admin.ExamplesDropPath)
			// Nothing else is served: not the rest of net/http/pprof, not a listing.
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine", "/debug/vars", "/v1/", "/"} {
				require.Equal(t, http.StatusNotFound, get(t, client, srv.AdminURL+path, ""), path)
			}
		})
	}
}

// fromAddr is an HTTP client whose connections come from source (a
// loopback address other than 127.0.0.1: Linux routes all of 127/8 to lo).
func fromAddr(t *testing.T, source string) *http.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			require.Equal(t, source, c.LocalAddr().(*net.TCPAddr).IP.String())
		}
		return c, err
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// get sends GET url (with an Authorization header when auth is set) and returns the status.
func get(t *testing.T, c *http.Client, url, auth string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}
