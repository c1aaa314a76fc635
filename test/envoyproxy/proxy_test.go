package envoyproxy_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/require"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/capgate/capgate/test/envoyproxy"
)

// checkFunc is a fake Authorization server.
type checkFunc func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error)

func (f checkFunc) Check(ctx context.Context, r *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return f(ctx, r)
}

// upstream records what the proxy forwarded.
type upstream struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.reqs = append(u.reqs, r)
	u.body = append(u.body, b)
	u.mu.Unlock()
	w.Header().Set("X-Upstream", "yes")
	_, _ = io.WriteString(w, "upstream:"+r.URL.RequestURI())
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

func (u *upstream) last() (*http.Request, []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.reqs[len(u.reqs)-1], u.body[len(u.body)-1]
}

type fixture struct {
	url    string
	up     *upstream
	mu     sync.Mutex
	checks []envoyproxy.Check
}

func (f *fixture) lastCheck(t *testing.T) envoyproxy.Check {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.checks)
	return f.checks[len(f.checks)-1]
}

// start runs the fake authz server, an upstream and the proxy.
func start(t *testing.T, authz checkFunc, upstreamH http.Handler, opts ...envoyproxy.Option) *fixture {
	t.Helper()
	f := &fixture{up: &upstream{}}
	if upstreamH == nil {
		upstreamH = f.up
	}
	ups := httptest.NewServer(upstreamH)
	t.Cleanup(ups.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	authv3.RegisterAuthorizationServer(g, authz)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)

	conn, err := envoyproxy.Dial(ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	u, err := url.Parse(ups.URL)
	require.NoError(t, err)
	opts = append(opts, envoyproxy.WithCheckObserver(func(c envoyproxy.Check) {
		f.mu.Lock()
		f.checks = append(f.checks, c)
		f.mu.Unlock()
	}))
	p := envoyproxy.New(authv3.NewAuthorizationClient(conn), u, opts...)
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Serve(ctx, pln) }()
	t.Cleanup(func() { cancel(); <-done })
	f.url = "http://" + pln.Addr().String()
	return f
}

func allow(ok *authv3.OkHttpResponse) checkFunc {
	return func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		if ok == nil {
			ok = &authv3.OkHttpResponse{}
		}
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}, HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok}}, nil
	}
}

func do(t *testing.T, method, u, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, rd)
	require.NoError(t, err)
	for i := 0; i < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func opt(k, v string, a corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: a}
}

func TestCheckRequestAsEnvoyFillsIt(t *testing.T) {
	f := start(t, allow(nil), nil, envoyproxy.WithSourcePrincipal("spiffe://example.org/ns/p/sa/o"))
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage"}`
	resp, got := do(t, http.MethodPost, f.url+"/a/./b//c?x=1&y=%2F", body,
		"Content-Type", "application/json", "Authorization", "Bearer t", "X-Multi", "a", "X-Multi", "b",
		"X-Envoy-Auth-Partial-Body", "true", "X-Request-Id", "client-chosen", "X-Forwarded-For", "203.0.113.9")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "upstream:/a/b/c?x=1&y=%2F", got)
	require.Equal(t, "envoy", resp.Header.Get("Server"))

	c := f.lastCheck(t)
	require.NoError(t, c.Err)
	hr := c.Request.GetAttributes().GetRequest().GetHttp()
	require.Equal(t, "POST", hr.GetMethod())
	require.Equal(t, "/a/b/c?x=1&y=%2F", hr.GetPath())
	require.Equal(t, "http", hr.GetScheme())
	require.Equal(t, "HTTP/1.1", hr.GetProtocol())
	require.Equal(t, strings.TrimPrefix(f.url, "http://"), hr.GetHost())
	require.NotEmpty(t, hr.GetId())
	require.Equal(t, []byte(body), hr.GetRawBody())
	require.Empty(t, hr.GetBody())
	require.Equal(t, int64(len(body)), hr.GetSize())
	h := hr.GetHeaders()
	require.Equal(t, "POST", h[":method"])
	require.Equal(t, "/a/b/c?x=1&y=%2F", h[":path"])
	require.Equal(t, hr.GetHost(), h[":authority"])
	require.Equal(t, "http", h[":scheme"])
	require.Equal(t, "application/json", h["content-type"])
	require.Equal(t, "Bearer t", h["authorization"])
	require.Equal(t, "a,b", h["x-multi"])
	require.Equal(t, "false", h["x-envoy-auth-partial-body"], "the client's copy is dropped, Envoy's own is set")
	require.NotEqual(t, "client-chosen", h["x-request-id"])
	require.Len(t, h["x-request-id"], 36)
	require.Equal(t, "203.0.113.9, 127.0.0.1", h["x-forwarded-for"])
	require.Equal(t, "http", h["x-forwarded-proto"])
	for k := range h {
		require.Equal(t, strings.ToLower(k), k)
	}
	src := c.Request.GetAttributes().GetSource()
	require.Equal(t, "spiffe://example.org/ns/p/sa/o", src.GetPrincipal())
	require.Equal(t, "127.0.0.1", src.GetAddress().GetSocketAddress().GetAddress())
	require.NotZero(t, c.Request.GetAttributes().GetDestination().GetAddress().GetSocketAddress().GetPortValue())

	up, upBody := f.up.last()
	require.Equal(t, body, string(upBody))
	require.Equal(t, h["x-request-id"], up.Header.Get("X-Request-Id"))
	require.Equal(t, "true", up.Header.Get("X-Envoy-Auth-Partial-Body"),
		"Envoy leaves the client's header on the request it forwards; it only keeps it out of the check")
}

func TestNoBodyNoPartialHeader(t *testing.T) {
	f := start(t, allow(nil), nil)
	resp, _ := do(t, http.MethodGet, f.url+"/tasks/1", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	hr := f.lastCheck(t).Request.GetAttributes().GetRequest().GetHttp()
	require.Nil(t, hr.GetRawBody())
	require.NotContains(t, hr.GetHeaders(), "x-envoy-auth-partial-body")
}

func TestBodyLimit(t *testing.T) {
	f := start(t, allow(nil), nil, envoyproxy.WithMaxRequestBytes(1024))
	resp, body := do(t, http.MethodPost, f.url+"/", strings.Repeat("a", 1025))
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Equal(t, "Payload Too Large", body)
	require.Zero(t, f.up.count())
	f.mu.Lock()
	require.Empty(t, f.checks, "a body over the limit is never checked in part")
	f.mu.Unlock()

	resp, _ = do(t, http.MethodPost, f.url+"/", strings.Repeat("a", 1024))
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestFailClosed(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		slow := checkFunc(func(ctx context.Context, _ *authv3.CheckRequest) (*authv3.CheckResponse, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		f := start(t, slow, nil, envoyproxy.WithTimeout(50*time.Millisecond))
		resp, body := do(t, http.MethodPost, f.url+"/", "{}")
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Empty(t, body)
		require.Zero(t, f.up.count())
	})
	t.Run("error", func(t *testing.T) {
		f := start(t, func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
			return nil, io.ErrUnexpectedEOF
		}, nil)
		resp, _ := do(t, http.MethodPost, f.url+"/", "{}")
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Zero(t, f.up.count())
	})
	t.Run("server down", func(t *testing.T) {
		u, _ := url.Parse("http://127.0.0.1:1")
		conn, err := envoyproxy.Dial("127.0.0.1:1")
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		p := envoyproxy.New(authv3.NewAuthorizationClient(conn), u)
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}")))
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	})
}

func TestDeny(t *testing.T) {
	f := start(t, func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		return &authv3.CheckResponse{
			Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)},
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode_OK},
				Headers: []*corev3.HeaderValueOption{opt("content-type", "application/json", 0), opt("x-capgate-decision-id", "d1", 0)},
				Body:    `{"error":1}`,
			}},
		}, nil
	}, nil)
	resp, body := do(t, http.MethodPost, f.url+"/", "{}")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `{"error":1}`, body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, "d1", resp.Header.Get("X-Capgate-Decision-Id"))
	require.Empty(t, resp.Header.Get("X-Upstream"))
	require.Zero(t, f.up.count())

	bare := start(t, func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.Unauthenticated)}}, nil
	}, nil)
	resp, _ = do(t, http.MethodPost, bare.url+"/", "{}")
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no denied_response: Envoy's default 403")
}

func TestAllowMutations(t *testing.T) {
	f := start(t, allow(&authv3.OkHttpResponse{
		Headers: []*corev3.HeaderValueOption{
			opt("x-capgate-decision-id", "real", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
			opt("x-appended", "two", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD),
			opt("x-if-absent", "new", corev3.HeaderValueOption_ADD_IF_ABSENT),
			opt(":path", "/hijacked", 0),
		},
		HeadersToRemove:      []string{"x-capgate-principal", "host", ":path"},
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{opt("x-to-client", "1", 0)},
	}), nil)
	resp, got := do(t, http.MethodPost, f.url+"/p", "{}",
		"X-Capgate-Decision-Id", "forged", "X-Capgate-Principal", "admin", "X-Appended", "one", "X-If-Absent", "old")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "upstream:/p", got)
	require.Equal(t, "1", resp.Header.Get("X-To-Client"))
	up, _ := f.up.last()
	require.Equal(t, []string{"real"}, up.Header.Values("X-Capgate-Decision-Id"))
	require.Empty(t, up.Header.Values("X-Capgate-Principal"))
	require.Equal(t, []string{"one", "two"}, up.Header.Values("X-Appended"))
	require.Equal(t, []string{"old"}, up.Header.Values("X-If-Absent"))
	require.NotEmpty(t, up.Host)

	bad := start(t, allow(&authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{opt("x-bad", "a\r\nb", 0)}}), nil)
	resp, _ = do(t, http.MethodPost, bad.url+"/", "{}")
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode, "validate_mutations")
	require.Zero(t, bad.up.count())
}

func TestPublicCardRoute(t *testing.T) {
	f := start(t, func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)}}, nil
	}, nil)
	for _, tc := range []struct {
		method, path string
		checked      bool
	}{
		{http.MethodGet, "/.well-known/agent.json", false}, // where 0.3 clients look
		{http.MethodHead, "/.well-known/agent.json", false},
		{http.MethodPost, "/.well-known/agent.json", true},
		{http.MethodGet, "/.well-known/agent.jsonx", true},
		{http.MethodGet, "/.well-known/agent-card.json", false},
		{http.MethodHead, "/.well-known/agent-card.json", false},
		{http.MethodGet, "/.well-known/agent-card.json?v=1", false},
		{http.MethodGet, "/x/../.well-known/agent-card.json", false}, // matched on the normalised path
		{http.MethodGet, "//.well-known//agent-card.json", false},
		{http.MethodPost, "/.well-known/agent-card.json", true},
		{http.MethodGet, "/.well-known/agent-card.jsonx", true},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp, _ := do(t, tc.method, f.url+tc.path, "")
			if tc.checked {
				require.Equal(t, http.StatusForbidden, resp.StatusCode)
				return
			}
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.True(t, f.lastCheck(t).Skipped)
			up, _ := f.up.last()
			want := "/.well-known/agent-card.json"
			if strings.Contains(tc.path, "agent.json") {
				want = "/.well-known/agent.json"
			}
			require.Equal(t, want, up.URL.Path)
		})
	}
}

func TestConnectionManagerRefusals(t *testing.T) {
	f := start(t, allow(nil), nil)
	for name, tc := range map[string]struct {
		path    string
		headers []string
	}{
		"escaped slash":          {"/a%2Fb", nil},
		"escaped backslash":      {"/a%5cb", nil},
		"underscore header name": {"/", []string{"X_Capgate_Principal", "admin"}},
	} {
		t.Run(name, func(t *testing.T) {
			resp, _ := do(t, http.MethodGet, f.url+tc.path, "", tc.headers...)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		})
	}
	require.Zero(t, f.up.count())
}

func TestStreamingIsNotBuffered(t *testing.T) {
	release := make(chan struct{})
	sse := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "data: second\n\n")
	})
	f := start(t, allow(&authv3.OkHttpResponse{ResponseHeadersToAdd: []*corev3.HeaderValueOption{opt("x-to-client", "1", 0)}}), sse)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.url+"/", strings.NewReader("{}"))
	require.NoError(t, err)
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, "1", resp.Header.Get("X-To-Client"))
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "data: first\n", line, "the first event arrives while the upstream is still streaming")
	close(release)
	rest, err := io.ReadAll(rd)
	require.NoError(t, err)
	require.Equal(t, "\ndata: second\n\n", string(rest))
}

// A header value that is not UTF-8 reaches the check with each bad byte
// replaced by '!' (Envoy's sanitizeUtf8String), instead of failing the
// gRPC call; the upstream gets the bytes as sent.
func TestNonUTF8HeaderIsSanitizedInTheCheck(t *testing.T) {
	f := start(t, allow(nil), nil)
	resp, _ := do(t, http.MethodPost, f.url+"/", "{}",
		"X-Latin1", "caf\xe9", "X-Mixed", "\xff\xfe ok é \xed\xa0\x80", "X-Multi", "a\xe9", "X-Multi", "b")
	require.Equal(t, http.StatusOK, resp.StatusCode, "not status_on_error: the check was made")
	c := f.lastCheck(t)
	require.NoError(t, c.Err)
	h := c.Request.GetAttributes().GetRequest().GetHttp().GetHeaders()
	require.Equal(t, "caf!", h["x-latin1"])
	require.Equal(t, "!! ok é !!!", h["x-mixed"], "valid multi-byte characters are kept, each bad byte replaced")
	require.Equal(t, "a!,b", h["x-multi"])
	up, _ := f.up.last()
	require.Equal(t, "caf\xe9", up.Header.Get("X-Latin1"))
}

// Every copy of a header repeated in a denial reaches the client, in
// order, whatever its append action; it replaces the local reply's own.
func TestDenyKeepsRepeatedHeaders(t *testing.T) {
	f := start(t, func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		return &authv3.CheckResponse{
			Status: &rpcstatus.Status{Code: int32(codes.Unauthenticated)},
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
				Status: &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
				Headers: []*corev3.HeaderValueOption{
					opt("www-authenticate", `Bearer realm="a2a"`, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
					opt("www-authenticate", `DPoP algs="ES256"`, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
					opt("set-cookie", "a=1", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD),
					opt("set-cookie", "b=2", 0),
					opt("content-type", "application/json", 0),
				},
				Body: `{}`,
			}},
		}, nil
	}, nil)
	resp, body := do(t, http.MethodPost, f.url+"/", "{}")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, `{}`, body)
	require.Equal(t, []string{`Bearer realm="a2a"`, `DPoP algs="ES256"`}, resp.Header.Values("Www-Authenticate"))
	require.Equal(t, []string{"a=1", "b=2"}, resp.Header.Values("Set-Cookie"))
	require.Equal(t, []string{"application/json"}, resp.Header.Values("Content-Type"))
	require.Zero(t, f.up.count())
}

// With no internal_address_config every request is external: Envoy neither
// adds x-envoy-internal nor passes on a client's.
func TestEnvoyInternalDropped(t *testing.T) {
	f := start(t, allow(nil), nil)
	resp, _ := do(t, http.MethodPost, f.url+"/", "{}", "X-Envoy-Internal", "true")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, f.lastCheck(t).Request.GetAttributes().GetRequest().GetHttp().GetHeaders(), "x-envoy-internal")
	up, _ := f.up.last()
	require.Empty(t, up.Header.Values("X-Envoy-Internal"), "from a loopback peer too")
}
