// Package testutil starts capgate in-process for end-to-end tests, mints demo
// tokens with the finance example's demo keys and builds official a2a-go
// clients pointed at the running gateway.
//
// A typical test:
//
//	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))   // embedded finance example
//	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
//	c := srv.Client(t, a2a.TransportProtocolJSONRPC, testutil.Bearer(tok))
//	card, err := c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
//
// Everything is real: the server is sidecar/server.Run listening on
// 127.0.0.1:0, tokens are RS256/ES256 JWTs the gateway verifies against the
// example's JWKS, and decision-log lines are captured with zap's observer.
package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/settings"
)

// Identity settings of the finance example (manifests/finance/capgate.yaml).
const (
	Issuer       = "https://idp.example.com"
	Audience     = "finance-agent"
	ScopesClaim  = "scope"
	TenantClaim  = "tenant"
	PreviewScope = "a2a.preview"
	// TraceExtension is the extension the finance example declares (required: false).
	TraceExtension = "https://example.com/ext/trace/v1"
)

// Capability ids of the finance example, by where they may appear.
var (
	// PublicSkills are the skills of the public card, in card order.
	PublicSkills = []string{"extract-invoice-fields", "lookup-invoice", "lookup-invoice-v1"}
	// HiddenSkills never appear in the public card.
	HiddenSkills = []string{"reconcile-invoice", "forecast-cashflow", "purge-invoice-cache", "reconcile-invoice-v0", "apply-remittance"}
)

// CopyFinance copies the embedded finance example (config, manifests, demo
// keys) into a fresh t.TempDir and returns the path of its capgate.yaml. Tests
// edit the copy (see EditFile, RemoveFile) and load it with LoadDeployment.
func CopyFinance(t testing.TB) string {
	t.Helper()
	sub, err := fsSub()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, sub))
	return filepath.Join(dir, "capgate.yaml")
}

// EditFile rewrites the file at path (relative to the directory of cfgPath,
// or absolute) with edit applied to its content.
func EditFile(t testing.TB, cfgPath, path string, edit func(string) string) {
	t.Helper()
	p := resolve(cfgPath, path)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, []byte(edit(string(b))), 0o644))
}

// WriteFile writes content to path relative to the directory of cfgPath.
func WriteFile(t testing.TB, cfgPath, path, content string) {
	t.Helper()
	p := resolve(cfgPath, path)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// RemoveFile removes path relative to the directory of cfgPath.
func RemoveFile(t testing.TB, cfgPath, path string) {
	t.Helper()
	require.NoError(t, os.Remove(resolve(cfgPath, path)))
}

func resolve(cfgPath, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(filepath.Dir(cfgPath), path)
}

// LoadDeployment loads the deployment at cfgPath ("" for the embedded finance
// example) and fails the test on any problem. Every call returns a fresh
// deployment that the caller may modify before Start.
func LoadDeployment(t testing.TB, cfgPath string) *deployment.Deployment {
	t.Helper()
	d, err := deployment.Load(cfgPath, settings.Checks()...)
	require.NoError(t, err, "load deployment %q", cfgPath)
	return d
}

// fsSub is the finance example folder of the embedded manifests.
func fsSub() (fs.FS, error) { return fs.Sub(manifests.FS, "finance") }
