package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/test/ci"
)

var (
	financeDir          = filepath.Join("..", "..", "..", "..", "manifests", "finance")
	financeExpectations = filepath.Join(financeDir, "access-expectations.yaml")
)

// The finance example's expectations hold on the example itself: CI runs
// them on every change, as a security team would.
func TestFinanceAccessExpectations(t *testing.T) {
	r := run(t, "access", "check", "--expect", financeExpectations, "--config", filepath.Join(financeDir, "capgate.yaml"))
	require.Equal(t, cli.ExitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "7 expectations, 7 held, 0 failed")
	require.NotContains(t, r.stdout, "FAIL")

	r = run(t, "access", "check", "--expect", financeExpectations, "--json")
	require.Equal(t, cli.ExitOK, r.code, "the embedded default is the finance example: %s", r.stderr)
	var out struct {
		Failed       int
		Expectations []struct {
			Name   string
			Checks int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Zero(t, out.Failed)
	require.Len(t, out.Expectations, 7)
	for _, e := range out.Expectations {
		require.Positive(t, e.Checks, "expectation %q checked nothing", e.Name)
	}
}

// editedFinance copies the finance example and rewrites one of its
// manifests (each edit must match exactly once).
func editedFinance(t *testing.T, manifest string, edits ...[2]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "finance")
	copyTree(t, financeDir, dir)
	p := filepath.Join(dir, "capabilities", manifest)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	s := string(b)
	for _, e := range edits {
		s = replaceOnce(t, s, e[0], e[1])
	}
	require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
	return dir
}

// A change that breaks a guarantee fails the check, naming the
// expectation, the cell and the rule that broke it.
func TestAccessCheckFailsOnABrokenExpectation(t *testing.T) {
	tests := map[string]struct {
		manifest string
		edits    [][2]string
		want     []string
	}{
		"a destructive skill needs no scope": {
			manifest: "purge-invoice-cache.yaml",
			edits:    [][2]string{{"requires_scopes: [ops.admin]", "requires_scopes: []"}},
			want: []string{
				"FAIL  no caller without ops.admin runs a destructive skill",
				"employee × purge-invoice-cache: must be refused, is entitled-hidden (granted by auth.authenticated scope.none_required state.ga tenant.any)",
			},
		},
		"a destructive skill routed automatically": {
			manifest: "purge-invoice-cache.yaml",
			edits:    [][2]string{{"routing: {mode: explicit}", "routing: {mode: auto}"}},
			want: []string{
				"FAIL  a destructive skill is never picked by the router alone",
				"purge-invoice-cache: must be routed at least confirm, is routed auto (routing.mode auto in ",
			},
		},
		"payments made public": {
			manifest: "apply-remittance.yaml",
			edits:    [][2]string{{"visibility: extended", "visibility: public"}},
			want: []string{
				"FAIL  payments are applied only with payments.apply",
				"anonymous × apply-remittance: must be hidden, is visible (granted by state.ga visibility.public)",
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := editedFinance(t, tt.manifest, tt.edits...)
			r := run(t, "access", "check", "--expect", filepath.Join(dir, "access-expectations.yaml"), "--config", filepath.Join(dir, "capgate.yaml"))
			require.Equal(t, cli.ExitCheck, r.code, r.stdout+r.stderr)
			for _, w := range tt.want {
				require.Contains(t, r.stdout, w)
			}
			require.Contains(t, r.stderr, "expectation(s) failed")
		})
	}
}

func TestAccessCheckInputErrors(t *testing.T) {
	write := func(t *testing.T, doc string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "expect.yaml")
		require.NoError(t, os.WriteFile(p, []byte(doc), 0o644))
		return p
	}
	tests := map[string]struct{ doc, want string }{
		"misspelt key":         {"expectations:\n  - name: a\n    capabilites: {tags: [x]}\n    must: [refused]\n", "expect.yaml:3: expectations[0].capabilites: unknown field; did you mean capabilities?"},
		"misspelt requirement": {"expectations:\n  - name: a\n    must: [refuse]\n", `expect.yaml:3: expectations[0].must[0]: "refuse" is not one of visible, hidden, entitled, refused; did you mean refused?`},
		"contradiction":        {"expectations:\n  - name: a\n    must: [visible, hidden]\n", "expectations[0].must: visible and hidden contradict each other"},
		"states nothing":       {"expectations:\n  - name: a\n", "expectations[0]: states nothing: give must"},
		"no name":              {"expectations:\n  - must: [refused]\n", "expectations[0].name: required"},
		"routing":              {"expectations:\n  - name: a\n    routing_at_least: confirmed\n", `"confirmed" is not one of confirm, explicit; did you mean confirm?`},
		"unknown class":        {"expectations:\n  - name: a\n    callers: {classes: [partner-acme]}\n    must: [refused]\n", `unknown caller class "partner-acme"`},
		"unknown capability":   {"expectations:\n  - name: a\n    capabilities: {ids: [purge-invoice-cach]}\n    must: [refused]\n", `unknown capability "purge-invoice-cach"; did you mean purge-invoice-cache?`},
		"claims and classes":   {"expectations:\n  - name: a\n    callers: {classes: [anonymous], claims: {sub: x}}\n    must: [refused]\n", "claims: names one caller: leave out the other criteria"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := run(t, "access", "check", "--expect", write(t, tt.doc))
			require.Equal(t, cli.ExitUsage, r.code, r.stdout+r.stderr)
			require.Contains(t, r.stderr, tt.want)
		})
	}
	r := run(t, "access", "check")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "--expect is required")

	// An expectation whose selectors match nothing fails (exit 1): a
	// guarantee about nothing would hold for ever, typo or not.
	r = run(t, "access", "check", "--expect", write(t, "expectations:\n  - name: nothing\n    capabilities: {tags: [destructve]}\n    must: [refused]\n"))
	require.Equal(t, cli.ExitCheck, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "selects no capability")
}

// A git: source is checked as of that revision, like access diff's sides.
func TestAccessCheckGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if ci.Required() {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	}
	broken := editedFinance(t, "purge-invoice-cache.yaml", [2]string{"requires_scopes: [ops.admin]", "requires_scopes: []"})
	copyTree(t, financeDir, filepath.Join(repo, "finance"))
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "good")
	require.NoError(t, os.RemoveAll(filepath.Join(repo, "finance")))
	copyTree(t, broken, filepath.Join(repo, "finance"))
	git("add", "-A")
	git("commit", "-qm", "broken")

	expect, err := filepath.Abs(financeExpectations)
	require.NoError(t, err)
	t.Chdir(repo)
	r := run(t, "access", "check", "--expect", expect, "--config", "git:HEAD~1:finance/capgate.yaml")
	require.Equal(t, cli.ExitOK, r.code, r.stdout+r.stderr)
	r = run(t, "access", "check", "--expect", expect, "--config", "git:HEAD:finance/capgate.yaml")
	require.Equal(t, cli.ExitCheck, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "FAIL  no caller without ops.admin runs a destructive skill")
}

// access diff fails on a loosened guard as on a gain: a destructive skill
// routed automatically gains nobody access, and is still a risk.
func TestAccessDiffFailsOnALoosenedGuard(t *testing.T) {
	dir := editedFinance(t, "purge-invoice-cache.yaml", [2]string{"routing: {mode: explicit}", "routing: {mode: auto}"})
	r := run(t, "access", "diff", "--base", filepath.Join(financeDir, "capgate.yaml"), "--head", filepath.Join(dir, "capgate.yaml"))
	require.Equal(t, cli.ExitCheck, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "0 gained, 0 lost, 1 guard loosened")
	require.Contains(t, r.stdout, "purge-invoice-cache: routing explicit → auto (the router may now pick it alone; runs, internal, some callers)")
	require.Contains(t, r.stderr, "0 cell(s) gained access, 1 guard(s) of how a skill runs loosened")
	r = run(t, "access", "diff", "--base", filepath.Join(financeDir, "capgate.yaml"), "--head", filepath.Join(dir, "capgate.yaml"), "--allow-gain")
	require.Equal(t, cli.ExitOK, r.code, r.stdout+r.stderr)
}
