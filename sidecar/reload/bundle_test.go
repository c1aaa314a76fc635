package reload_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/sidecar/revision"
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

// bundleOf compiles the deployment at cfg into a bundle, signed when key is
// not nil.
func bundleOf(t *testing.T, cfg string, key []byte) []byte {
	t.Helper()
	d, err := deployment.Load(cfg)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, compile.WriteBundle(&buf, d.Snapshot, compile.BundleOptions{SigningKey: key}))
	return buf.Bytes()
}

// tamper rewrites the file name inside a bundle with edit applied, keeping
// everything else (the signature included).
func tamper(t *testing.T, b []byte, name string, edit func(string) string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	found := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		if strings.TrimPrefix(h.Name, "/") == name {
			body = []byte(edit(string(body)))
			h.Size = int64(len(body))
			found = true
		}
		require.NoError(t, tw.WriteHeader(h))
		_, err = tw.Write(body)
		require.NoError(t, err)
	}
	require.True(t, found, "no %s in the bundle", name)
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return out.Bytes()
}

func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bundle.tar.gz")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func TestBundleFile(t *testing.T) {
	keys := rsaKeys(t)
	other := rsaKeys(t)
	cfg := finance(t)
	signed := bundleOf(t, cfg, keys.private)
	unsigned := bundleOf(t, cfg, nil)
	tampered := tamper(t, signed, "data.json", func(s string) string {
		return strings.Replace(s, "Finds an invoice by its number", "Finds and pays an invoice", 1)
	})

	tests := []struct {
		name    string
		bundle  []byte
		key     []byte
		wantErr string
	}{
		{name: "signed, verified", bundle: signed, key: keys.public},
		{name: "unsigned without a key", bundle: unsigned},
		{name: "unsigned with a key", bundle: unsigned, key: keys.public, wantErr: "signatures"},
		{name: "signed by another key", bundle: signed, key: other.public, wantErr: "verif"},
		{name: "tampered, with a key", bundle: tampered, key: keys.public, wantErr: "data.json"},
		{name: "tampered, without a key", bundle: tampered, wantErr: "content hash"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, err := reload.NewBundle(cfg, writeFile(t, tc.bundle), reload.BundleOptions{Verify: compile.VerifyOptions{PublicKey: tc.key}})
			require.NoError(t, err)
			d, err := src.Load(t.Context())
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			_, ok := d.Registry().Get("reconcile-invoice")
			require.True(t, ok)
			_, err = revision.Build(t.Context(), d, revision.Options{})
			require.NoError(t, err)
		})
	}
}

func TestBundleMustAgreeWithConfig(t *testing.T) {
	cfg := finance(t)
	b := writeFile(t, bundleOf(t, cfg, nil))
	text, err := os.ReadFile(cfg)
	require.NoError(t, err)
	edited := strings.Replace(string(text), "  recon.v3.reconcile: builtin:echo\n", "", 1)
	edited = strings.Replace(edited, "anonymous_public: false", "anonymous_public: true", 1)
	require.NotEqual(t, string(text), edited)
	require.NoError(t, os.WriteFile(cfg, []byte(edited), 0o644))

	src, err := reload.NewBundle(cfg, b, reload.BundleOptions{})
	require.NoError(t, err)
	_, err = src.Load(t.Context())
	require.ErrorContains(t, err, `handler "recon.v3.reconcile" is not defined`)
	require.ErrorContains(t, err, "settings.anonymous_public")
}

// bundleServer serves one bundle at a time with a strong ETag and answers
// If-None-Match with 304.
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
	if r.URL.Path != "/bundles/finance.tar.gz" {
		http.NotFound(w, r)
		return
	}
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

func TestBundleURLPolling(t *testing.T) {
	keys := rsaKeys(t)
	f := newFixture(t)
	first := bundleOf(t, f.cfg, keys.private)
	put(t, f.cfg, "status-check.yaml", statusCheck)
	second := bundleOf(t, f.cfg, keys.private)
	unsigned := bundleOf(t, f.cfg, nil)
	tampered := tamper(t, second, "data.json", func(s string) string { return strings.Replace(s, "Check status", "Check and pay", 1) })
	require.NoError(t, os.Remove(filepath.Join(filepath.Dir(f.cfg), "capabilities", "status-check.yaml")))

	bs := &bundleServer{}
	bs.set(first)
	srv := httptest.NewServer(bs)
	defer srv.Close()

	src, err := reload.NewBundle(f.cfg, srv.URL+"/bundles/finance.tar.gz", reload.BundleOptions{
		Poll:   30 * time.Millisecond,
		Verify: compile.VerifyOptions{PublicKey: keys.public},
	})
	require.NoError(t, err)
	d, err := src.Load(t.Context()) // the first download, as serve does at start
	require.NoError(t, err)
	rev, err := build(t.Context(), d)
	require.NoError(t, err)
	f.holder.Store(rev)
	require.EqualValues(t, 1, bs.full.Load())

	r := f.reloader(src, reload.WithDebounce(10*time.Millisecond))
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Unchanged: 304s, no download, no rebuild.
	require.Eventually(t, func() bool { return bs.notChanged.Load() >= 3 }, 5*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 1, bs.full.Load())
	require.Equal(t, 0, f.count(reload.ResultOK))
	require.Same(t, rev, f.holder.Load())

	// Changed: downloaded and swapped in.
	bs.set(second)
	require.Eventually(t, func() bool { return has(f.holder.Load(), "status-check") }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, f.count(reload.ResultOK))
	good := f.holder.Load()

	// Unsigned, then tampered: refused, the last good keeps serving.
	for _, bad := range [][]byte{unsigned, tampered} {
		before := f.count(reload.ResultRejected)
		bs.set(bad)
		require.Eventually(t, func() bool { return f.count(reload.ResultRejected) > before }, 5*time.Second, 10*time.Millisecond)
		require.Same(t, good, f.holder.Load())
	}
	require.Equal(t, 1, f.count(reload.ResultOK))
	require.NotEmpty(t, f.logs.FilterMessageSnippet("reload rejected").All())

	// A good bundle again is taken.
	bs.set(first)
	require.Eventually(t, func() bool { return !has(f.holder.Load(), "status-check") }, 5*time.Second, 10*time.Millisecond)
}

func TestBundleURLAtStart(t *testing.T) {
	keys := rsaKeys(t)
	cfg := finance(t)
	bs := &bundleServer{}
	bs.set(bundleOf(t, cfg, nil))
	srv := httptest.NewServer(bs)
	defer srv.Close()

	src, err := reload.NewBundle(cfg, srv.URL+"/bundles/finance.tar.gz", reload.BundleOptions{Verify: compile.VerifyOptions{PublicKey: keys.public}})
	require.NoError(t, err)
	_, err = src.Load(t.Context())
	require.ErrorContains(t, err, "bundle "+srv.URL+"/bundles/finance.tar.gz")
	require.ErrorContains(t, err, "signatures")

	src, err = reload.NewBundle(cfg, srv.URL+"/nothing-here", reload.BundleOptions{})
	require.NoError(t, err)
	_, err = src.Load(t.Context())
	require.ErrorContains(t, err, "Not Found")

	_, err = reload.NewBundle(cfg, "http://", reload.BundleOptions{})
	require.Error(t, err)
}
