package cli_test

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/test/testutil"
)

// serve --listen-* binds the given addresses in place of the config's (the
// embedded default's 8080/9191/9090 are not touched), and --log-format
// console writes zap's console lines rather than JSON, while decision
// events stay JSON.
func TestServeListenFlagsAndConsoleLog(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut testutil.SyncBuffer
	sock := filepath.Join(t.TempDir(), "extauthz.sock")
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"serve", "--log-format", "console",
			"--listen-gateway", "127.0.0.1:0", "--listen-admin", "127.0.0.1:0", "--listen-extauthz", "unix:" + sock},
			cli.Env{Stdout: &out, Stderr: &errOut, Stdin: strings.NewReader("")})
	}()
	listening := regexp.MustCompile(`INFO\tlistening\t\{"server": "(\w+)", "addr": "([^"]+)"\}`)
	addrs := map[string]string{}
	// Wait for the three listeners (a condition, not a time: the loop ends
	// as soon as they are logged, or when serve returns).
	for len(addrs) < 3 {
		select {
		case code := <-done:
			t.Fatalf("serve returned %d\nstdout: %s\nstderr: %s", code, strings.Join(out.Lines(), "\n"), strings.Join(errOut.Lines(), "\n"))
		case <-time.After(20 * time.Millisecond):
		}
		for _, m := range listening.FindAllStringSubmatch(strings.Join(out.Lines(), "\n"), -1) {
			addrs[m[1]] = m[2]
		}
	}
	require.Equal(t, sock, addrs["extauthz"])
	require.NotEqual(t, "127.0.0.1:8080", addrs["gateway"])
	require.True(t, strings.HasPrefix(addrs["gateway"], "127.0.0.1:"))
	require.True(t, strings.HasPrefix(addrs["admin"], "127.0.0.1:"))

	for _, u := range []string{"http://" + addrs["gateway"] + "/.well-known/agent-card.json", "http://" + addrs["admin"] + "/healthz"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, u)
	}
	for _, line := range strings.Split(strings.TrimSpace(strings.Join(out.Lines(), "\n")), "\n") {
		if strings.Contains(line, "listening") {
			require.False(t, strings.HasPrefix(line, "{"), "a console line, not JSON: %s", line)
		}
	}
	cancel()
	require.Equal(t, cli.ExitOK, <-done, strings.Join(errOut.Lines(), "\n"))
}

func TestServeFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-format", "xml"}, "--log-format must be json or console"},
		{[]string{"--listen-admin", "unix:/run/admin.sock"}, `--listen-admin: "unix:/run/admin.sock": the admin listener must be host:port`},
		{[]string{"--listen-gateway", "localhost"}, `--listen-gateway: "localhost" is not host:port (e.g. 127.0.0.1:8080)`},
		{[]string{"--listen-admin", "127.0.0.1:8080"}, `--listen-admin: "127.0.0.1:8080" is also listen.a2a`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := run(t, append([]string{"serve"}, tc.args...)...)
			require.Equal(t, cli.ExitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.want)
		})
	}
}
