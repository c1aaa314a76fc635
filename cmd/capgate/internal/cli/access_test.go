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
)

// The golden deployments of policy/access: head adds a deny module, a
// tenant and a capability, makes a capability public, promotes a preview
// and removes two capabilities.
var (
	accessData = filepath.Join("..", "..", "..", "..", "policy", "access", "testdata")
	baseCfg    = filepath.Join(accessData, "base", "capgate.yaml")
	headCfg    = filepath.Join(accessData, "head", "capgate.yaml")
	callers    = filepath.Join("..", "..", "..", "..", "manifests", "finance", "callers.yaml")
)

func TestAccessMatrix(t *testing.T) {
	t.Run("finance example with its callers file", func(t *testing.T) {
		r := run(t, "access", "matrix", "--callers", callers, "--json")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		var out struct {
			Classes []struct{ Name string }
			Rows    []struct {
				Class string
				Cells []struct{ Capability, Level, Rule string }
			}
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		levels := map[string]string{}
		for _, row := range out.Rows {
			for _, c := range row.Cells {
				levels[row.Class+" "+c.Capability] = c.Level + " " + c.Rule
			}
		}
		require.Len(t, out.Classes, 7)
		require.Equal(t, "entitled auth.authenticated scope.held(recon.run) state.ga tenant.any", levels["partner-acme-recon reconcile-invoice"])
		require.Equal(t, "none scope.missing(recon.run)", levels["partner-globex reconcile-invoice"])
		require.Equal(t, "none state.preview_not_opted_in", levels["treasury forecast-cashflow"])
		require.Contains(t, levels["treasury-preview forecast-cashflow"], "entitled ")
		require.Contains(t, levels["ops-oncall purge-invoice-cache"], "entitled-hidden ")
		require.Contains(t, levels["anonymous lookup-invoice"], "visible ")
	})
	t.Run("derived classes, markdown and HTML", func(t *testing.T) {
		html := filepath.Join(t.TempDir(), "matrix.html")
		r := run(t, "access", "matrix", "--config", headCfg, "--markdown", "--html", html)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "| scopes:recon.run |")
		require.Contains(t, r.stdout, "`deny.sec(incident 42)`", "the deny module in policy_dirs takes part")
		b, err := os.ReadFile(html)
		require.NoError(t, err)
		require.Contains(t, string(b), `data-capability="reconcile-invoice"`)
	})
	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{
			{"access"},
			{"access", "nope"},
			{"access", "matrix", "--json", "--markdown"},
			{"access", "matrix", "--callers", filepath.Join(t.TempDir(), "missing.yaml")},
			{"access", "diff", "--base", baseCfg},
			{"access", "diff", "--base", baseCfg, "--head", "git:-x"},
		} {
			r := run(t, args...)
			require.Equal(t, cli.ExitUsage, r.code, "%v: %s", args, r.stderr)
		}
	})
}

func TestAccessDiff(t *testing.T) {
	t.Run("gains fail the check unless allowed", func(t *testing.T) {
		r := run(t, "access", "diff", "--base", baseCfg, "--head", headCfg)
		require.Equal(t, cli.ExitCheck, r.code, r.stderr)
		require.Contains(t, r.stdout, "12 gained, 23 lost, 6 capabilities and 1 config field changed")
		require.Contains(t, r.stderr, "12 cell(s) gained access")
		r = run(t, "access", "diff", "--base", baseCfg, "--head", headCfg, "--allow-gain", "--markdown")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "**12 gained**")
	})
	t.Run("the reverse change gains what the head lost", func(t *testing.T) {
		r := run(t, "access", "diff", "--base", headCfg, "--head", baseCfg, "--json")
		require.Equal(t, cli.ExitCheck, r.code, r.stderr)
		var out struct {
			Gained, Lost []struct{ Class, Capability string }
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		require.Len(t, out.Gained, 23)
		require.Len(t, out.Lost, 12)
	})
	t.Run("losses alone pass", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "killed")
		copyTree(t, filepath.Join(accessData, "head"), dir)
		kill := "package capgate.deny.kill\n\ndeny contains {\"capability\": \"*\", \"reason\": \"kill switch\"}\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "policies", "kill.rego"), []byte(kill), 0o644))
		r := run(t, "access", "diff", "--base", headCfg, "--head", filepath.Join(dir, "capgate.yaml"))
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "0 gained, 29 lost, 0 capabilities and 1 config field changed")
		require.Contains(t, r.stdout, "deny.kill(kill switch)")
		require.Contains(t, r.stdout, "caused by config: deny module kill added", "the losses name the new module")
	})
	t.Run("a deployment against itself, and against its own bundle", func(t *testing.T) {
		r := run(t, "access", "diff", "--base", headCfg, "--head", headCfg)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "no change in access")
		bundle := filepath.Join(t.TempDir(), "head.tar.gz")
		require.Equal(t, cli.ExitOK, run(t, "compile", "--config", headCfg, "--out", bundle).code)
		r = run(t, "access", "diff", "--base", bundle, "--head", headCfg, "--callers", callers)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "no change in access")
		r = run(t, "access", "diff", "--base", baseCfg, "--head", bundle, "--allow-gain")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "12 gained, 23 lost")
	})
}

// TestAccessDiffGit diffs two commits of a repository made here: the base
// deployment, then the head's files over it.
func TestAccessDiffGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
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
	copyTree(t, filepath.Join(accessData, "base"), filepath.Join(repo, "deploy"))
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "base")
	require.NoError(t, os.RemoveAll(filepath.Join(repo, "deploy")))
	copyTree(t, filepath.Join(accessData, "head"), filepath.Join(repo, "deploy"))
	git("add", "-A")
	git("commit", "-qm", "head")

	t.Chdir(repo)
	r := run(t, "access", "diff", "--base", "git:HEAD~1:deploy/capgate.yaml", "--head", "git:HEAD:deploy/capgate.yaml")
	require.Equal(t, cli.ExitCheck, r.code, r.stderr)
	require.Contains(t, r.stdout, "12 gained, 23 lost, 6 capabilities and 1 config field changed")
	r = run(t, "access", "diff", "--base", "git:HEAD:deploy/capgate.yaml", "--head", "deploy/capgate.yaml")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "no change in access", "the working tree equals HEAD")
	r = run(t, "access", "diff", "--base", "git:no-such-rev:deploy/capgate.yaml", "--head", "deploy/capgate.yaml")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "git archive no-such-rev")
	r = run(t, "access", "diff", "--base", "git:HEAD", "--head", "deploy/capgate.yaml")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "git:HEAD: no path given, and the default capgate.yaml is not at the root of HEAD's tree: "+
		"name the config, git:HEAD:path/to/capgate.yaml (relative to the repository root)")
	r = run(t, "access", "diff", "--base", "git:HEAD:capgate.yaml", "--head", "deploy/capgate.yaml")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "capgate.yaml is not in HEAD's tree: the path is relative to the repository root")
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, os.CopyFS(to, os.DirFS(from)))
}

var widenCfg = filepath.Join(accessData, "widen", "capgate.yaml")

func TestAccessMatrixSelectAndQuietHTML(t *testing.T) {
	t.Run("who can run a capability", func(t *testing.T) {
		r := run(t, "access", "matrix", "--capability", "purge-invoice-cache")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "who can run purge-invoice-cache: scopes:ops.admin, all-scopes, other-tenant, preview, plan:free, plan:free-rate, plan:paid\n")
		require.Contains(t, r.stdout, "who can see purge-invoice-cache but not run it: nobody\n")
		require.Contains(t, r.stdout, "purge-invoice-cache  internal  ga  owner finance-platform-team")
		require.NotContains(t, r.stdout, "lookup-invoice", "only the asked capability")
		require.Contains(t, r.stdout, "generated at: ")
		require.Contains(t, r.stdout, "config: (the embedded finance example)")
	})
	t.Run("what a class can run", func(t *testing.T) {
		r := run(t, "access", "matrix", "--callers", callers, "--caller", "employee", "--json")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		var out struct {
			Rows []struct{ Class string }
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		require.Len(t, out.Rows, 1)
		require.Equal(t, "employee", out.Rows[0].Class)
		r = run(t, "access", "matrix", "--callers", callers, "--caller", "employee")
		require.Contains(t, r.stdout, "what employee can run: extract-invoice-fields, lookup-invoice, lookup-invoice-v1\n")
	})
	t.Run("unknown names list the known ones", func(t *testing.T) {
		r := run(t, "access", "matrix", "--capability", "book-flight")
		require.Equal(t, cli.ExitUsage, r.code)
		require.Contains(t, r.stderr, "unknown capability book-flight (known: apply-remittance, ")
		r = run(t, "access", "matrix", "--callers", callers, "--caller", "authenticated")
		require.Equal(t, cli.ExitUsage, r.code)
		require.Contains(t, r.stderr, "unknown caller class authenticated (known: anonymous, employee, ")
	})
	t.Run("--html writes the file and says only where", func(t *testing.T) {
		html := filepath.Join(t.TempDir(), "m.html")
		r := run(t, "access", "matrix", "--html", html)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Equal(t, "wrote the HTML report to "+html+"\n", r.stdout)
		b, err := os.ReadFile(html)
		require.NoError(t, err)
		require.Contains(t, string(b), "generated at: ")
		d := filepath.Join(t.TempDir(), "d.html")
		r = run(t, "access", "diff", "--base", baseCfg, "--head", headCfg, "--html", d, "--allow-gain")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Equal(t, "wrote the HTML report to "+d+"\n", r.stdout)
	})
}

// TestAccessDiffNamesTheCause is the widening change through the
// CLI: the scope change is named as the cause, first, in every form.
func TestAccessDiffNamesTheCause(t *testing.T) {
	finance := filepath.Join("..", "..", "..", "..", "manifests", "finance", "capgate.yaml")
	for _, form := range []string{"", "--markdown", "--json"} {
		args := []string{"access", "diff", "--base", finance, "--head", widenCfg}
		if form != "" {
			args = append(args, form)
		}
		r := run(t, args...)
		require.Equal(t, cli.ExitCheck, r.code, r.stderr)
		require.Contains(t, r.stdout, "purge-invoice-cache: requires_scopes [ops.admin] → []", form)
		require.Less(t, strings.Index(r.stdout, "purge-invoice-cache (internal"), strings.Index(r.stdout, "apply-remittance (public"), form)
		require.NotContains(t, r.stdout, "auth.issuers", "same issuers on both sides")
	}
}
