package jwks_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/jwks"
)

func keyDoc(t *testing.T, kid string) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	b, err := jwks.MarshalJWKS(jwks.PublicJWK{Key: &k.PublicKey, Alg: "ES256", Kid: kid})
	require.NoError(t, err)
	return b, k
}

func TestFetch(t *testing.T) {
	doc, _ := keyDoc(t, "a")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write(doc)
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat(" ", jwks.MaxBytes+1)))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	b, err := jwks.Fetch(t.Context(), srv.Client(), srv.URL+"/ok")
	require.NoError(t, err)
	set, skipped, err := jwks.Parse(b)
	require.NoError(t, err)
	require.Empty(t, skipped)
	require.True(t, set["a"].Allows("ES256"))
	require.False(t, set["a"].Allows("RS256"))
	require.False(t, set["a"].Allows("HS256"))

	_, err = jwks.Fetch(t.Context(), srv.Client(), srv.URL+"/big")
	require.ErrorContains(t, err, "larger than 1 MiB")
	_, err = jwks.Fetch(t.Context(), srv.Client(), srv.URL+"/missing")
	require.ErrorContains(t, err, "status 404")
}

func TestSameAndSupported(t *testing.T) {
	a, _ := keyDoc(t, "k")
	b, _ := keyDoc(t, "k")
	sa, _, err := jwks.Parse(a)
	require.NoError(t, err)
	sb, _, err := jwks.Parse(b)
	require.NoError(t, err)
	require.True(t, sa["k"].Same(sa["k"]))
	require.False(t, sa["k"].Same(sb["k"]), "same kid, another key")

	for _, alg := range []string{"RS256", "PS512", "ES384", "EdDSA"} {
		require.True(t, jwks.Supported(alg), alg)
	}
	for _, alg := range []string{"none", "HS256", "", "rs256"} {
		require.False(t, jwks.Supported(alg), alg)
	}
}
