package manifests_test

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

func TestDefaultConfigValidates(t *testing.T) {
	cfg, err := config.LoadFS(manifests.FS, manifests.DefaultConfig)
	require.NoError(t, err)
	require.Empty(t, cfg.Warnings())
	require.Equal(t, "Finance Agent", cfg.Agent.Name)

	reg, err := cfg.LoadRegistry()
	require.NoError(t, err)

	want := map[string]struct {
		state      manifest.State
		visibility manifest.Visibility
		scopes     []string
	}{
		"lookup-invoice":         {manifest.StateGA, manifest.VisibilityPublic, []string{}},
		"lookup-invoice-v1":      {manifest.StateDeprecated, manifest.VisibilityPublic, []string{}},
		"extract-invoice-fields": {manifest.StateGA, manifest.VisibilityPublic, []string{}},
		"reconcile-invoice":      {manifest.StateGA, manifest.VisibilityExtended, []string{"recon.run"}},
		"reconcile-invoice-v0":   {manifest.StateRemoved, manifest.VisibilityExtended, []string{"recon.run"}},
		"forecast-cashflow":      {manifest.StatePreview, manifest.VisibilityExtended, []string{"forecast.read"}},
		"purge-invoice-cache":    {manifest.StateGA, manifest.VisibilityInternal, []string{"ops.admin"}},
		"apply-remittance":       {manifest.StateGA, manifest.VisibilityExtended, []string{"payments.apply"}},
	}
	require.Equal(t, len(want), reg.Len())
	for id, w := range want {
		t.Run(id, func(t *testing.T) {
			c, ok := reg.Get(id)
			require.True(t, ok)
			require.Equal(t, w.state, c.State)
			require.Equal(t, w.visibility, c.Visibility)
			require.Equal(t, w.scopes, c.RequiresScopes)
			require.NotEmpty(t, c.Skill.Examples)
			if c.State != manifest.StateRemoved {
				require.Equal(t, "builtin:echo", cfg.Handlers[c.Handler])
			}
		})
	}

	// The reference example: two routable, card-listed capabilities accept PDFs.
	var pdf []string
	for _, c := range reg.All() {
		if c.Routable() && c.Visibility != manifest.VisibilityInternal {
			for _, m := range c.Skill.InputModes {
				if m == "application/pdf" {
					pdf = append(pdf, c.ID)
				}
			}
		}
	}
	require.Equal(t, []string{"extract-invoice-fields", "reconcile-invoice"}, pdf)

	old, _ := reg.Get("reconcile-invoice-v0")
	require.Equal(t, "reconcile-invoice", old.ReplacedBy)
	dep, _ := reg.Get("lookup-invoice-v1")
	require.Equal(t, "lookup-invoice", dep.ReplacedBy)
}

// The demo JWKS carries the public halves of the demo private keys.
func TestDemoKeys(t *testing.T) {
	cfg, err := config.LoadFS(manifests.FS, manifests.DefaultConfig)
	require.NoError(t, err)
	raw, err := cfg.ReadFile(cfg.Auth.Issuers[0].JWKSFile)
	require.NoError(t, err)
	var jwks struct {
		Keys []map[string]string `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(raw, &jwks))
	byKid := map[string]map[string]string{}
	for _, k := range jwks.Keys {
		require.Equal(t, "sig", k["use"])
		byKid[k["kid"]] = k
	}
	require.Equal(t, "RS256", byKid["demo-rs256"]["alg"])
	require.Equal(t, "ES256", byKid["demo-es256"]["alg"])
	require.Equal(t, "P-256", byKid["demo-es256"]["crv"])

	for _, name := range []string{"finance/keys/demo-rs256.key.pem", "finance/keys/demo-es256.key.pem"} {
		t.Run(name, func(t *testing.T) {
			b, err := fs.ReadFile(manifests.FS, name)
			require.NoError(t, err)
			block, _ := pem.Decode(b)
			require.NotNil(t, block)
			require.Equal(t, "PRIVATE KEY", block.Type)
			key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			require.NoError(t, err)
			switch k := key.(type) {
			case *rsa.PrivateKey:
				require.Equal(t, base64.RawURLEncoding.EncodeToString(k.N.Bytes()), byKid["demo-rs256"]["n"])
			case *ecdsa.PrivateKey:
				pub, err := k.PublicKey.ECDH()
				require.NoError(t, err)
				require.Equal(t, base64.RawURLEncoding.EncodeToString(pub.Bytes()[1:33]), byKid["demo-es256"]["x"])
			default:
				t.Fatalf("unexpected key type %T", key)
			}
		})
	}
}

// The same example read from disk resolves its paths against the config file.
func TestDiskConfigMatchesEmbedded(t *testing.T) {
	cfg, err := config.Load("finance/capgate.yaml")
	require.NoError(t, err)
	reg, err := cfg.LoadRegistry()
	require.NoError(t, err)
	c, ok := reg.Get("reconcile-invoice")
	require.True(t, ok)
	require.Equal(t, manifest.Source{File: "finance/capabilities/reconcile-invoice.yaml", Line: 1, ScopesLine: 22}, c.Source)

	embedded, err := config.LoadFS(manifests.FS, manifests.DefaultConfig)
	require.NoError(t, err)
	require.Equal(t, embedded.Agent, cfg.Agent)
	require.Equal(t, embedded.Handlers, cfg.Handlers)
}
