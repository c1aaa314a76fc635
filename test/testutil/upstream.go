package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/handler/echo"
	"github.com/capgate/capgate/sidecar/handlerauth"
	"github.com/capgate/capgate/sidecar/identity"
)

// Upstream is the builtin echo served over HTTP on 127.0.0.1 as an upstream a2a-go server
// outside capgate, trusting handler tokens signed with KeyFile for every handler name of the
// deployment it was made for.
type Upstream struct {
	// KeyFile is a PEM P-256 key for identity.signing_key_file.
	KeyFile string
	// URL is the server's base URL, with a trailing slash.
	URL string
}

// NewUpstream starts the upstream echo for d's issuer and handler names; it stops with the test.
func NewUpstream(t testing.TB, d *deployment.Deployment) *Upstream {
	t.Helper()
	return NewUpstreamWrapped(t, d, nil)
}

// NewUpstreamWrapped is NewUpstream with the echo handler wrapped by wrap (nil: as it is), for
// a test that watches what reaches the handler.
func NewUpstreamWrapped(t testing.TB, d *deployment.Deployment, wrap func(http.Handler) http.Handler) *Upstream {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	u := &Upstream{KeyFile: filepath.Join(t.TempDir(), "capgate-signing.pem")}
	require.NoError(t, os.WriteFile(u.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	minter, err := identity.NewMinter(d.Config.Identity.Issuer, key)
	require.NoError(t, err)
	var names []string
	for name := range d.Config.Handlers {
		names = append(names, name)
	}
	slices.Sort(names)
	v, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{
		Issuer: minter.Issuer(), Audience: names[0], Audiences: names[1:], JWKS: minter.JWKS(),
	})
	require.NoError(t, err)
	h := echo.New(v.Verify)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u.URL = srv.URL + "/"
	return u
}

// Use points every handler of d at the upstream and signs d's handler tokens with its key.
func (u *Upstream) Use(d *deployment.Deployment) {
	d.Config.Identity.SigningKeyFile = u.KeyFile
	for name := range d.Config.Handlers {
		d.Config.Handlers[name] = u.URL
	}
}
