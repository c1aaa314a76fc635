package cli_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/test/testutil"
)

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b
}

// TestCardVerify runs `capgate card verify` against a capgate that signs its
// cards with an RSA key: the served card verifies from its URL and from a
// file, the 0.3 card too, and one altered byte or the wrong key set fails.
func TestCardVerify(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	cfg := testutil.CopyFinance(t)
	testutil.WriteFile(t, cfg, "keys/card.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string { return s + "cards: {signing_key_file: keys/card.pem}\n" })
	srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
	jwksURL := srv.AdminURL + "/.well-known/jwks.json"
	cardURL := srv.URL + "/.well-known/agent-card.json"

	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	served := get(t, cardURL)
	cardFile := write("card.json", served)
	jwksFile := write("jwks.json", get(t, jwksURL))
	altered := write("altered.json", []byte(strings.Replace(string(served), "Finance Agent", "Finance Agenu", 1)))
	unsigned := write("unsigned.json", []byte(`{"name":"x"}`))
	otherKeys := write("other.json", []byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"other","use":"sig","alg":"ES256"}]}`))

	cases := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string
	}{
		{"card URL, JWKS URL", []string{"--card", cardURL, "--jwks", jwksURL}, "", cli.ExitOK, "card signature verified"},
		{"0.3 card", []string{"--card", srv.URL + "/.well-known/agent.json", "--jwks", jwksURL}, "", cli.ExitOK, "RS256"},
		{"card file, JWKS file", []string{"--card", cardFile, "--jwks", jwksFile}, "", cli.ExitOK, "signature 0: ok"},
		{"card on stdin", []string{"--card", "-", "--jwks", jwksFile}, string(served), cli.ExitOK, "card signature verified"},
		{"one altered byte", []string{"--card", altered, "--jwks", jwksFile}, "", cli.ExitCheck, "signature does not match the card"},
		{"other key set", []string{"--card", cardFile, "--jwks", otherKeys}, "", cli.ExitCheck, "in the key set"},
		{"unsigned card", []string{"--card", unsigned, "--jwks", jwksFile}, "", cli.ExitCheck, ""},
		{"missing --jwks", []string{"--card", cardFile}, "", cli.ExitUsage, ""},
		{"missing card file", []string{"--card", filepath.Join(dir, "nope.json"), "--jwks", jwksFile}, "", cli.ExitUsage, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runIn(t, tc.stdin, append([]string{"card", "verify"}, tc.args...)...)
			require.Equal(t, tc.code, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			require.Contains(t, r.stdout, tc.stdout)
		})
	}
}
