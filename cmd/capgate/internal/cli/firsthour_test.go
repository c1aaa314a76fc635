package cli_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/test/testutil"
)

// TestValidateChecksWhatServeReads: validate fails on every file serve
// would refuse, with the message serve gives.
func TestValidateChecksWhatServeReads(t *testing.T) {
	cases := []struct {
		name string
		edit func(t *testing.T, cfg string)
		want string
	}{
		{"JWKS not JSON", func(t *testing.T, cfg string) {
			testutil.WriteFile(t, cfg, "keys/demo.jwks.json", "not json at all\n")
		}, "auth.issuers[0].jwks_file: ./keys/demo.jwks.json: parse JWKS:"},
		{"JWKS file is the PEM private key", func(t *testing.T, cfg string) {
			testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
				return strings.Replace(s, "jwks_file: ./keys/demo.jwks.json", "jwks_file: ./keys/demo-es256.key.pem", 1)
			})
		}, "auth.issuers[0].jwks_file: ./keys/demo-es256.key.pem: parse JWKS: this is a PEM private key, not a JWKS"},
		{"JWKS without usable keys", func(t *testing.T, cfg string) {
			testutil.WriteFile(t, cfg, "keys/demo.jwks.json", `{"keys":[{"kty":"oct","kid":"k","k":"c2VjcmV0"}]}`)
		}, "parse JWKS: no usable signature verification key"},
		{"signing key not a key", func(t *testing.T, cfg string) {
			testutil.WriteFile(t, cfg, "keys/handler.key.pem", "nope\n")
			testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
				return s + "identity:\n  signing_key_file: ./keys/handler.key.pem\n"
			})
		}, "identity.signing_key_file: signing key: no PEM private key found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testutil.CopyFinance(t)
			tc.edit(t, cfg)
			r := run(t, "validate", "--config", cfg)
			require.Equal(t, cli.ExitCheck, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			require.Contains(t, r.stdout, tc.want)

			// serve refuses it with the same message.
			s := run(t, "serve", "--config", cfg)
			require.Equal(t, cli.ExitUsage, s.code, "stdout: %s\nstderr: %s", s.stdout, s.stderr)
			require.Contains(t, s.stderr+s.stdout, tc.want)
		})
	}
}

func TestValidateReportsConfigAndManifestProblemsAtOnce(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "store: memory", "store: memory\nfrobnicate: true")
	})
	testutil.EditFile(t, cfg, "capabilities/lookup-invoice.yaml", func(s string) string {
		return replaceOnce(t, s, "state: ga", "state: shipping")
	})
	r := run(t, "validate", "--config", cfg)
	require.Equal(t, cli.ExitCheck, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "frobnicate: unknown field", "the config problem")
	require.Contains(t, r.stdout, "lookup-invoice.yaml", "and the manifest problem, in the same run")
	require.Contains(t, r.stdout, "shipping")
}

func TestValidateWarnsOfAScopeNothingGrants(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capabilities/forecast-cashflow.yaml", func(s string) string {
		return replaceOnce(t, s, "requires_scopes: [forecast.read]", "requires_scopes: [forecast.raed]")
	})
	r := run(t, "validate", "--config", cfg)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, `warning: `+filepath.Join(filepath.Dir(cfg), "capabilities", "forecast-cashflow.yaml")+`:14: requires_scopes: scope "forecast.raed" is required by forecast-cashflow only and granted by nothing the config knows; did you mean forecast.read?`)
	// --strict, as CI runs it, fails on the warning.
	r = run(t, "validate", "--strict", "--config", cfg)
	require.Equal(t, cli.ExitCheck, r.code, r.stderr)
	require.Contains(t, r.stderr, "forecast.raed")
	require.Contains(t, r.stderr, "1 warning(s), failing as --strict asks")

	// Listed in auth.known_scopes: no warning.
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "  known_scopes: [", "  known_scopes: [forecast.raed, ")
	})
	r = run(t, "validate", "--config", cfg)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.NotContains(t, r.stderr, "forecast.raed")

	// The example itself is quiet, and passes --strict.
	r = run(t, "validate")
	require.NotContains(t, r.stderr, "warning")
	r = run(t, "validate", "--strict")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
}

// A deprecated spelling is a warning with file:line that names the new
// one; validate passes, validate --strict fails. A misspelt enforced limit
// is an error.
func TestValidateEnforcedLimitSpellings(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capabilities/apply-remittance.yaml", func(s string) string {
		return replaceOnce(t, s, "enforced_limits: {max_body_bytes: 65536, max_parts: 4}\nlimits: {cost_class: low}", "limits: {max_body_bytes: 65536, max_parts: 4, cost_class: low}")
	})
	r := run(t, "validate", "--config", cfg)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	file := filepath.Join(filepath.Dir(cfg), "capabilities", "apply-remittance.yaml")
	require.Contains(t, r.stderr, "warning: "+file+":30: limits.max_parts: deprecated spelling: capgate enforces max_parts, now written under enforced_limits (enforced_limits: {max_parts: 4}); it is still enforced")
	r = run(t, "validate", "--strict", "--config", cfg)
	require.Equal(t, cli.ExitCheck, r.code, r.stderr)

	testutil.EditFile(t, cfg, "capabilities/apply-remittance.yaml", func(s string) string {
		return replaceOnce(t, s, "max_parts: 4", "max_part: 4")
	})
	r = run(t, "validate", "--config", cfg)
	require.Equal(t, cli.ExitCheck, r.code, r.stderr)
	require.Equal(t, file+":30: limits.max_part: not a limit capgate enforces; did you mean enforced_limits.max_parts? (a limit for the handler to enforce needs a name that is not a misspelling of one capgate enforces)\n", r.stdout)
}

// A misspelt field is one problem at its line, with the field it means.
func TestValidateMisspeltFieldIsOneProblem(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capabilities/reconcile-invoice.yaml", func(s string) string {
		return replaceOnce(t, s, "visibility: extended", "visiblity: extended")
	})
	r := run(t, "validate", "--config", cfg)
	require.Equal(t, cli.ExitCheck, r.code, r.stderr)
	require.Equal(t, filepath.Join(filepath.Dir(cfg), "capabilities", "reconcile-invoice.yaml")+":3: visiblity: unknown field; did you mean visibility?\n", r.stdout)
	require.Contains(t, r.stderr, "1 problem(s) found")
}

func TestValidateYAMLSyntaxErrorNamesTheLine(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "  scopes_claim: scope", " scopes_claim: scope")
	})
	b, err := os.ReadFile(cfg)
	require.NoError(t, err)
	line := 1 + strings.Count(string(b[:strings.Index(string(b), " scopes_claim")]), "\n")
	r := run(t, "validate", "--config", cfg)
	require.Equal(t, cli.ExitCheck, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "capgate.yaml:"+strconv.Itoa(line)+": syntax error:")
	require.Contains(t, r.stdout, "indentation")
}

// TestKeysGenerateAndToken: a deployment makes its own key, trusts its
// JWKS, and mints tokens with it that its verifier accepts.
func TestKeysGenerateAndToken(t *testing.T) {
	for _, alg := range []string{"ES256", "RS256"} {
		t.Run(alg, func(t *testing.T) {
			cfg := testutil.CopyFinance(t)
			dir := filepath.Join(filepath.Dir(cfg), "mykeys")
			r := run(t, "keys", "generate", "--alg", alg, "--kid", "k1", "--out", dir)
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			require.Contains(t, r.stdout, "kid k1")
			st, err := os.Stat(filepath.Join(dir, "signing.key.pem"))
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the private key is not world-readable")

			// A second run does not overwrite the key.
			r = run(t, "keys", "generate", "--out", dir)
			require.Equal(t, cli.ExitUsage, r.code)
			require.Contains(t, r.stderr, "not overwriting")

			testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
				s = replaceOnce(t, s, "issuer: https://idp.example.com", "issuer: https://idp.mine.example")
				s = replaceOnce(t, s, "audiences: [finance-agent]", "audiences: [mine]")
				return replaceOnce(t, s, "jwks_file: ./keys/demo.jwks.json", "jwks_file: ./mykeys/jwks.json")
			})
			r = run(t, "token", "--config", cfg, "--key", filepath.Join(dir, "signing.key.pem"), "--kid", "k1",
				"--issuer", "https://idp.mine.example", "--aud", "mine", "--sub", "me", "--scope", "recon.run,forecast.read")
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			require.NotContains(t, r.stderr, "DEMO")

			c, err := config.Load(cfg)
			require.NoError(t, err)
			v, err := identity.NewVerifier(t.Context(), c.Auth, c.ReadFile)
			require.NoError(t, err)
			p, err := v.Verify(t.Context(), "Bearer "+strings.TrimSpace(r.stdout))
			require.NoError(t, err)
			require.Equal(t, "me", p.Subject)
			require.ElementsMatch(t, []string{"recon.run", "forecast.read"}, p.Scopes, "--scope a,b is two scopes")

			// The demo key for this config: said plainly.
			r = run(t, "token", "--config", cfg)
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			require.Contains(t, r.stderr, `the config's issuers do not trust the demo key: ./mykeys/jwks.json has no key "demo-rs256"`)
		})
	}
}

// Without --kid, keys generate and token --key both use the key's RFC 7638
// thumbprint, so the token names a key the generated JWKS holds.
func TestTokenKidDefaultsToThumbprint(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	dir := filepath.Join(filepath.Dir(cfg), "mykeys")
	r := run(t, "keys", "generate", "--out", dir)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "jwks_file: ./keys/demo.jwks.json", "jwks_file: ./mykeys/jwks.json")
	})
	r = run(t, "token", "--config", cfg, "--key", filepath.Join(dir, "signing.key.pem"), "--sub", "me")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	c, err := config.Load(cfg)
	require.NoError(t, err)
	v, err := identity.NewVerifier(t.Context(), c.Auth, c.ReadFile)
	require.NoError(t, err)
	p, err := v.Verify(t.Context(), "Bearer "+strings.TrimSpace(r.stdout))
	require.NoError(t, err)
	require.Equal(t, "me", p.Subject)
}

func TestTokenScopeCommas(t *testing.T) {
	d := testutil.LoadDeployment(t, "")
	v, err := identity.NewVerifier(t.Context(), d.Config.Auth, d.Config.ReadFile)
	require.NoError(t, err)
	for _, scope := range []string{"recon.run,a2a.preview", "recon.run, a2a.preview", "recon.run a2a.preview"} {
		r := run(t, "token", "--scope", scope)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.NotContains(t, r.stderr, "does not trust", "the example trusts its demo key")
		p, err := v.Verify(t.Context(), "Bearer "+strings.TrimSpace(r.stdout))
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"recon.run", "a2a.preview"}, p.Scopes, scope)
	}
}

func TestRouteWithoutClaimsHints(t *testing.T) {
	r := run(t, "route", "show me invoice INV-1")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "hint: routed as an anonymous caller (no --claims)")

	claims := writeClaims(t, `{"sub":"partner-1"}`)
	r = run(t, "route", "--claims", claims, "show me invoice INV-1")
	require.NotContains(t, r.stdout, "hint:")
}
