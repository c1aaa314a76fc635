// Package interop runs software nobody here wrote against a real capgate on
// 127.0.0.1: the official A2A JavaScript SDK (@a2a-js/sdk, pinned in
// js/package.json and installed by `npm ci` from js/package-lock.json) as a
// client of capgate and as an upstream handler behind it.
// docs/interop.md tabulates what each does with each binding and
// operation; the cases below are those tables.
package interop

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/capgate/capgate/test/ci"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// jsDir holds the SDK's package.json, lockfile and the client script.
const jsDir = "js"

// requireNode returns the node binary and checks the SDK is installed. Out of
// CI a missing node or a missing `npm ci` skips loudly; in CI (CI set) it
// fails: the suite must run there.
func requireNode(t *testing.T) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if ci.Required() {
			t.Fatalf(format, args...)
		}
		t.Skipf("SKIPPING THE JS INTEROP SUITE: "+format, args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not on PATH (install Node.js >= 20)")
	}
	if _, err := os.Stat(filepath.Join(jsDir, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		missing("@a2a-js/sdk is not installed: run `npm ci` in test/interop/js (.ci/run does)")
	}
	return node
}

// step is one line of the client script's output.
type step struct {
	Step   string          `json:"step"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Name, Reason, Message string
	} `json:"error"`
}

// plan is what the client script runs.
type plan struct {
	Base       string   `json:"base"`
	JWKS       string   `json:"jwks"`
	Token      string   `json:"token"`
	OtherToken string   `json:"otherToken,omitempty"` // another caller's, for client.mjs
	GRPC       string   `json:"grpc,omitempty"`       // host:port of the gRPC binding, for client.mjs
	Transport  string   `json:"transport"`
	Steps      []string `json:"steps"`
	// CardURL is the URL the served card names (the config's agent.url) and Path the card path
	// to discover at ("" for the SDK's default), for client03.mjs.
	CardURL string `json:"cardURL,omitempty"`
	Path    string `json:"path,omitempty"`
}

// runJS runs client.mjs with p and returns its steps by name.
func runJS(t *testing.T, node string, p plan) map[string]step {
	t.Helper()
	return runScript(t, node, "client.mjs", p)
}

// runScript runs a client script of test/interop/js with p and returns its steps by name.
func runScript(t *testing.T, node, script string, p plan) map[string]step {
	t.Helper()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), node, script, string(b))
	cmd.Dir = jsDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node %s: %s", script, stderr.String())
	steps := map[string]step{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := bytes.CutPrefix(sc.Bytes(), []byte("@@interop "))
		if !ok {
			t.Logf("node: %s", sc.Bytes()) // the SDK's own logging
			continue
		}
		var s step
		require.NoError(t, json.Unmarshal(line, &s), "%s", line)
		steps[s.Step] = s
	}
	require.NoError(t, sc.Err())
	return steps
}

// signingServer starts the finance example with signed cards (kid card-1)
// and, when jsonrpcStatus is not 0, that auth.jsonrpc_http_status; extra
// lines are appended to capgate.yaml.
func signingServer(t *testing.T, jsonrpcStatus int, extra ...string) *testutil.Server {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	cfg := testutil.CopyFinance(t)
	testutil.WriteFile(t, cfg, "keys/card.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		if jsonrpcStatus != 0 {
			s = strings.Replace(s, "\nauth:\n", "\nauth:\n  jsonrpc_http_status: "+strconv.Itoa(jsonrpcStatus)+"\n", 1)
		}
		return s + "cards: {signing_key_file: keys/card.pem, signing_kid: card-1}\n" + strings.Join(extra, "")
	})
	return testutil.Start(t, testutil.LoadDeployment(t, cfg))
}
