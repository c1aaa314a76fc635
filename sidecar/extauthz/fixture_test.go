package extauthz

import (
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/revision"
)

// Demo identity of the finance example.
const (
	demoIssuer   = "https://idp.example.com"
	demoAudience = "finance-agent"
	demoKID      = "demo-rs256"
)

// financeRevision builds a revision of the embedded finance example.
func financeRevision(t testing.TB) *revision.State {
	t.Helper()
	d, err := deployment.Load("")
	require.NoError(t, err)
	rev, err := revision.Build(context.Background(), d, revision.Options{})
	require.NoError(t, err)
	return rev
}

// editedRevision builds a revision of a copy of the finance example with its
// config edited and some capability files dropped.
func editedRevision(t testing.TB, edit func(cfg string) string, drop ...string) *revision.State {
	t.Helper()
	dir := copyFinance(t)
	for _, f := range drop {
		require.NoError(t, os.Remove(filepath.Join(dir, "capabilities", f)))
	}
	cfgPath := filepath.Join(dir, "capgate.yaml")
	b, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	edited := edit(string(b))
	require.NotEqual(t, string(b), edited, "the edit changed nothing")
	require.NoError(t, os.WriteFile(cfgPath, []byte(edited), 0o644))
	return revisionAt(t, dir)
}

// copyFinance copies the embedded finance example to a temporary directory.
func copyFinance(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	err := fs.WalkDir(manifests.FS, "finance", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if e.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := fs.ReadFile(manifests.FS, p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	require.NoError(t, err)
	return filepath.Join(dir, "finance")
}

// revisionAt builds the revision of the deployment config in dir.
func revisionAt(t testing.TB, dir string) *revision.State {
	t.Helper()
	cfg, err := config.Load(filepath.Join(dir, "capgate.yaml"))
	require.NoError(t, err)
	d, err := deployment.FromConfig(cfg)
	require.NoError(t, err)
	rev, err := revision.Build(context.Background(), d, revision.Options{})
	require.NoError(t, err)
	return rev
}

// tokens signs demo tokens with the finance example's RS256 key.
type tokens struct {
	t testing.TB
	s func(claims map[string]any) (string, error)
}

func newTokens(t testing.TB) *tokens {
	t.Helper()
	pem, err := fs.ReadFile(manifests.FS, "finance/keys/demo-rs256.key.pem")
	require.NoError(t, err)
	key, alg, err := identity.LoadSigningKey(pem)
	require.NoError(t, err)
	require.Equal(t, "RS256", alg)
	return &tokens{t: t, s: func(c map[string]any) (string, error) { return identity.SignDemoToken(key, alg, demoKID, c) }}
}

// bearer returns an Authorization header value for sub in tenant with scopes.
func (k *tokens) bearer(sub, tenant string, scopes ...string) string {
	k.t.Helper()
	now := time.Now()
	claims := map[string]any{
		"iss": demoIssuer, "aud": demoAudience, "sub": sub, "tenant": tenant,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	if len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	tok, err := k.s(claims)
	require.NoError(k.t, err)
	return "Bearer " + tok
}

// httpCheck builds a CheckRequest as Envoy sends it.
func httpCheck(method, path string, headers map[string]string, body string) *authv3.CheckRequest {
	h := map[string]string{":method": method, ":path": path, ":authority": "finance.example.com", ":scheme": "https"}
	for k, v := range headers {
		h[k] = v
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "req-1", Method: method, Path: path, Host: "finance.example.com", Scheme: "https",
			Protocol: "HTTP/1.1", Headers: h, Body: body, Size: int64(len(body)),
		}},
	}}
}

// jsonrpc is a JSON-RPC POST with a body and its content-length.
func jsonrpc(body string, headers map[string]string) *authv3.CheckRequest {
	h := map[string]string{"content-type": "application/json", "content-length": itoa(len(body)), "x-envoy-auth-partial-body": "false"}
	for k, v := range headers {
		h[k] = v
	}
	return httpCheck("POST", "/", h, body)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// startServer serves s with Serve on a loopback port and returns a client.
func startServer(t *testing.T, s *Server) (authv3.AuthorizationClient, *grpc.ClientConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, s, true) }()
	conn := dial(t, ln.Addr().String())
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		require.NoError(t, <-done)
	})
	return authv3.NewAuthorizationClient(conn), conn
}

// loopbackClient serves any AuthorizationServer on a loopback port.
func loopbackClient(t testing.TB, srv authv3.AuthorizationServer) authv3.AuthorizationClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	authv3.RegisterAuthorizationServer(g, srv)
	go func() { _ = g.Serve(ln) }()
	conn := dial(t, ln.Addr().String())
	t.Cleanup(func() {
		_ = conn.Close()
		g.Stop()
	})
	return authv3.NewAuthorizationClient(conn)
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	return conn
}
