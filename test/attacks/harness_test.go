package attacks_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/server"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/test/testutil"
)

// target is capgate serving the finance example with both the gateway and
// the ext_authz server, sharing one task store.
type target struct {
	addrs  server.Addrs
	authz  authv3.AuthorizationClient
	store  *tasks.Memory
	logs   *observer.ObservedLogs
	limits protocol.Limits
}

func start(t *testing.T) *target {
	t.Helper()
	d, err := deployment.Load("")
	require.NoError(t, err)
	d.Config.Listen.A2A, d.Config.Listen.Admin, d.Config.Listen.ExtAuthz = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	// Push on, so that push-config attacks reach the ownership check.
	d.Config.Push = config.Push{Enabled: true, AllowedURLs: []string{"https://evil.example.com/"}}
	core, logs := observer.New(zapcore.DebugLevel)
	store := tasks.NewMemory(0)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	ready := make(chan server.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Options{
			Deployment: d, Logger: zap.New(core), Gateway: true, ExtAuthz: true, Store: store,
			ShutdownTimeout: 5 * time.Second,
			OnReady:         func(a server.Addrs) { ready <- a },
		})
	}()
	tg := &target{store: store, logs: logs, limits: protocol.Limits{MaxBodyBytes: d.Config.Limits.MaxBodyBytes, MaxDepth: d.Config.Limits.MaxDepth}}
	if tg.limits.MaxBodyBytes <= 0 {
		tg.limits.MaxBodyBytes = protocol.DefaultMaxBodyBytes
	}
	select {
	case tg.addrs = <-ready:
	case err := <-done:
		cancel()
		require.FailNow(t, "capgate did not start", "%v", err)
	}
	conn, err := grpc.NewClient(tg.addrs.ExtAuthz, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(256<<20)))
	require.NoError(t, err)
	tg.authz = authv3.NewAuthorizationClient(conn)
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		require.NoError(t, <-done)
	})
	return tg
}

// request is one HTTP request as a client sends it: the request target is
// written byte for byte (no client-side cleaning), headers in order.
type request struct {
	method, target string
	headers        []string // name, value pairs
	body           string
}

// response is what came back, from either path.
type response struct {
	status int
	header http.Header
	body   []byte
	// allowed: the gateway answered 2xx without an error object, or
	// ext_authz answered OK.
	allowed bool
	// grpcCode is the gRPC status of the Check call itself (OK unless the
	// call failed at the transport, which Envoy treats as a denial).
	grpcCode codes.Code
	// allowHeaders are the headers ext_authz adds / removes on allow.
	allowHeaders map[string]string
	removed      []string
}

// sendHTTP writes r on a fresh connection to the gateway and reads the
// answer (at most 8 MiB of body).
func (tg *target) sendHTTP(t *testing.T, r request) response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", tg.addrs.A2A, 5*time.Second)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", r.method, r.target, tg.addrs.A2A)
	hasLen := false
	for i := 0; i < len(r.headers); i += 2 {
		if strings.EqualFold(r.headers[i], "Content-Length") {
			hasLen = true
		}
		fmt.Fprintf(&b, "%s: %s\r\n", r.headers[i], r.headers[i+1])
	}
	if !hasLen && (r.body != "" || r.method == http.MethodPost) {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(r.body))
	}
	b.WriteString("\r\n")
	b.WriteString(r.body)
	// Write concurrently: capgate may answer (and close) before it has read
	// the whole request, which is what a size refusal should do.
	go func() { _, _ = io.WriteString(conn, b.String()) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "%s %s", r.method, r.target)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	require.NoError(t, err)
	out := response{status: resp.StatusCode, header: resp.Header, body: body}
	out.allowed = resp.StatusCode/100 == 2 && !hasErrorObject(body)
	return out
}

func hasErrorObject(body []byte) bool {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(sseData(body), &env) == nil && len(env.Error) > 0
}

// sseData unwraps a one-event Server-Sent Events body ("data: {...}\n\n"),
// the form a refused streaming call takes; other bodies are returned as is.
func sseData(body []byte) []byte {
	b := bytes.TrimSpace(body)
	if rest, ok := bytes.CutPrefix(b, []byte("data:")); ok && !bytes.Contains(rest, []byte("\ndata:")) {
		return bytes.TrimSpace(rest)
	}
	return body
}

// checkRequest builds the CheckRequest Envoy sends for r: pseudo-headers,
// lower-cased header names (repeated headers joined with ","), the body as
// raw_body.
func checkRequest(r request) *authv3.CheckRequest {
	h := map[string]string{":method": r.method, ":path": r.target, ":authority": "finance.example.com", ":scheme": "https"}
	for i := 0; i < len(r.headers); i += 2 {
		k := strings.ToLower(r.headers[i])
		if old, ok := h[k]; ok {
			h[k] = old + "," + r.headers[i+1]
		} else {
			h[k] = r.headers[i+1]
		}
	}
	if _, ok := h["content-length"]; !ok && r.body != "" {
		h["content-length"] = strconv.Itoa(len(r.body))
	}
	_, query, _ := strings.Cut(r.target, "?")
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "10.0.0.7", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "attack", Method: r.method, Path: r.target, Host: "finance.example.com", Scheme: "https",
			Query: query, Protocol: "HTTP/1.1", Headers: h, RawBody: []byte(r.body), Size: int64(len(r.body)),
		}},
	}}
}

func (tg *target) check(t *testing.T, r request) response {
	t.Helper()
	return tg.checkReq(t, checkRequest(r))
}

func (tg *target) checkReq(t *testing.T, req *authv3.CheckRequest) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := tg.authz.Check(ctx, req)
	if err != nil {
		st, _ := statusOf(err)
		return response{grpcCode: st}
	}
	out := response{grpcCode: codes.OK}
	if codes.Code(resp.GetStatus().GetCode()) == codes.OK {
		out.allowed = true
		out.status = http.StatusOK
		out.allowHeaders = map[string]string{}
		for _, h := range resp.GetOkResponse().GetHeaders() {
			out.allowHeaders[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		}
		out.removed = resp.GetOkResponse().GetHeadersToRemove()
		return out
	}
	d := resp.GetDeniedResponse()
	require.NotNil(t, d, "a denial without a denied response")
	out.status = int(d.GetStatus().GetCode())
	out.body = []byte(d.GetBody())
	out.header = http.Header{}
	for _, h := range d.GetHeaders() {
		out.header.Set(h.GetHeader().GetKey(), h.GetHeader().GetValue())
	}
	return out
}

// wireError is the A2A error a refusal carries, from either binding's body.
type wireError struct {
	jsonrpcCode int
	httpCode    int
	reason      string
	metadata    map[string]string
}

func parseError(t *testing.T, body []byte) (wireError, bool) {
	t.Helper()
	var env struct {
		Error *struct {
			Code    int                `json:"code"`
			Status  string             `json:"status"`
			Data    testutil.ErrorData `json:"data"` // a list in 1.0, one object in 0.3
			Details []info             `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(sseData(body), &env) != nil || env.Error == nil {
		return wireError{}, false
	}
	var we wireError
	infos := make([]info, 0, 1)
	for _, d := range env.Error.Data {
		infos = append(infos, info{Reason: d.Reason, Metadata: d.Metadata})
	}
	if env.Error.Status != "" {
		we.httpCode = env.Error.Code
		infos = env.Error.Details
	} else {
		we.jsonrpcCode = env.Error.Code
	}
	if len(infos) > 0 {
		we.reason, we.metadata = infos[0].Reason, infos[0].Metadata
	}
	return we, true
}

type info struct {
	Reason   string            `json:"reason"`
	Metadata map[string]string `json:"metadata"`
}

// --- tokens ---------------------------------------------------------------

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// claims returns valid claims for sub, with scopes and tenant.
func claims(sub, tenant string, scopes ...string) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": testutil.Issuer, "aud": testutil.Audience, "sub": sub,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	if tenant != "" {
		c[testutil.TenantClaim] = tenant
	}
	if len(scopes) > 0 {
		c[testutil.ScopesClaim] = strings.Join(scopes, " ")
	}
	return c
}

// demoKey is the finance example's RS256 demo key.
func demoKey(t *testing.T) crypto.Signer {
	t.Helper()
	pem, err := manifests.FS.ReadFile("finance/keys/demo-rs256.key.pem")
	require.NoError(t, err)
	k, alg, err := identity.LoadSigningKey(pem)
	require.NoError(t, err)
	require.Equal(t, "RS256", alg)
	return k
}

// rs256 signs a token with the demo RSA key under an arbitrary header (so
// that the header itself can be hostile).
func rs256(t *testing.T, header map[string]any, c map[string]any) string {
	t.Helper()
	in := b64(mustJSON(t, header)) + "." + b64(mustJSON(t, c))
	sum := sha256.Sum256([]byte(in))
	sig, err := demoKey(t).Sign(rand.Reader, sum[:], crypto.SHA256)
	require.NoError(t, err)
	return in + "." + b64(sig)
}

func bearer(tok string) string { return "Bearer " + tok }

func statusOf(err error) (codes.Code, string) {
	type grpcStatus interface{ GRPCStatus() *grpcstatus.Status }
	if s, ok := err.(grpcStatus); ok {
		return s.GRPCStatus().Code(), s.GRPCStatus().Message()
	}
	return codes.Unknown, err.Error()
}
