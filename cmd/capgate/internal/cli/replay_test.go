package cli_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/test/ci"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/test/testutil"
)

// replayFlip is a flip of `access replay --json`, as asserted.
type replayFlip struct {
	Change     string `json:"change"`
	Capability string `json:"capability"`
	Operation  string `json:"operation"`
	Caller     struct {
		Issuer  string   `json:"issuer"`
		Subject string   `json:"subject"`
		Tenant  string   `json:"tenant"`
		Scopes  []string `json:"scopes"`
	} `json:"caller"`
	Count  int      `json:"count"`
	Before []string `json:"rules_before"`
	After  []string `json:"rules_after"`
}

type replayOut struct {
	Events       int          `json:"events"`
	Questions    int          `json:"questions"`
	Distinct     int          `json:"distinct_questions"`
	Outside      int          `json:"outside_window"`
	Unchanged    int          `json:"unchanged"`
	Flips        []replayFlip `json:"flips"`
	Unreproduced []replayFlip `json:"unreproduced"`
	ByCapability []struct {
		Capability    string
		Losses, Gains int
	} `json:"by_capability"`
	ByCaller []struct {
		Caller        struct{ Subject, Tenant string }
		Losses, Gains int
	} `json:"by_caller"`
}

func (f replayFlip) String() string {
	return f.Change + " " + f.Operation + " " + f.Capability + " " + f.Caller.Subject + "@" + f.Caller.Tenant + " [" +
		strings.Join(f.Caller.Scopes, " ") + "] ×" + string(rune('0'+f.Count))
}

func flipNames(fs []replayFlip) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.String())
	}
	sort.Strings(out)
	return out
}

// TestAccessReplayEndToEnd sends traffic from several callers through a
// running capgate, writes its decision log in both forms, and replays it
// against a head that removes a scope grant (reconcile-invoice now also
// needs invoices.read) and widens a tenant list (apply-remittance opens to
// acme): exactly the flipped decisions are reported, in every output form,
// with the exit code CI reads; against the serving config nothing changes.
func TestAccessReplayEndToEnd(t *testing.T) {
	serving := testutil.CopyFinance(t)
	narrow := func(s string) string { return replaceOnce(t, s, `tenants: "*"`, `tenants: [example-corp]`) }
	testutil.EditFile(t, serving, "capabilities/apply-remittance.yaml", narrow)
	head := testutil.CopyFinance(t)
	testutil.EditFile(t, head, "capabilities/apply-remittance.yaml", func(s string) string {
		return replaceOnce(t, s, `tenants: "*"`, `tenants: [example-corp, acme]`)
	})
	testutil.EditFile(t, head, "capabilities/reconcile-invoice.yaml", func(s string) string {
		return replaceOnce(t, s, `requires_scopes: [recon.run]`, `requires_scopes: [recon.run, invoices.read]`)
	})

	srv := testutil.Start(t, testutil.LoadDeployment(t, serving))
	sent := 0
	send := func(tok, hint, text string) {
		t.Helper()
		// Each send is a new message (a repeated messageId is a retry of
		// the first, answered without a new decision on the capability).
		sent++
		h := []string{"A2A-Version", "1.0"}
		if tok != "" {
			h = append(h, "Authorization", "Bearer "+tok)
		}
		resp := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m`+strconv.Itoa(sent)+`","role":"ROLE_USER",
			"parts":[{"text":"`+text+`"}]},"metadata":{"skillId":"`+hint+`"}}}`, h...)
		srv.WaitDecision(t, resp.Header.Get("X-Capgate-Decision-Id"))
	}
	recon := testutil.Token(t, testutil.TokenOptions{Subject: "partner-1", Tenant: "acme", Scopes: []string{"recon.run"}})
	reconRead := testutil.Token(t, testutil.TokenOptions{Subject: "partner-3", Tenant: "acme", Scopes: []string{"invoices.read", "recon.run"}})
	payer := testutil.Token(t, testutil.TokenOptions{Subject: "payer-1", Tenant: "acme", Scopes: []string{"payments.apply"}})
	corpPayer := testutil.Token(t, testutil.TokenOptions{Subject: "payer-2", Tenant: "example-corp", Scopes: []string{"payments.apply"}})
	for range 3 {
		send(recon, "reconcile-invoice", "Reconcile invoice INV-20931 against its PO.")
	}
	for range 2 {
		send(reconRead, "reconcile-invoice", "Reconcile invoice INV-20931 against its PO.")
		send(payer, "apply-remittance", "Apply this remittance advice to the open invoices")
		send(corpPayer, "apply-remittance", "Apply this remittance advice to the open invoices")
	}
	send(recon, "lookup-invoice", "Look up invoice INV-1")
	send("", "lookup-invoice", "Look up invoice INV-1") // anonymous: refused before any question

	// The console log (JSON lines among other lines) and the same events
	// as an OPA upload (a gzip'd JSON array).
	dir := t.TempDir()
	var lines bytes.Buffer
	var events []json.RawMessage
	lines.WriteString("not a decision: the console log's other lines are skipped\n")
	for _, e := range srv.Decisions.All() {
		b, err := json.Marshal(e.ContextMap())
		require.NoError(t, err)
		require.NotContains(t, string(b), recon[:20], "never a token")
		require.NotContains(t, string(b), "Apply this remittance", "never message text")
		lines.Write(append(b, '\n'))
		events = append(events, b)
	}
	require.Equal(t, 11, len(events))
	console := filepath.Join(dir, "decisions.log")
	require.NoError(t, os.WriteFile(console, lines.Bytes(), 0o644))
	upload := filepath.Join(dir, "decisions.json.gz")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	require.NoError(t, json.NewEncoder(zw).Encode(events))
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(upload, gz.Bytes(), 0o644))

	replay := func(t *testing.T, args ...string) (int, replayOut) {
		t.Helper()
		r := run(t, append([]string{"access", "replay"}, append(args, "--json")...)...)
		var out replayOut
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stderr)
		return r.code, out
	}
	want := []string{
		"allowed → refused SendMessage reconcile-invoice partner-1@acme [recon.run] ×3",
		"refused → allowed SendMessage apply-remittance payer-1@acme [payments.apply] ×2",
	}
	for _, logFile := range []string{console, upload} {
		t.Run("json "+filepath.Base(logFile), func(t *testing.T) {
			code, out := replay(t, "--decisions", logFile, "--head", head)
			require.Equal(t, cli.ExitCheck, code)
			require.Equal(t, 11, out.Events)
			require.Equal(t, want, flipNames(out.Flips))
			require.Empty(t, out.Unreproduced)
			require.Less(t, out.Distinct, out.Questions, "each distinct question is evaluated once")
			for _, f := range out.Flips {
				require.Equal(t, testutil.Issuer, f.Caller.Issuer)
				if f.Capability == "reconcile-invoice" {
					require.Contains(t, f.Before, "scope.held")
					require.Equal(t, []string{"scope.missing"}, f.After)
				} else {
					require.Equal(t, []string{"tenant.not_listed"}, f.Before)
					require.Contains(t, f.After, "tenant.listed")
				}
			}
			require.Len(t, out.ByCapability, 2)
			require.Len(t, out.ByCaller, 2)
		})
	}
	t.Run("the serving config changes nothing", func(t *testing.T) {
		// Files after the last flag are read too (a shell glob).
		r := run(t, "access", "replay", "--head", serving, "--json", "--decisions", console, upload)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		var out replayOut
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		require.Empty(t, out.Flips)
		require.Equal(t, 22, out.Events)
		require.Equal(t, out.Questions, out.Unchanged)
		r = run(t, "access", "replay", "--decisions", console, "--head", serving)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "no recorded decision changes")
	})
	t.Run("allow flags", func(t *testing.T) {
		code, _ := replay(t, "--decisions", console, "--head", head, "--allow-loss")
		require.Equal(t, cli.ExitCheck, code, "a gain is still refused")
		code, _ = replay(t, "--decisions", console, "--head", head, "--allow-gain")
		require.Equal(t, cli.ExitCheck, code, "a loss is still refused")
		code, out := replay(t, "--decisions", console, "--head", head, "--allow-gain", "--allow-loss")
		require.Equal(t, cli.ExitOK, code)
		require.Equal(t, want, flipNames(out.Flips))
	})
	t.Run("base", func(t *testing.T) {
		code, out := replay(t, "--decisions", console, "--head", head, "--base", serving)
		require.Equal(t, cli.ExitCheck, code)
		require.Equal(t, want, flipNames(out.Flips))
		require.Empty(t, out.Unreproduced, "the serving config reproduces every recorded answer")
		// A base that did not serve the traffic: the events it does not
		// reproduce are reported apart, not replayed.
		code, out = replay(t, "--decisions", console, "--head", head, "--base", head)
		require.Equal(t, cli.ExitOK, code)
		require.Empty(t, out.Flips)
		require.Equal(t, want, flipNames(out.Unreproduced))
	})
	t.Run("time window", func(t *testing.T) {
		code, out := replay(t, "--decisions", console, "--head", head, "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		require.Equal(t, cli.ExitOK, code)
		require.Zero(t, out.Questions)
		require.Positive(t, out.Outside)
		code, out = replay(t, "--decisions", console, "--head", head, "--until", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		require.Equal(t, cli.ExitCheck, code)
		require.Equal(t, want, flipNames(out.Flips))
	})
	t.Run("text and markdown", func(t *testing.T) {
		r := run(t, "access", "replay", "--decisions", console, "--head", head)
		require.Equal(t, cli.ExitCheck, r.code)
		require.Contains(t, r.stdout, "3 allowed → refused, 2 refused → allowed")
		require.Contains(t, r.stdout, "read 11 decision events; replayed 10 recorded questions (")
		require.Contains(t, r.stdout, "  reconcile-invoice: 3 allowed → refused, 0 refused → allowed, 1 caller\n")
		require.Contains(t, r.stdout, "allowed → refused: SendMessage reconcile-invoice by "+testutil.Issuer+" partner-1@acme [recon.run] ×3")
		require.Contains(t, r.stdout, "refused → allowed: SendMessage apply-remittance by "+testutil.Issuer+" payer-1@acme [payments.apply] ×2")
		require.Equal(t, 2, strings.Count(r.stdout, " ×"), "only the flipped decisions")
		require.Contains(t, r.stderr, "3 allowed → refused, 2 refused → allowed")
		r = run(t, "access", "replay", "--decisions", console, "--head", head, "--markdown")
		require.Equal(t, cli.ExitCheck, r.code)
		require.Contains(t, r.stdout, "| allowed → refused | `reconcile-invoice` | SendMessage | "+testutil.Issuer+" partner-1@acme | recon.run | 3 |")
		require.Contains(t, r.stdout, "| refused → allowed | `apply-remittance` | SendMessage | "+testutil.Issuer+" payer-1@acme | payments.apply | 2 |")
		require.Equal(t, 2, strings.Count(r.stdout, "| SendMessage |"), "only the flipped decisions")
	})
	t.Run("html in chromium", func(t *testing.T) {
		page := filepath.Join(dir, "replay.html")
		r := run(t, "access", "replay", "--decisions", upload, "--head", head, "--html", page)
		require.Equal(t, cli.ExitCheck, r.code)
		require.Contains(t, r.stdout, "wrote the HTML report to "+page)
		dom := chromiumDOM(t, page)
		require.Equal(t, 2, strings.Count(dom, `class="flip"`), "only the flipped decisions")
		require.Contains(t, dom, `data-change="loss" data-capability="reconcile-invoice" data-count="3"`)
		require.Contains(t, dom, `data-change="gain" data-capability="apply-remittance" data-count="2"`)
		require.Contains(t, dom, `id="by-capability"`)
		require.Contains(t, dom, `id="by-caller"`)
		require.Regexp(t, `<style>[^<]*td\.gained`, dom, "the access report's stylesheet")
	})
	t.Run("the usage line is what the flag parser accepts", func(t *testing.T) {
		r := run(t, "access", "replay", "-h")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		line := strings.SplitN(strings.TrimPrefix(r.stdout, "usage: capgate "), "\n", 2)[0]
		require.Regexp(t, `^access replay --head SOURCE .*\[--decisions FILE\]\.\.\. \[FILE\.\.\.\]$`, line, "files last")
		// The line as written, with its optional parts given, parses.
		r = run(t, "access", "replay", "--head", serving, "--allow-loss", "--allow-gain", "--json", "--decisions", console, upload, console)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		// The order the line once suggested does not, and is told so.
		r = run(t, "access", "replay", "--decisions", console, upload, "--head", serving)
		require.Equal(t, cli.ExitUsage, r.code)
		require.Contains(t, r.stderr, "--head after a file: flags come before the files")
	})
	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{
			{"--head", head},
			{"--decisions", console},
			{"--decisions", filepath.Join(dir, "missing.log"), "--head", head},
			{"--decisions", console, "--head", head, "--since", "last week"},
			{"--decisions", console, "--head", head, "--json", "--markdown"},
			{"--decisions", console, console, "--head", head},
		} {
			r := run(t, append([]string{"access", "replay"}, args...)...)
			require.Equal(t, cli.ExitUsage, r.code, "%v: %s", args, r.stderr)
		}
	})
}

// chromiumDOM renders page in headless chromium and returns the DOM.
func chromiumDOM(t *testing.T, page string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if ci.Required() {
			t.Fatal("chromium is not installed")
		}
		t.Skip("!!! chromium is not installed: the replay report was NOT rendered in a browser")
	}
	// A safety bound for a hung browser, not a timing assertion.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--dump-dom", "file://"+page)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	return stdout.String()
}
