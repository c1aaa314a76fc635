package identity_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/identity"
)

// fuzzVerifier is the finance example's verifier (demo JWKS, RS256 and
// ES256) with its demo signing key, for seeding.
func fuzzVerifier(f *testing.F) (*identity.Verifier, func(kid string, claims map[string]any) string) {
	f.Helper()
	d, err := deployment.Load("")
	if err != nil {
		f.Fatal(err)
	}
	v, err := identity.NewVerifier(context.Background(), d.Config.Auth, d.Config.ReadFile)
	if err != nil {
		f.Fatal(err)
	}
	pem, err := manifests.FS.ReadFile("finance/keys/demo-rs256.key.pem")
	if err != nil {
		f.Fatal(err)
	}
	key, alg, err := identity.LoadSigningKey(pem)
	if err != nil {
		f.Fatal(err)
	}
	sign := func(kid string, claims map[string]any) string {
		tok, err := identity.SignDemoToken(key, alg, kid, claims)
		if err != nil {
			f.Fatal(err)
		}
		return tok
	}
	return v, sign
}

func fuzzClaims() map[string]any {
	now := time.Now()
	return map[string]any{"iss": "https://idp.example.com", "aud": "finance-agent", "sub": "partner-1",
		"scope": "recon.run", "tenant": "acme", "iat": now.Unix(), "exp": now.Add(24 * time.Hour).Unix()}
}

// FuzzVerify: any Authorization header value either verifies as a principal
// with a subject or fails with an error; it never panics, and nothing
// without a valid RS256/ES256 signature of the demo key verifies.
func FuzzVerify(f *testing.F) {
	v, sign := fuzzVerifier(f)
	good := sign("demo-rs256", fuzzClaims())
	for _, s := range []string{
		"", "Bearer", "Bearer ", "Bearer " + good, "bearer " + good, "Bearer  " + good, "Basic dXNlcjpwYXNz",
		"Bearer a.b.c", "Bearer ...", "Bearer " + strings.Repeat("A", 4096),
		"Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
		"Bearer " + good + "," + "Bearer " + good,
		"Bearer " + sign("../../etc/passwd", fuzzClaims()),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, authz string) {
		p, err := v.Verify(t.Context(), authz)
		if err != nil {
			return
		}
		if !p.Authenticated {
			// No credential at all is the anonymous caller; anything else
			// that is not a valid token must be an error.
			if strings.TrimSpace(authz) != "" {
				t.Fatalf("%q: neither an error nor authenticated", authz)
			}
			return
		}
		if p.Subject == "" {
			t.Fatalf("verified without an authenticated subject: %+v", p)
		}
		// Only the seed token (or a byte-equivalent spelling of it) verifies.
		tok := strings.TrimSpace(authz[strings.IndexByte(authz, ' ')+1:])
		parts := strings.Split(tok, ".")
		if len(parts) != 3 || parts[2] == "" {
			t.Fatalf("verified a token without a signature: %q", authz)
		}
	})
}

// FuzzJWTHeader: a token whose header segment is arbitrary bytes (alg, kid,
// typ, crit, jku, x5u... of any shape) signed or not never verifies unless
// the header is exactly a valid RS256 one for a known kid, and never panics.
func FuzzJWTHeader(f *testing.F) {
	v, sign := fuzzVerifier(f)
	good := strings.Split(sign("demo-rs256", fuzzClaims()), ".")
	for _, h := range []string{
		`{"alg":"RS256","kid":"demo-rs256","typ":"JWT"}`,
		`{"alg":"none","kid":"demo-rs256"}`, `{"alg":"HS256","kid":"demo-rs256"}`, `{"alg":"RS256"}`,
		`{"alg":"RS256","kid":{"a":1}}`, `{"alg":"RS256","kid":"x' OR 1=1"}`, `{"alg":"RS256","kid":"../../etc/passwd"}`,
		`{"alg":"RS256","kid":"demo-rs256","jku":"https://evil.example.com/jwks"}`,
		`{"alg":"RS256","kid":"demo-rs256","crit":["exp"]}`, `{"alg":"RS256","alg":"none","kid":"demo-rs256"}`,
		`{"alg":["RS256"]}`, `[]`, `null`, ``, `{`, strings.Repeat(`{"a":`, 1000),
	} {
		f.Add([]byte(h), true)
		f.Add([]byte(h), false)
	}
	f.Fuzz(func(t *testing.T, header []byte, keepSig bool) {
		sig := ""
		if keepSig {
			sig = good[2]
		}
		hdr := base64.RawURLEncoding.EncodeToString(header)
		tok := hdr + "." + good[1] + "." + sig
		_, err := v.Verify(t.Context(), "Bearer "+tok)
		if err == nil && hdr != good[0] {
			// The signature covers the header: another header cannot verify
			// with the original signature.
			t.Fatalf("a token with header %q verified", header)
		}
	})
}
