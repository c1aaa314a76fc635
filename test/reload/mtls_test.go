package reload_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/capgate/capgate/sidecar/reload"
)

const (
	spiffe      = "spiffe://example.org/ns/partners/sa/orchestrator"
	proxySecret = "a-shared-secret-between-envoy-and-capgate-0123456789"
)

// TestMTLSPrincipalsFollowReloads: an mTLS peer is authenticated at both doors — at ext_authz
// from Envoy's source principal, at the gateway from the x-forwarded-client-cert of the trusted
// proxy (auth.trusted_proxy) — and removing it from auth.mtls_principals and reloading refuses it
// at both. A direct caller forging the proxy's headers is never that peer.
func TestMTLSPrincipalsFollowReloads(t *testing.T) {
	cfg := financeCopy(t)
	put(t, cfg, "proxy.secret", proxySecret+"\n")
	withPeer := func(s string) string {
		return strings.Replace(s, "  anonymous_public: false", `  anonymous_public: false
  mtls_principals:
    "`+spiffe+`": {subject: orchestrator, tenant: acme, scopes: [recon.run]}
  trusted_proxy:
    addresses: [127.0.0.1]
    secret_file: ./proxy.secret`, 1)
	}
	original := read(t, cfg)
	put(t, cfg, "capgate.yaml", withPeer(original))
	r := start(t, reload.NewFiles(cfg))

	conn, err := grpc.NewClient(r.extauthz, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	az := authv3.NewAuthorizationClient(conn)
	card := `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`
	check := func() codes.Code {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		resp, err := az.Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
			Source: &authv3.AttributeContext_Peer{Principal: spiffe},
			Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
				Method: "POST", Path: "/", Headers: map[string]string{"a2a-version": "1.0", "content-type": "application/json"},
				RawBody: []byte(card),
			}},
		}})
		require.NoError(t, err)
		return codes.Code(resp.GetStatus().GetCode())
	}
	gateway := func(headers ...string) (int, string) {
		h := append([]string{"A2A-Version", "1.0", "Content-Type", "application/json"}, headers...)
		status, body, err := r.do(t.Context(), http.MethodPost, "/", card, h...)
		require.NoError(t, err)
		return status, string(body)
	}
	viaProxy := []string{"X-Capgate-Proxy-Secret", proxySecret, "X-Forwarded-Client-Cert", "Hash=x;URI=" + spiffe}

	require.Equal(t, codes.OK, check())
	status, body := gateway(viaProxy...)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "reconcile-invoice", "the peer's scopes apply: %s", body)
	_, body = gateway("X-Forwarded-Client-Cert", "URI="+spiffe)
	require.Contains(t, body, "UNAUTHENTICATED", "a forged client certificate header without the proxy's secret is ignored")
	_, body = gateway("X-Capgate-Proxy-Secret", "guess", "X-Forwarded-Client-Cert", "URI="+spiffe)
	require.Contains(t, body, "UNAUTHENTICATED")

	put(t, cfg, "capgate.yaml", strings.Replace(withPeer(original), `    "`+spiffe+`": {subject: orchestrator, tenant: acme, scopes: [recon.run]}`, `    "spiffe://example.org/ns/other/sa/x": {}`, 1))
	r.waitReloads(t, 1, 0)
	require.Equal(t, codes.Unauthenticated, check(), "a removed peer is refused at ext_authz after the reload")
	_, body = gateway(viaProxy...)
	require.Contains(t, body, "UNAUTHENTICATED", "and at the gateway")
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
