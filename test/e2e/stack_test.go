// Package e2e_test runs capgate as it runs behind Envoy: server.Run in
// process (the A2A gateway and the ext_authz gRPC server, sharing one task
// store), a recorder between the front and the gateway (to see exactly what
// reached the gateway), and in front either the Envoy-faithful proxy of
// test/envoyproxy or, when CAPGATE_E2E_ENVOY names an envoy binary, a real
// Envoy running envoy/bootstrap.yaml with its ports rewritten.
//
//	client ──▶ front (envoyproxy | envoy) ──ext_authz──▶ capgate extauthz
//	              │ allowed
//	              ▼
//	           recorder ──▶ capgate gateway ──▶ builtin echo
package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/server"
	"github.com/capgate/capgate/test/envoyproxy"
	"github.com/capgate/capgate/test/testutil"
)

// envEnvoy names the envoy binary for the real-Envoy variant (make e2e-envoy).
const envEnvoy = "CAPGATE_E2E_ENVOY"

// front is what a client talks to.
type front string

const (
	viaProxy front = "envoyproxy"
	viaEnvoy front = "envoy"
)

// eachFront runs f once per front: always through the proxy, and through a
// real Envoy when CAPGATE_E2E_ENVOY is set (skipped with a message otherwise).
// deploy returns a fresh deployment for each run (nil: the finance example).
func eachFront(t *testing.T, deploy func(t *testing.T) *deployment.Deployment, f func(t *testing.T, s *stack)) {
	t.Helper()
	for _, fr := range []front{viaProxy, viaEnvoy} {
		t.Run(string(fr), func(t *testing.T) {
			if fr == viaEnvoy && os.Getenv(envEnvoy) == "" {
				t.Skipf("%s is not set: the suite ran through test/envoyproxy only (make e2e-envoy runs it through a real envoy on PATH)", envEnvoy)
			}
			var d *deployment.Deployment
			if deploy != nil {
				d = deploy(t)
			} else {
				d = testutil.LoadDeployment(t, "")
			}
			f(t, startStack(t, d, fr))
		})
	}
}

// stack is one running capgate with its front and recorder.
type stack struct {
	front     front
	URL       string // the front's base URL
	Addrs     server.Addrs
	decisions *observer.ObservedLogs
	rec       *recorder
	http      *http.Client

	mu     sync.Mutex
	checks []envoyproxy.Check // proxy front only
}

func startStack(t *testing.T, d *deployment.Deployment, fr front) *stack {
	t.Helper()
	s := &stack{front: fr, http: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 30 * time.Second}}
	t.Cleanup(s.http.CloseIdleConnections)

	d.Config.Listen.A2A = "127.0.0.1:0"
	d.Config.Listen.Admin = "127.0.0.1:0"
	d.Config.Listen.ExtAuthz = "127.0.0.1:0"
	decCore, decisions := observer.New(zapcore.InfoLevel)
	s.decisions = decisions
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	ready := make(chan server.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Options{
			Deployment:     d,
			Logger:         zap.NewNop(),
			DecisionLogger: zap.New(decCore),
			AuditWriter:    io.Discard,
			Gateway:        true,
			ExtAuthz:       true,
			OnReady:        func(a server.Addrs) { ready <- a },
		})
	}()
	select {
	case s.Addrs = <-ready:
	case err := <-done:
		cancel()
		require.FailNow(t, "capgate did not start", "server.Run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server.Run: %v", err)
		}
	})

	s.rec = startRecorder(t, "http://"+s.Addrs.A2A)
	switch fr {
	case viaProxy:
		s.URL = s.startProxy(t)
	case viaEnvoy:
		s.URL = startEnvoy(t, os.Getenv(envEnvoy), s.Addrs.ExtAuthz, s.rec.addr)
	}
	return s
}

func (s *stack) startProxy(t *testing.T) string {
	t.Helper()
	conn, err := envoyproxy.Dial(s.Addrs.ExtAuthz)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	up, err := url.Parse("http://" + s.rec.addr)
	require.NoError(t, err)
	p := envoyproxy.New(authv3.NewAuthorizationClient(conn), up, envoyproxy.WithCheckObserver(func(c envoyproxy.Check) {
		s.mu.Lock()
		s.checks = append(s.checks, c)
		s.mu.Unlock()
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String()
}

// startEnvoy runs envoy with a copy of envoy/bootstrap.yaml whose ports are
// rewritten: the listener, the stats listener and admin on free loopback ports, the ext_authz
// cluster on capgate's ext_authz address and the gateway cluster on the
// recorder. It returns the listener's base URL.
func startEnvoy(t *testing.T, bin, extauthzAddr, gatewayAddr string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "envoy", "bootstrap.yaml"))
	require.NoError(t, err)
	listenPort, adminPort, statsPort := freePort(t), freePort(t), freePort(t)
	_, azPort, err := net.SplitHostPort(extauthzAddr)
	require.NoError(t, err)
	_, gwPort, err := net.SplitHostPort(gatewayAddr)
	require.NoError(t, err)
	ports := map[string]string{"8000": listenPort, "9901": statsPort}
	cfg := regexp.MustCompile(`port_value: (\d+)`).ReplaceAllStringFunc(string(src), func(m string) string {
		p := strings.TrimPrefix(m, "port_value: ")
		require.Contains(t, ports, p, "unexpected port in envoy/bootstrap.yaml")
		return "port_value: " + ports[p]
	})
	// The pod's Unix sockets (Envoy's admin, capgate's two listeners) become
	// loopback ports here: the suite's capgate listens on TCP.
	pipes := map[string]string{
		"/var/run/envoy/admin.sock":      adminPort,
		"/var/run/capgate/extauthz.sock": azPort,
		"/var/run/capgate/a2a.sock":      gwPort,
	}
	cfg = regexp.MustCompile(`pipe: \{path: ([^,}]+)(, mode: \d+)?\}`).ReplaceAllStringFunc(cfg, func(m string) string {
		path := regexp.MustCompile(`path: ([^,}]+)`).FindStringSubmatch(m)[1]
		require.Contains(t, pipes, path, "unexpected Unix socket in envoy/bootstrap.yaml")
		return "socket_address: {address: 127.0.0.1, port_value: " + pipes[path] + "}"
	})
	cfg = strings.ReplaceAll(cfg, "address: 0.0.0.0", "address: 127.0.0.1")
	path := filepath.Join(t.TempDir(), "bootstrap.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))

	var out bytes.Buffer
	cmd := exec.Command(bin, "-c", path, "--disable-hot-restart", "--log-level", "warn",
		"--base-id", fmt.Sprint(time.Now().UnixNano()%100000))
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("envoy output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:" + adminPort + "/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			require.FailNow(t, "envoy exited", "%s", out.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "envoy not ready: %s", out.String())
		time.Sleep(50 * time.Millisecond)
	}
	return "http://127.0.0.1:" + listenPort
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

// recorder forwards to the gateway and keeps the headers of every request
// it forwarded: what the gateway was given.
type recorder struct {
	addr string
	mu   sync.Mutex
	seen []http.Header
}

func startRecorder(t *testing.T, gateway string) *recorder {
	t.Helper()
	up, err := url.Parse(gateway)
	require.NoError(t, err)
	r := &recorder{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = up.Scheme, up.Host
			pr.Out.Host = pr.In.Host
			for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Proto"} {
				if v, ok := pr.In.Header[h]; ok {
					pr.Out.Header[h] = v
				}
			}
		},
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Clone())
		r.mu.Unlock()
		rp.ServeHTTP(w, req)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.addr = ln.Addr().String()
	return r
}

// count is the number of requests that reached the gateway.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// last is the headers of the last request that reached the gateway.
func (r *recorder) last(t *testing.T) http.Header {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.seen, "no request reached the gateway")
	return r.seen[len(r.seen)-1]
}

// response is a raw HTTP response with its body read.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// do sends a raw request to the front.
func (s *stack) do(t *testing.T, method, path string, body io.Reader, headers ...string) *response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, body)
	require.NoError(t, err)
	for i := 0; i < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := s.http.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// jsonrpc posts a JSON-RPC body to the front.
func (s *stack) jsonrpc(t *testing.T, body string, headers ...string) *response {
	t.Helper()
	return s.do(t, http.MethodPost, "/", strings.NewReader(body), append([]string{"Content-Type", "application/json"}, headers...)...)
}

// decisions returns the decision-log entries (flattened OPA events).
func (s *stack) decisionEntries() []map[string]any {
	return testutil.FlatDecisions(s.decisions)
}

// decision returns the one entry with this id (and fails otherwise). The
// decision log is written off the decision path, so the entry is waited for.
func (s *stack) decision(t *testing.T, id string) map[string]any {
	t.Helper()
	require.NotEmpty(t, id, "no decision id")
	var got []map[string]any
	require.Eventually(t, func() bool {
		got = got[:0]
		for _, m := range s.decisionEntries() {
			if m["decision_id"] == id {
				got = append(got, m)
			}
		}
		return len(got) > 0
	}, 10*time.Second, 5*time.Millisecond, "decision %s not logged", id)
	require.Len(t, got, 1, "decision %s", id)
	return got[0]
}

// extauthzCount is the number of ext_authz decisions logged so far.
func (s *stack) extauthzCount() int {
	n := 0
	for _, m := range s.decisionEntries() {
		if m["component"] == "extauthz" {
			n++
		}
	}
	return n
}

// deniedByExtAuthz requires that the response is ext_authz's denial: its
// decision id names an extauthz deny with code, and nothing reached the
// gateway since before (the recorder's count).
func (s *stack) deniedByExtAuthz(t *testing.T, r *response, before int, code string) map[string]any {
	t.Helper()
	d := s.decision(t, r.Header.Get("X-Capgate-Decision-Id"))
	require.Equal(t, "extauthz", d["component"])
	require.Equal(t, "deny", d["result"])
	require.Equal(t, code, d["code"])
	require.Equal(t, before, s.rec.count(), "a denied request reached the gateway")
	return d
}
