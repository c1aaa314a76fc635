package compile_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/manifest"
)

type keyPair struct{ private, public []byte }

func rsaKeys(t *testing.T) keyPair {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return pemPair(t, k, &k.PublicKey)
}

func ecKeys(t *testing.T) keyPair {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return pemPair(t, k, &k.PublicKey)
}

func pemPair(t *testing.T, private, public any) keyPair {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(private)
	require.NoError(t, err)
	pub, err := x509.MarshalPKIXPublicKey(public)
	require.NoError(t, err)
	return keyPair{
		private: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		public:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
	}
}

func buildFixture(t *testing.T, extra map[string]string) *compile.Snapshot {
	t.Helper()
	s, err := compile.Build(compiletest.Registry(), compiletest.Auth(), extra)
	require.NoError(t, err)
	return s
}

func writeBundle(t *testing.T, s *compile.Snapshot, opts compile.BundleOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, compile.WriteBundle(&buf, s, opts))
	return buf.Bytes()
}

// untar returns the bundle's files by name, in archive order.
func untar(t *testing.T, b []byte) (names []string, files map[string][]byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	files = map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, files
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		names = append(names, h.Name)
		files[h.Name] = body
	}
}

// retar writes files back as a tar.gz in the given order.
func retar(t *testing.T, names []string, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}))
		_, err := tw.Write(files[n])
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func TestWriteBundleLayout(t *testing.T) {
	s := buildFixture(t, map[string]string{"sec": denySec})
	raw := writeBundle(t, s, compile.BundleOptions{})

	names, files := untar(t, raw)
	slices.Sort(names)
	require.Equal(t, []string{"/.manifest", "/capgate/authz/authz.rego", "/data.json", "/extra/sec.rego"}, names)

	// What `opa inspect` / `opa run --bundle` read: OPA's own reader.
	b, err := bundle.NewReader(bytes.NewReader(raw)).Read()
	require.NoError(t, err)
	require.Equal(t, s.Revision, b.Manifest.Revision)
	require.NotNil(t, b.Manifest.Roots)
	require.Equal(t, []string{"capgate"}, *b.Manifest.Roots)
	require.NotNil(t, b.Manifest.RegoVersion)
	require.Equal(t, 1, *b.Manifest.RegoVersion)
	require.Empty(t, b.Signatures.Signatures)

	doc, ok := b.Data["capgate"].(map[string]any)
	require.True(t, ok, "data.json holds the capgate document")
	require.ElementsMatch(t, []string{"capabilities", "profiles", "settings", "registry"}, keys(doc))
	reg, ok := doc["registry"].(map[string]any)
	require.True(t, ok)
	require.Len(t, reg, s.Registry.Len())
	lookup, ok := reg["lookup-invoice"].(map[string]any)
	require.True(t, ok)
	require.Equal(t, "finance-agents-team", lookup["owner"])
	require.Contains(t, lookup, "skill")

	var modPaths []string
	for _, m := range b.Modules {
		modPaths = append(modPaths, m.Path)
		require.Equal(t, s.Modules[strings.TrimPrefix(m.Path, "/")], string(m.Raw))
	}
	require.ElementsMatch(t, []string{"/capgate/authz/authz.rego", "/extra/sec.rego"}, modPaths)

	var manifestDoc map[string]any
	require.NoError(t, json.Unmarshal(files["/.manifest"], &manifestDoc))
	require.Equal(t, s.Revision, manifestDoc["revision"])
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestReadBundleRoundTrip(t *testing.T) {
	for _, extra := range []map[string]string{nil, {"sec": denySec}} {
		s := buildFixture(t, extra)
		got, err := compile.ReadBundle(bytes.NewReader(writeBundle(t, s, compile.BundleOptions{})), compile.VerifyOptions{})
		require.NoError(t, err)
		require.Equal(t, s.Revision, got.Revision)
		require.Equal(t, s.Modules, got.Modules)
		require.Equal(t, s.Settings, got.Settings)
		require.Equal(t, s.SubjectSensitive(), got.SubjectSensitive())
		want, err := s.Data()
		require.NoError(t, err)
		have, err := got.Data()
		require.NoError(t, err)
		dataWant, err := json.Marshal(want)
		require.NoError(t, err)
		dataGot, err := json.Marshal(have)
		require.NoError(t, err)
		require.JSONEq(t, string(dataWant), string(dataGot))
		require.Equal(t, s.Registry.Len(), got.Registry.Len())
		for i, c := range s.Registry.All() {
			g := got.Registry.All()[i]
			require.Equal(t, c.ID, g.ID)
			require.Equal(t, c.Skill.Name, g.Skill.Name)
			require.Equal(t, c.Skill.InputModes, g.Skill.InputModes)
			require.Equal(t, c.Tenants, g.Tenants)
			require.Equal(t, c.Handler, g.Handler)
			require.Equal(t, c.Owner, g.Owner)
		}
		rc, ok := got.Registry.Get("reconcile-invoice")
		require.True(t, ok)
		require.EqualValues(t, 200, rc.Limits["max_pdf_pages"])
	}
}

func TestSignedBundle(t *testing.T) {
	rsaK, ecK, otherK := rsaKeys(t), ecKeys(t), rsaKeys(t)
	s := buildFixture(t, nil)

	signedRSA := writeBundle(t, s, compile.BundleOptions{SigningKey: rsaK.private})
	signedEC := writeBundle(t, s, compile.BundleOptions{SigningKey: ecK.private, SigningAlg: "ES256", KeyID: "capgate-ec"})
	unsigned := writeBundle(t, s, compile.BundleOptions{})

	names, files := untar(t, signedRSA)
	require.Contains(t, names, "/.signatures.json")
	tamperedFiles := map[string][]byte{}
	for n, b := range files {
		tamperedFiles[n] = b
	}
	tamperedFiles["/data.json"] = bytes.Replace(files["/data.json"], []byte(`"recon.run"`), []byte(`"recon.rux"`), 1)
	require.NotEqual(t, files["/data.json"], tamperedFiles["/data.json"])
	tampered := retar(t, names, tamperedFiles)
	uNames, uFiles := untar(t, unsigned)
	uFiles["/capgate/authz/authz.rego"] = append(bytes.Clone(uFiles["/capgate/authz/authz.rego"]), "\n# edited\n"...)
	tamperedPolicy := retar(t, uNames, uFiles)
	repacked := retar(t, names, files)

	rsaVerify := compile.VerifyOptions{PublicKey: rsaK.public}
	tests := []struct {
		name    string
		bundle  []byte
		opts    compile.VerifyOptions
		wantErr string
	}{
		{name: "RS256 verifies", bundle: signedRSA, opts: rsaVerify},
		{name: "re-tarred unchanged still verifies", bundle: repacked, opts: rsaVerify},
		{name: "ES256 with key id verifies", bundle: signedEC, opts: compile.VerifyOptions{PublicKey: ecK.public, Alg: "ES256", KeyID: "capgate-ec"}},
		{name: "signed, read without a key", bundle: signedRSA},
		{name: "unsigned refused when a key is given", bundle: unsigned, opts: rsaVerify, wantErr: "missing .signatures.json"},
		{name: "tampered data refused", bundle: tampered, opts: rsaVerify, wantErr: "digest mismatch"},
		{name: "tampered data refused without a key", bundle: tampered, wantErr: "differs from the document"},
		{name: "edited policy refused without a key", bundle: tamperedPolicy, wantErr: "does not match the manifest revision"},
		{name: "wrong key refused", bundle: signedRSA, opts: compile.VerifyOptions{PublicKey: otherK.public}, wantErr: "verify JWT signature"},
		{name: "wrong key id refused", bundle: signedEC, opts: compile.VerifyOptions{PublicKey: ecK.public, Alg: "ES256"}, wantErr: "key corresponding to ID capgate-ec not found"},
		{name: "symmetric algorithm refused", bundle: signedRSA, opts: compile.VerifyOptions{PublicKey: rsaK.public, Alg: "HS256"}, wantErr: "verification algorithm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := compile.ReadBundle(bytes.NewReader(tt.bundle), tt.opts)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, s.Revision, got.Revision)
		})
	}

	// What `opa run --verification-key pub.pem` does: OPA's reader with the
	// default key id "default".
	t.Run("OPA reader verifies", func(t *testing.T) {
		vc := bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{
			"default": {Key: string(rsaK.public), Algorithm: "RS256"},
		}, "", "", nil)
		b, err := bundle.NewReader(bytes.NewReader(signedRSA)).WithBundleVerificationConfig(vc).Read()
		require.NoError(t, err)
		require.Equal(t, s.Revision, b.Manifest.Revision)
	})
}

func TestWriteBundleRefuses(t *testing.T) {
	s := buildFixture(t, nil)
	tests := []struct {
		name    string
		opts    compile.BundleOptions
		wantErr string
	}{
		{name: "key is a file name, not PEM", opts: compile.BundleOptions{SigningKey: []byte("/etc/passwd")}, wantErr: "not PEM"},
		{name: "symmetric algorithm", opts: compile.BundleOptions{SigningKey: []byte("-----BEGIN x"), SigningAlg: "HS256"}, wantErr: "signing algorithm"},
		{name: "broken PEM", opts: compile.BundleOptions{SigningKey: []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")}, wantErr: "sign"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.ErrorContains(t, compile.WriteBundle(&buf, s, tt.opts), tt.wantErr)
		})
	}
}

// TestReadBundleDataSchemas: a bundle carries skill.data_schemas, compiled
// again when it is read (wire_internal_test: one that does not compile is
// refused).
func TestReadBundleDataSchemas(t *testing.T) {
	schema, err := manifest.CompileDataSchema(map[string]any{
		"type": "object", "required": []any{"invoice_id"},
		"properties": map[string]any{"invoice_id": map[string]any{"type": "string", "pattern": "^INV-[0-9]+$"}},
	})
	require.NoError(t, err)
	caps := compiletest.Capabilities()
	for i := range caps {
		if caps[i].ID == "lookup-invoice" {
			caps[i].Skill.DataSchemas = []manifest.DataSchema{schema}
		}
	}
	s, err := compile.Build(manifest.NewRegistry(caps), compiletest.Auth(), nil)
	require.NoError(t, err)
	plain := buildFixture(t, nil)
	require.NotEqual(t, plain.Revision, s.Revision, "the schemas are part of the revision")

	got, err := compile.ReadBundle(bytes.NewReader(writeBundle(t, s, compile.BundleOptions{})), compile.VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, s.Revision, got.Revision)
	c, ok := got.Registry.Get("lookup-invoice")
	require.True(t, ok)
	require.Len(t, c.Skill.DataSchemas, 1)
	require.True(t, c.Skill.DataSchemas[0].Matches(map[string]any{"invoice_id": "INV-7"}))
	require.False(t, c.Skill.DataSchemas[0].Matches(map[string]any{"invoice_id": "7"}))
}
