// Package release tests what `make image` and `make dist` produce, as a
// user gets it: the container image read back from podman's storage layer by
// layer, and the release binaries, checksums and SBOM in dist/.
package release

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/test/ci"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// The stamps both tests build with: the same flags as each other, so the
// dist test's host-architecture binary is the image test's, from Go's cache.
const (
	stampVersion = "v0.0.0-releasetest"
	stampCommit  = "0123456789abcdef0123456789abcdef01234567"
)

// repoRoot is the checkout the Makefile is in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	return root
}

// need returns the path of a program the test cannot run without: skipped
// loudly when it is missing here, failed when CI is set (.ci/run installs it).
func need(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if ci.Required() {
			t.Fatalf("%s is not installed, and CI is set: .ci/run installs Debian's %s", name, pkg)
		}
		t.Skipf("SKIPPED: %s is not installed (Debian: apt-get install %s); CI fails instead of skipping", name, pkg)
	}
	return p
}

// makeTarget runs `make -C <root> target vars...` with the test's stamps.
func makeTarget(t *testing.T, target string, vars ...string) string {
	t.Helper()
	need(t, "make", "make")
	args := append([]string{"-s", "-C", repoRoot(t), target, "VERSION=" + stampVersion, "COMMIT=" + stampCommit}, vars...)
	cmd := exec.CommandContext(t.Context(), "make", args...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// checkBinary runs a capgate binary taken out of a release: --version shows
// the stamps, and `serve` on loopback answers /readyz.
func checkBinary(t *testing.T, bin string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), bin, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.True(t, strings.HasPrefix(string(out), "capgate "+stampVersion+" (commit "+stampCommit+") go"), "%q", out)

	// serve has no listen flags: the finance example with every listener on a free loopback port.
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		r := strings.Replace(s, "listen: {a2a: 127.0.0.1:8080, extauthz: 127.0.0.1:9191, admin: 127.0.0.1:9090}",
			"listen: {a2a: 127.0.0.1:0, extauthz: 127.0.0.1:0, admin: 127.0.0.1:0}", 1)
		require.NotEqual(t, s, r, "the finance example's listen line changed")
		return r
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfg)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	admin := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		addr := ""
		for sc.Scan() {
			var line struct{ Msg, Server, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch {
			case line.Msg == "listening" && line.Server == "admin":
				addr = line.Addr
			case line.Msg == "capgate serving":
				admin <- addr
			}
		}
		close(admin)
	}()
	var addr string
	select {
	case addr = <-admin:
	case <-ctx.Done():
	}
	require.NotEmpty(t, addr, "capgate serve did not report its admin listener")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
