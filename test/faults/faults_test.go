package faults_test

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/capgate/capgate/test/testnet"
	"github.com/capgate/capgate/test/testutil"
)

// handlerName is the finance example's handler of lookup-invoice-v1, pointed
// at the fake upstream in these tests.
const handlerName = "invoices.lookup.v1"

// mode is how the fake upstream behaves.
type mode int32

const (
	modeOK mode = iota
	modeSlow
	modeReset
	modeGarbage
	modeNotATask
	modeWrongID
	modeHTTP500
)

// upstream is a fake A2A handler whose behaviour can be switched.
type upstream struct {
	srv      *httptest.Server
	mode     atomic.Int32
	delay    time.Duration
	received chan struct{} // a request arrived (buffered, dropped when full)
}

func newUpstream(t *testing.T, delay time.Duration) *upstream {
	t.Helper()
	u := &upstream{delay: delay, received: make(chan struct{}, 64)}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	_ = json.Unmarshal(body, &req)
	select {
	case u.received <- struct{}{}:
	default:
	}
	task := `{"task":{"id":"up-task-1","contextId":"up-ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}`
	switch mode(u.mode.Load()) {
	case modeSlow:
		select {
		case <-time.After(u.delay):
		case <-r.Context().Done():
			return
		}
	case modeReset:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST, not FIN
			}
			_ = conn.Close()
		}
		return
	case modeGarbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`<html>this is not JSON`))
		return
	case modeNotATask:
		task = `{"weather":"sunny"}`
	case modeWrongID:
		req.ID = json.RawMessage(`"someone-else"`)
	case modeHTTP500:
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + task + `}`))
}

// startCapgate serves the finance example with lookup-invoice-v1's handler
// at u and the given handler timeout.
func startCapgate(t *testing.T, u *upstream, timeout time.Duration, shutdown time.Duration) *testutil.Server {
	t.Helper()
	d := testutil.LoadDeployment(t, "")
	d.Config.Handlers[handlerName] = u.srv.URL + "/"
	d.Config.Limits.HandlerTimeout = timeout
	return testutil.Start(t, d, testutil.StartOptions{ShutdownTimeout: shutdown})
}

// send is one JSON-RPC SendMessage hinted at lookup-invoice-v1.
func send(t *testing.T, c *http.Client, url, tok string) (*http.Response, []byte, error) {
	// Each send is a new message (capgate runs a messageId once per owner).
	body := `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"` + rand.Text() + `","role":"ROLE_USER",` +
		`"parts":[{"text":"Show me invoice INV-20931"}],"metadata":{"skillId":"lookup-invoice-v1"}}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/", strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func decode(t *testing.T, b []byte) (json.RawMessage, *rpcError) {
	t.Helper()
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	require.NoError(t, json.Unmarshal(b, &env), "%s", b)
	return env.Result, env.Error
}

// leakCheck stops everything the test started and checks that no goroutine
// outlives it.
func leakCheck(t *testing.T, srv *testutil.Server, clients []*http.Client, upstreams ...*upstream) {
	t.Helper()
	require.NoError(t, srv.Stop())
	srv.HTTP.CloseIdleConnections()
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	for _, u := range upstreams {
		u.srv.CloseClientConnections()
		u.srv.Close()
	}
	goleak.VerifyNone(t, goleak.IgnoreCurrent())
}

func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
}

func TestUpstreamFailures(t *testing.T) {
	before := goleak.IgnoreCurrent()
	u := newUpstream(t, 3*time.Second)
	const timeout = 300 * time.Millisecond
	srv := startCapgate(t, u, timeout, 0)
	tok := testutil.Token(t, testutil.TokenOptions{})
	c := newClient()

	cases := []struct {
		name    string
		mode    mode
		down    bool
		code    int
		message string
		within  time.Duration
	}{
		{name: "healthy", mode: modeOK},
		{name: "slow beyond handler_timeout", mode: modeSlow, code: -32603, message: "did not answer within 300ms", within: timeout + 2*time.Second},
		{name: "connection reset", mode: modeReset, code: -32603, message: "the skill's handler is unavailable"},
		{name: "not JSON", mode: modeGarbage, code: -32006, message: "returned an invalid A2A response"},
		{name: "result not a task or message", mode: modeNotATask, code: -32006, message: "not a task or message"},
		{name: "answer to another id", mode: modeWrongID, code: -32006, message: "returned an invalid A2A response"},
		{name: "HTTP 500 without a body", mode: modeHTTP500, code: -32006, message: "returned an invalid A2A response"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u.mode.Store(int32(tc.mode))
			start := time.Now()
			resp, b, err := send(t, c, srv.URL, tok)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
			result, rerr := decode(t, b)
			if tc.code == 0 {
				require.Nil(t, rerr, "%s", b)
				require.Contains(t, string(result), "up-task-1")
				return
			}
			require.NotNil(t, rerr, "%s", b)
			require.Equal(t, tc.code, rerr.Code, "%s", b)
			require.Contains(t, rerr.Message, tc.message)
			require.NotContains(t, rerr.Message, u.srv.URL, "the upstream address is not shown to callers")
			if tc.within > 0 {
				require.Less(t, time.Since(start), tc.within)
			}
		})
	}

	t.Run("down", func(t *testing.T) {
		d := testutil.LoadDeployment(t, "")
		d.Config.Handlers[handlerName] = "http://" + testnet.RefusedAddr(t) + "/"
		d.Config.Limits.HandlerTimeout = timeout
		srv2 := testutil.Start(t, d, testutil.StartOptions{})
		resp, b, err := send(t, c, srv2.URL, tok)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, rerr := decode(t, b)
		require.NotNil(t, rerr, "%s", b)
		require.Equal(t, -32603, rerr.Code, "%s", b)
		require.Equal(t, "the skill's handler is unavailable", rerr.Message)
		require.NoError(t, srv2.Stop())
		srv2.HTTP.CloseIdleConnections()
	})
	leakCheck(t, srv, []*http.Client{c}, u)
	goleak.VerifyNone(t, before)
}

// TestBoundedUnderFailure: 1,000 requests to a failing upstream leave the
// heap and the goroutine count where they were.
func TestBoundedUnderFailure(t *testing.T) {
	u := newUpstream(t, 0)
	u.mode.Store(int32(modeReset))
	srv := startCapgate(t, u, time.Second, 0)
	tok := testutil.Token(t, testutil.TokenOptions{})
	c := newClient()

	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// Warm up (caches, pools, connections), then measure.
	for range 50 {
		_, _, err := send(t, c, srv.URL, tok)
		require.NoError(t, err)
	}
	h0, g0 := heap(), runtime.NumGoroutine()
	var wg sync.WaitGroup
	var failures atomic.Int64
	sem := make(chan struct{}, 16)
	for range 1000 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			resp, b, err := send(t, c, srv.URL, tok)
			if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"code":-32603`) {
				failures.Add(1)
			}
		}()
	}
	wg.Wait()
	require.Zero(t, failures.Load(), "every request gets the clear upstream error")
	c.CloseIdleConnections()
	h1 := heap()
	growth := int64(h1) - int64(h0)
	t.Logf("heap %d -> %d bytes (%+d), goroutines %d -> %d", h0, h1, growth, g0, runtime.NumGoroutine())
	require.Less(t, growth, int64(32<<20), "heap grew by %d bytes over 1,000 failing requests", growth)
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= g0+8 }, 5*time.Second, 50*time.Millisecond,
		"goroutines: %d before, %d after", g0, runtime.NumGoroutine())
	leakCheck(t, srv, []*http.Client{c}, u)
}

// TestGracefulShutdownDrains: a request in flight when shutdown starts
// completes; requests after it are refused.
func TestGracefulShutdownDrains(t *testing.T) {
	u := newUpstream(t, 700*time.Millisecond)
	u.mode.Store(int32(modeSlow))
	srv := startCapgate(t, u, 10*time.Second, 10*time.Second)
	tok := testutil.Token(t, testutil.TokenOptions{})
	c := newClient()

	type answer struct {
		resp *http.Response
		body []byte
		err  error
	}
	inflight := make(chan answer, 1)
	go func() {
		resp, b, err := send(t, c, srv.URL, tok)
		inflight <- answer{resp, b, err}
	}()
	select {
	case <-u.received:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the request never reached the upstream")
	}
	srv.Cancel()
	select {
	case <-srv.Draining():
	case <-time.After(5 * time.Second):
		require.FailNow(t, "the server did not start draining")
	}
	// New connections are refused once the listener is closed.
	require.Eventually(t, func() bool {
		fresh := newClient()
		defer fresh.CloseIdleConnections()
		_, _, err := send(t, fresh, srv.URL, tok)
		return err != nil
	}, 5*time.Second, 20*time.Millisecond, "a new request after shutdown was served")

	r := <-inflight
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.resp.StatusCode)
	result, rerr := decode(t, r.body)
	require.Nil(t, rerr, "%s", r.body)
	require.Contains(t, string(result), "up-task-1")
	select {
	case <-srv.Done():
	case <-time.After(10 * time.Second):
		require.FailNow(t, "server.Run did not return after draining")
	}
	leakCheck(t, srv, []*http.Client{c}, u)
}
