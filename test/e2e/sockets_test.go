package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/server"
	"github.com/capgate/capgate/test/envoyproxy"
	"github.com/capgate/capgate/test/testutil"
)

// TestPodOverUnixSockets runs capgate as the sidecar pod does
// (the capgate.yaml of envoy/helm/capgate and envoy/kubernetes): its gateway and ext_authz on Unix
// sockets, which the front reaches as the bootstrap's pipe clusters do.
func TestPodOverUnixSockets(t *testing.T) {
	dir := t.TempDir()
	a2aSock, azSock := filepath.Join(dir, "a2a.sock"), filepath.Join(dir, "extauthz.sock")
	d := testutil.LoadDeployment(t, "")
	d.Config.Listen.A2A = "unix:" + a2aSock
	d.Config.Listen.ExtAuthz = "unix:" + azSock
	d.Config.Listen.Admin = "127.0.0.1:0"

	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	ready := make(chan server.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Options{
			Deployment: d, Logger: zap.NewNop(), AuditWriter: io.Discard,
			Gateway: true, ExtAuthz: true,
			OnReady: func(a server.Addrs) { ready <- a },
		})
	}()
	select {
	case a := <-ready:
		require.Equal(t, a2aSock, a.A2A)
		require.Equal(t, azSock, a.ExtAuthz)
	case err := <-done:
		cancel()
		require.FailNow(t, "capgate did not start", "server.Run: %v", err)
	}
	for _, p := range []string{a2aSock, azSock} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, fs.ModeSocket, fi.Mode().Type(), p)
		require.Equal(t, server.SocketMode, fi.Mode().Perm(), p)
	}

	conn, err := envoyproxy.Dial("unix:" + azSock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	checks := make(chan envoyproxy.Check, 8)
	p := envoyproxy.New(authv3.NewAuthorizationClient(conn), &url.URL{Scheme: "http", Host: "capgate"},
		envoyproxy.WithUpstreamSocket(a2aSock), envoyproxy.WithCheckObserver(func(c envoyproxy.Check) { checks <- c }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	pctx, pcancel := context.WithCancel(context.Background())
	pdone := make(chan struct{})
	go func() { defer close(pdone); _ = p.Serve(pctx, ln) }()
	front := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}

	do := func(method, path, body string, headers ...string) (int, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), method, front+path, strings.NewReader(body))
		require.NoError(t, err)
		for i := 0; i < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b
	}

	status, card := do(http.MethodGet, "/.well-known/agent-card.json", "")
	require.Equal(t, http.StatusOK, status, "%s", card)
	require.Contains(t, string(card), `"skills"`)
	require.True(t, (<-checks).Skipped)

	jsonrpc := []string{"Content-Type", "application/json", "A2A-Version", "1.0"}
	status, body := do(http.MethodPost, "/", sendMessage10("1", ""), append(jsonrpc, "Authorization", bearer(t, partner))...)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var env struct {
		Result map[string]any `json:"result"`
		Error  any            `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &env), "%s", body)
	require.Nil(t, env.Error, "%s", body)
	require.Contains(t, env.Result, "task", "checked over the ext_authz socket, served over the gateway socket")
	c := <-checks
	require.NoError(t, c.Err)
	require.Zero(t, c.Response.GetStatus().GetCode(), "allowed")

	_, body = do(http.MethodPost, "/", sendMessage10("2", ""), jsonrpc...)
	require.Contains(t, string(body), `"code":-31401`, "no credential: refused by the check over the socket")
	c = <-checks
	require.NoError(t, c.Err)
	require.NotZero(t, c.Response.GetStatus().GetCode(), "denied by capgate, not a transport error")

	pcancel()
	<-pdone
	client.CloseIdleConnections()
	cancel()
	require.NoError(t, <-done)
	for _, p := range []string{a2aSock, azSock} {
		_, err := os.Stat(p)
		require.ErrorIs(t, err, fs.ErrNotExist, "%s is removed on shutdown", p)
	}
}
