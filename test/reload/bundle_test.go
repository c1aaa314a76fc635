package reload_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/test/testutil"
)

type keyPair struct{ private, public []byte }

func rsaKeys(t *testing.T) keyPair {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	return keyPair{
		private: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		public:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
	}
}

// bundles are the bundles of one finance copy: as it is, with status-check
// added, unsigned, and tampered after signing.
type bundles struct {
	keys                                     keyPair
	first, second, unsigned, tampered, other []byte
}

func makeBundles(t *testing.T, cfg string) bundles {
	t.Helper()
	b := bundles{keys: rsaKeys(t)}
	compileTo := func(key []byte) []byte {
		d, err := deployment.Load(cfg)
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, compile.WriteBundle(&buf, d.Snapshot, compile.BundleOptions{SigningKey: key}))
		return buf.Bytes()
	}
	b.first = compileTo(b.keys.private)
	b.other = compileTo(rsaKeys(t).private)
	p := filepath.Join(filepath.Dir(cfg), "capabilities", "status-check.yaml")
	require.NoError(t, os.WriteFile(p, []byte(statusCheck), 0o644))
	b.second = compileTo(b.keys.private)
	b.unsigned = compileTo(nil)
	require.NoError(t, os.Remove(p))
	b.tampered = tamper(t, b.second, "data.json", func(s string) string {
		return strings.Replace(s, "Reports whether the finance agent is up.", "Pays every invoice.", 1)
	})
	return b
}

// tamper rewrites one file inside a bundle, keeping its signature.
func tamper(t *testing.T, b []byte, name string, edit func(string) string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		if strings.TrimPrefix(h.Name, "/") == name {
			edited := edit(string(body))
			require.NotEqual(t, string(body), edited)
			body = []byte(edited)
			h.Size = int64(len(body))
		}
		require.NoError(t, tw.WriteHeader(h))
		_, err = tw.Write(body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return out.Bytes()
}

func writeAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "bundle.tar.gz")
	require.NoError(t, os.WriteFile(tmp, b, 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

func withStatus() []string {
	return slices.Sorted(slices.Values(append(slices.Clone(testutil.PublicSkills), "status-check")))
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// sendMessage sends a SendMessage with a skill hint and returns the body.
func (r *running) sendMessage(t *testing.T, skill string) string {
	t.Helper()
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	msg := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-` + rand.Text() + `","role":"ROLE_USER",` +
		`"parts":[{"text":"What is the status of invoice INV-20931?"}],"metadata":{"skillId":"` + skill + `"}}}}`
	status, body, err := r.do(t.Context(), http.MethodPost, "/", msg, "Content-Type", "application/json", "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Contains(t, string(body), `"result"`, "%s", body)
	return string(body)
}

// TestServeSignedBundleFile: serve from a signed bundle file; a new signed
// bundle written over it is swapped in; a tampered or unsigned one, or one
// signed by another key, is refused and the last good keeps serving.
func TestServeSignedBundleFile(t *testing.T) {
	cfg := financeCopy(t)
	b := makeBundles(t, cfg)
	path := filepath.Join(t.TempDir(), "finance.tar.gz")
	writeAtomic(t, path, b.first)

	src, err := reload.NewBundle(cfg, path, reload.BundleOptions{Verify: compile.VerifyOptions{PublicKey: b.keys.public}})
	require.NoError(t, err)
	r := start(t, src)
	require.Equal(t, testutil.PublicSkills, r.skills(t))
	r.sendMessage(t, "lookup-invoice")

	writeAtomic(t, path, b.second)
	r.waitReloads(t, 1, 0)
	require.Equal(t, withStatus(), sorted(r.skills(t)))
	r.sendMessage(t, "status-check")

	for i, bad := range [][]byte{b.tampered, b.unsigned, b.other} {
		writeAtomic(t, path, bad)
		r.waitReloads(t, 1, i+1)
		require.Equal(t, withStatus(), sorted(r.skills(t)), "the last good bundle keeps serving")
	}
	problems := r.logs.FilterMessageSnippet("reload rejected").All()
	require.Len(t, problems, 3)

	writeAtomic(t, path, b.first)
	r.waitReloads(t, 2, 3)
	require.Equal(t, testutil.PublicSkills, r.skills(t))
}

// bundleServer serves one bundle at a time with a strong ETag and answers
// a matching If-None-Match with 304.
type bundleServer struct {
	mu               sync.Mutex
	body             []byte
	etag             string
	full, notChanged atomic.Int32
}

func (s *bundleServer) set(b []byte) {
	sum := sha256.Sum256(b)
	s.mu.Lock()
	s.body, s.etag = b, `"`+hex.EncodeToString(sum[:8])+`"`
	s.mu.Unlock()
}

func (s *bundleServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	body, etag := s.body, s.etag
	s.mu.Unlock()
	if r.Header.Get("If-None-Match") == etag {
		s.notChanged.Add(1)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	s.full.Add(1)
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Type", "application/gzip")
	_, _ = w.Write(body)
}

// TestServeBundleURL: serve from a bundle URL polled with ETag — unchanged
// polls get 304 and rebuild nothing, a changed bundle is swapped in, an
// unsigned or tampered one is refused.
func TestServeBundleURL(t *testing.T) {
	cfg := financeCopy(t)
	b := makeBundles(t, cfg)
	bs := &bundleServer{}
	bs.set(b.first)
	hs := httptest.NewServer(bs)
	t.Cleanup(hs.Close)

	src, err := reload.NewBundle(cfg, hs.URL+"/bundles/finance.tar.gz", reload.BundleOptions{
		Poll:   40 * time.Millisecond,
		Verify: compile.VerifyOptions{PublicKey: b.keys.public},
	})
	require.NoError(t, err)
	r := start(t, src)
	require.Equal(t, testutil.PublicSkills, r.skills(t))

	require.Eventually(t, func() bool { return bs.notChanged.Load() >= 3 }, 10*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 1, bs.full.Load(), "an unchanged bundle is not downloaded again")
	require.Zero(t, r.reloads(t, reload.ResultOK), "nor rebuilt")

	bs.set(b.second)
	r.waitReloads(t, 1, 0)
	require.Equal(t, withStatus(), sorted(r.skills(t)))
	r.sendMessage(t, "status-check")

	for _, bad := range [][]byte{b.unsigned, b.tampered} {
		before := r.reloads(t, reload.ResultRejected)
		bs.set(bad)
		require.Eventually(t, func() bool { return r.reloads(t, reload.ResultRejected) > before }, 10*time.Second, 10*time.Millisecond)
		require.Equal(t, withStatus(), sorted(r.skills(t)), "the last good bundle keeps serving")
	}
	require.Equal(t, 1, r.reloads(t, reload.ResultOK))
}

// TestServeRefusesBadBundleAtStart runs `capgate serve` with a bundle that
// fails verification: it exits 2 with a clear message, serving nothing.
func TestServeRefusesBadBundleAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the capgate binary")
	}
	bin := filepath.Join(t.TempDir(), "capgate")
	build := exec.Command("go", "build", "-o", bin, "github.com/capgate/capgate/cmd/capgate")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	cfg := financeCopy(t)
	b := makeBundles(t, cfg)
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pub.pem")
	require.NoError(t, os.WriteFile(key, b.keys.public, 0o644))
	for name, tc := range map[string]struct {
		bundle []byte
		want   string
	}{
		"unsigned":  {b.unsigned, "signatures"},
		"tampered":  {b.tampered, "data.json"},
		"other key": {b.other, "verif"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bundle.tar.gz")
			require.NoError(t, os.WriteFile(path, tc.bundle, 0o644))
			cmd := exec.CommandContext(t.Context(), bin, "serve", "--config", cfg, "--bundle", path, "--bundle-verification-key", key)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "serve must fail: %s", stderr.String())
			require.Equal(t, 2, ee.ExitCode(), "%s", stderr.String())
			require.Contains(t, stderr.String(), "bundle "+path)
			require.Contains(t, stderr.String(), tc.want)
		})
	}
}
