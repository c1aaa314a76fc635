package jwks_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// A PEM file where a JWKS belongs is named as what it is, not as the JSON
// parser's "invalid character '-' in numeric literal".
func TestParseNamesPEM(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idp"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	ecDER, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	for _, tc := range []struct {
		block *pem.Block
		want  string
	}{
		{&pem.Block{Type: "PRIVATE KEY", Bytes: der}, "this is a PEM private key, not a JWKS"},
		{&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER}, "this is a PEM private key, not a JWKS"},
		{&pem.Block{Type: "CERTIFICATE", Bytes: cert}, "this is a PEM certificate, not a JWKS"},
		{&pem.Block{Type: "PUBLIC KEY", Bytes: pub}, "this is a PEM public key, not a JWKS"},
	} {
		_, _, err := jwks.Parse(pem.EncodeToMemory(tc.block))
		require.ErrorContains(t, err, tc.want, tc.block.Type)
		require.NotContains(t, err.Error(), "numeric literal")
	}
	_, _, err = jwks.Parse([]byte("-----BEGIN PRIVATE KEY-----\ntruncated"))
	require.ErrorContains(t, err, "this is a PEM block, not a JWKS")
}
