package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/sidecar/handler/echo"
	"github.com/capgate/capgate/sidecar/server"
	"github.com/capgate/capgate/test/testnet"
	"github.com/capgate/capgate/test/testutil"
)

// served is `capgate serve --config` running in this process until the
// test ends: it reloads its files as a deployment does.
type served struct {
	*testutil.Server
	// out is what serve wrote to its stdout (its JSON log lines).
	out *testutil.SyncBuffer
	// stop ends serve and requires a clean exit; the test's cleanup calls
	// it too, so a test calls it only to read out after the exit.
	stop func()
}

// serveConfig runs `capgate serve --config cfg` with its listeners on
// 127.0.0.1:0 and returns once the three listen.
func serveConfig(t *testing.T, cfg string) served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	var out, errOut testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"serve", "--config", cfg,
			"--listen-gateway", "127.0.0.1:0", "--listen-admin", "127.0.0.1:0", "--listen-extauthz", "127.0.0.1:0"},
			cli.Env{Stdout: &out, Stderr: &errOut, Stdin: strings.NewReader("")})
	}()
	addrs := map[string]string{}
	for len(addrs) < 3 {
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve returned %d\nstdout: %s\nstderr: %s", code, strings.Join(out.Lines(), "\n"), strings.Join(errOut.Lines(), "\n"))
		case <-time.After(20 * time.Millisecond):
		}
		for _, line := range out.Lines() {
			var e struct{ Msg, Server, Addr string }
			if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "listening" {
				addrs[e.Server] = e.Addr
			}
		}
	}
	s := &testutil.Server{Addrs: server.Addrs{A2A: addrs["gateway"], Admin: addrs["admin"], ExtAuthz: addrs["extauthz"]},
		URL: "http://" + addrs["gateway"], AdminURL: "http://" + addrs["admin"],
		HTTP: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 30 * time.Second}}
	stop := sync.OnceFunc(func() {
		s.HTTP.CloseIdleConnections()
		cancel()
		require.Equal(t, cli.ExitOK, <-done, strings.Join(errOut.Lines(), "\n"))
	})
	t.Cleanup(stop)
	return served{Server: s, out: &out, stop: stop}
}

// get sends a GET to the admin listener with the given Authorization ("":
// none) and returns the status and body.
func (s served) get(t *testing.T, path, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.AdminURL+path, nil)
	require.NoError(t, err)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := s.HTTP.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// reloads is capgate_reloads_total{result="ok"} on the admin listener.
func (s served) reloads(t *testing.T) int {
	t.Helper()
	_, body := s.get(t, "/metrics", "")
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `capgate_reloads_total{result="ok"} `); ok {
			n, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return int(n)
		}
	}
	return 0
}

// waitReloadAfter waits until more than n reloads were applied and returns
// how many were.
func (s served) waitReloadAfter(t *testing.T, n int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got := s.reloads(t); got > n {
			return got
		}
		require.True(t, time.Now().Before(deadline), "no reload after %d", n)
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

// sendText sends one text message (its own message id) and returns the task.
func sendText(t *testing.T, c *a2aclient.Client, text string, task a2a.TaskID) *a2a.Task {
	t.Helper()
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	m.TaskID = task
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m})
	require.NoError(t, err)
	got, ok := res.(*a2a.Task)
	require.True(t, ok, "want a task, got %T", res)
	return got
}

// ranOn is the capability the echo handler reports it ran for task.
func ranOn(t *testing.T, task *a2a.Task) string {
	t.Helper()
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.Len(t, task.Artifacts, 1)
	require.Len(t, task.Artifacts[0].Parts, 1)
	data, ok := task.Artifacts[0].Parts[0].Content.(a2a.Data)
	require.True(t, ok)
	b, err := json.Marshal(data.Value)
	require.NoError(t, err)
	var r echo.Report
	require.NoError(t, json.Unmarshal(b, &r))
	return r.Capability
}

// reviewOf runs `route examples --json` with args and decodes the list.
func reviewOf(t *testing.T, args ...string) []struct {
	Capability string
	Groups     []struct{ ID, Text string }
} {
	t.Helper()
	r := run(t, append([]string{"route", "examples", "--json"}, args...)...)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var out []struct {
		Capability string
		Groups     []struct{ ID, Text string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	return out
}

// TestRouteExamplesThroughTheAdminListener (issue 36): with the memory
// store, the candidates live inside the serving capgate only, and `capgate
// route examples` reviews them through its admin listener: clarifications
// answered on a running `capgate serve` are listed (--admin, or by default
// at listen.admin), accepting one writes the examples file and forgets it
// in the server's store, the server reloads the file and routes that text,
// and rejecting forgets. The listener answers only callers sending the
// admin token, and serves nothing of the callers.
func TestRouteExamplesThroughTheAdminListener(t *testing.T) {
	const (
		token   = "an-admin-token-of-at-least-32-bytes-0123456789"
		billing = "where does my supplier bill stand"
		vague   = "hello there, can you help me out"
	)
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		s = replaceOnce(t, s, "router: {threshold: 0.6}", "router: {threshold: 0.6, learn: {capture: true}}")
		return replaceOnce(t, s, "admin: 127.0.0.1:9090}", "admin: 127.0.0.1:9090, admin_token_file: admin.token}")
	})
	testutil.WriteFile(t, cfg, "admin.token", token+"\n")
	testutil.EditFile(t, cfg, "capabilities/lookup-invoice.yaml", func(s string) string {
		return s + "routing: {examples_file: lookup-invoice.examples.txt}\n"
	})
	srv := serveConfig(t, cfg)
	c := srv.Client(t, a2a.TransportProtocolJSONRPC, testutil.Bearer(testutil.Token(t, testutil.Partner())))

	// Two clarifications answered with lookup-invoice: two candidates, in
	// the server's memory only.
	for _, text := range []string{billing, vague} {
		task := sendText(t, c, text, "")
		require.Equal(t, a2a.TaskStateInputRequired, task.Status.State, text)
		require.Equal(t, "lookup-invoice", ranOn(t, sendText(t, c, "lookup-invoice", task.ID)))
	}

	// The listener answers the token's holder only, and serves no caller.
	for _, auth := range []string{"", "Bearer wrong-token-of-at-least-32-bytes-0123456789", "Basic " + token} {
		code, body := srv.get(t, "/v1/examples?capability=lookup-invoice", auth)
		require.Equal(t, http.StatusUnauthorized, code, auth)
		require.JSONEq(t, `{"error":"candidate examples needs the admin token (listen.admin_token_file)"}`, body)
	}
	code, body := srv.get(t, "/v1/examples?capability=lookup-invoice", "Bearer "+token)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, billing)
	for _, who := range []string{"partner-1", "acme", "idp.example.com"} {
		require.NotContains(t, body, who, "a candidate holds nothing of who answered")
	}
	other := testutil.CopyFinance(t)
	testutil.EditFile(t, other, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "admin: 127.0.0.1:9090}", "admin: 127.0.0.1:9090, admin_token_file: admin.token}")
	})
	testutil.WriteFile(t, other, "admin.token", strings.Repeat("x", 40))
	r := run(t, "route", "examples", "--config", other, "--admin", srv.AdminURL)
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "HTTP 401")
	require.Contains(t, r.stderr, "listen.admin_token_file")
	require.NotContains(t, r.stderr, token)

	// Listed through --admin, as the store would list them.
	r = run(t, "route", "examples", "--config", cfg, "--admin", srv.AdminURL)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "lookup-invoice (routing auto; examples file lookup-invoice.examples.txt, 0 accepted): 2 candidate(s) from 2 answer(s), 2 after merging near-duplicates")
	list := reviewOf(t, "--config", cfg, "--admin", srv.AdminURL)
	require.Len(t, list, 1)
	require.Equal(t, "lookup-invoice", list[0].Capability)
	ids := map[string]string{}
	for _, g := range list[0].Groups {
		ids[g.Text] = g.ID
	}
	require.Len(t, ids, 2)

	// The config names where the server listens: the default admin URL.
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "admin: 127.0.0.1:9090,", "admin: "+srv.Addrs.Admin+",")
	})
	applied := srv.waitReloadAfter(t, 0)

	r = run(t, "route", "examples", "accept", "--config", cfg, "--capability", "lookup-invoice", ids[billing])
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "1 example(s) added")
	require.Contains(t, r.stdout, "lookup-invoice: 1 candidate(s) accepted and removed from the store of the capgate at "+srv.AdminURL)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(cfg), "capabilities", "lookup-invoice.examples.txt"))
	require.NoError(t, err)
	require.Contains(t, string(b), "\n"+billing+"\n")
	list = reviewOf(t, "--config", cfg)
	require.Len(t, list, 1)
	require.Len(t, list[0].Groups, 1, "the accepted candidate is gone from the server's store")
	require.Equal(t, vague, list[0].Groups[0].Text)

	// The server reloads the examples file and routes the text. (A reload
	// of the config edit may still come first: each reload gets one try.)
	for {
		applied = srv.waitReloadAfter(t, applied)
		task := sendText(t, c, billing, "")
		if task.Status.State == a2a.TaskStateCompleted {
			require.Equal(t, "lookup-invoice", ranOn(t, task))
			break
		}
		require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
	}

	// Reject forgets.
	r = run(t, "route", "examples", "reject", "--config", cfg, "--capability", "lookup-invoice", "all")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "lookup-invoice: 1 candidate(s) rejected and removed from the store of the capgate at "+srv.AdminURL)
	r = run(t, "route", "examples", "--config", cfg, "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout)
	b, err = os.ReadFile(filepath.Join(filepath.Dir(cfg), "capabilities", "lookup-invoice.examples.txt"))
	require.NoError(t, err)
	require.NotContains(t, string(b), vague)
}

// With the memory store and no capgate serving the config, the review says
// where it looked and why.
func TestRouteExamplesNoServer(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "admin: 127.0.0.1:9090}", "admin: "+testnet.RefusedAddr(t)+"}")
	})
	r := run(t, "route", "examples", "--config", cfg)
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "is capgate serving this config?")
	require.Contains(t, r.stderr, "the memory store keeps candidates inside the serving capgate only")
	r = run(t, "route", "examples", "--config", cfg, "--admin", "ftp://example.com")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, `--admin "ftp://example.com": want http(s)://host:port`)
}
