package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/test/golden"
	"github.com/capgate/capgate/test/testutil"
)

// result is one CLI run.
type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	return runIn(t, "", args...)
}

func runIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(t.Context(), args, cli.Env{Stdout: &out, Stderr: &errOut, Stdin: strings.NewReader(stdin)})
	return result{code, out.String(), errOut.String()}
}

func writeClaims(t *testing.T, claims string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "claims.json")
	require.NoError(t, os.WriteFile(p, []byte(claims), 0o644))
	return p
}

// replaceOnce replaces the one occurrence of old, failing when there is not
// exactly one (an edit to a fixture must not silently do nothing).
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	require.Equal(t, 1, strings.Count(s, old), "want exactly one %q", old)
	return strings.Replace(s, old, new, 1)
}

func skillIDs(t *testing.T, cardJSON string) []string {
	t.Helper()
	var c a2a.AgentCard
	require.NoError(t, json.Unmarshal([]byte(cardJSON), &c))
	ids := []string{}
	for _, s := range c.Skills {
		ids = append(ids, s.ID)
	}
	return ids
}

// Help asked for goes to standard output with exit 0, for every command
// and every subcommand of every group; the usage after a mistake goes to
// standard error with exit 2.
func TestHelpOnStdout(t *testing.T) {
	cmds := [][]string{
		{"serve"}, {"validate"}, {"card"}, {"card", "lock"}, {"card", "check"}, {"card", "verify"},
		{"explain"}, {"access"}, {"access", "matrix"}, {"access", "diff"}, {"compile"},
		{"policy"}, {"policy", "test"}, {"policy", "check"}, {"policy", "fmt"}, {"token"},
		{"keys"}, {"keys", "generate"}, {"route"}, {"route", "eval"}, {"version"}, {"lifecycle"},
	}
	for _, c := range cmds {
		for _, h := range []string{"-h", "--help"} {
			args := append(append([]string(nil), c...), h)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				r := run(t, args...)
				require.Equal(t, cli.ExitOK, r.code, r.stderr)
				require.Contains(t, r.stdout, "usage: capgate "+c[0])
				require.Empty(t, r.stderr)
			})
		}
	}
	r := run(t, "validate", "--nope")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "usage: capgate validate")
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{"no command", nil, cli.ExitUsage, "", "usage: capgate <command>"},
		{"help", []string{"help"}, cli.ExitOK, "usage: capgate <command>", ""},
		{"--help", []string{"--help"}, cli.ExitOK, "usage: capgate <command>", ""},
		{"-h", []string{"-h"}, cli.ExitOK, "usage: capgate <command>", ""},
		{"unknown command", []string{"frobnicate"}, cli.ExitUsage, "", `unknown command "frobnicate"`},
		{"version", []string{"version"}, cli.ExitOK, "capgate dev (commit ", ""},
		{"--version", []string{"--version"}, cli.ExitOK, "capgate dev (commit ", ""},
		{"policy --help", []string{"policy", "--help"}, cli.ExitOK, "test   run the Rego unit tests", ""},
		{"access --help", []string{"access", "--help"}, cli.ExitOK, "matrix  who can see and run", ""},
		{"card check -h names the lock flag's value plainly", []string{"card", "check", "-h"}, cli.ExitOK, "-lock string", ""},
		{"keys without subcommand", []string{"keys"}, cli.ExitUsage, "", "keys generate"},
		{"keys generate without --out", []string{"keys", "generate"}, cli.ExitUsage, "", "--out is required"},
		{"token --key of a missing file", []string{"token", "--key", "/nonexistent/k.pem"}, cli.ExitUsage, "", "read key:"},
		{"token for an unknown issuer without --aud", []string{"token", "--issuer", "https://other.example"}, cli.ExitUsage, "", "--aud is required"},
		{"version with an argument", []string{"version", "x"}, cli.ExitUsage, "", "unexpected arguments: x"},
		{"validate embedded default", []string{"validate"}, cli.ExitOK, "ok: 8 capabilities, policy revision ", ""},
		{"validate bad flag", []string{"validate", "--nope"}, cli.ExitUsage, "", "flag provided but not defined: -nope"},
		{"validate missing config", []string{"validate", "--config", "/nonexistent/capgate.yaml"}, cli.ExitUsage, "", "capgate validate:"},
		{"card bad flag", []string{"card", "--claimz", "x"}, cli.ExitUsage, "", "flag provided but not defined"},
		{"card missing claims file", []string{"card", "--claims", "/nonexistent.json"}, cli.ExitUsage, "", "read claims"},
		{"card lock without --out", []string{"card", "lock"}, cli.ExitUsage, "", "--out is required"},
		{"card check without --lock", []string{"card", "check"}, cli.ExitUsage, "", "--lock is required"},
		{"explain unknown capability", []string{"explain", "--capability", "nope"}, cli.ExitUsage, "", `unknown capability "nope"`},
		{"compile without --out", []string{"compile"}, cli.ExitUsage, "", "--out is required"},
		{"token bad ttl", []string{"token", "--ttl", "48h"}, cli.ExitUsage, "", "--ttl must be between 1s and 24h"},
		{"token bad alg", []string{"token", "--alg", "HS256"}, cli.ExitUsage, "", "--alg must be RS256 or ES256"},
		{"policy without subcommand", []string{"policy"}, cli.ExitUsage, "", "usage: capgate policy"},
		{"serve bad --only", []string{"serve", "--only", "admin"}, cli.ExitUsage, "", "--only must be gateway or extauthz"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.args...)
			require.Equal(t, tc.code, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			require.Contains(t, r.stdout, tc.stdout)
			require.Contains(t, r.stderr, tc.stderr)
		})
	}
}

// TestVersionStampedCommit: a build without VCS information (the test
// binary, a -buildvcs=false build) shows the commit -ldflags stamped into
// cli.Commit, and "-modified" at its end as "modified".
func TestVersionStampedCommit(t *testing.T) {
	for _, tc := range []struct{ commit, want string }{
		{"", "capgate dev (commit unknown) go"},
		{"0123abc", "capgate dev (commit 0123abc) go"},
		{"0123abc-modified", "capgate dev (commit 0123abc, modified) go"},
	} {
		t.Run(tc.commit, func(t *testing.T) {
			saved := cli.Commit
			t.Cleanup(func() { cli.Commit = saved })
			cli.Commit = tc.commit
			r := run(t, "--version")
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			require.True(t, strings.HasPrefix(r.stdout, tc.want), "%q", r.stdout)
		})
	}
}

func TestValidateReportsProblems(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.WriteFile(t, cfg, "capabilities/bad.yaml", `id: bad-capability
state: shipping
visibility: public
skill: {name: Bad, description: Bad one., tags: [x], inputModes: [text/plain], outputModes: [application/json]}
requires_scopes: []
tenants: "*"
handler: invoices.lookup
owner: me
colour: blue
`)
	r := run(t, "validate", "--config", cfg)
	require.Equal(t, cli.ExitCheck, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "bad.yaml")
	require.Contains(t, r.stdout, "state")
	require.Contains(t, r.stdout, "colour")
	require.Contains(t, r.stderr, "problem(s) found")

	// Other commands refuse the same config as an input error.
	r = run(t, "card", "--config", cfg)
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "invalid deployment")
}

func TestCard(t *testing.T) {
	v, err := card.NewValidator()
	require.NoError(t, err)

	t.Run("public card golden", func(t *testing.T) {
		r := run(t, "card")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.NoError(t, v.Validate([]byte(r.stdout)))
		require.Equal(t, testutil.PublicSkills, skillIDs(t, r.stdout))
		golden.JSONEq(t, filepath.Join("testdata", "card-public.golden.json"), []byte(r.stdout))
	})

	cases := []struct {
		name   string
		claims string
		skills []string
	}{
		{"recon.run adds reconcile-invoice", `{"sub":"partner-1","scope":"recon.run"}`,
			[]string{"extract-invoice-fields", "lookup-invoice", "lookup-invoice-v1", "reconcile-invoice"}},
		{"scope as an array", `{"sub":"partner-1","scope":["recon.run"]}`,
			[]string{"extract-invoice-fields", "lookup-invoice", "lookup-invoice-v1", "reconcile-invoice"}},
		{"other scope: public skills", `{"sub":"partner-1","scope":"invoices.read"}`, testutil.PublicSkills},
		{"preview opt-in", `{"sub":"partner-1","scope":"a2a.preview forecast.read"}`,
			[]string{"extract-invoice-fields", "forecast-cashflow", "lookup-invoice", "lookup-invoice-v1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, "card", "--claims", writeClaims(t, tc.claims))
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			require.NoError(t, v.Validate([]byte(r.stdout)))
			require.Equal(t, tc.skills, skillIDs(t, r.stdout))
		})
	}
	t.Run("claims from stdin", func(t *testing.T) {
		r := runIn(t, `{"sub":"p","scope":"recon.run"}`, "card", "--claims", "-")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, skillIDs(t, r.stdout), "reconcile-invoice")
	})
	t.Run("claims that are not an object", func(t *testing.T) {
		for _, claims := range []string{`[]`, `"x"`, `{"sub":"a","sub":"b"}`, `{`} {
			r := run(t, "card", "--claims", writeClaims(t, claims))
			require.Equal(t, cli.ExitUsage, r.code, claims)
			require.Contains(t, r.stderr, "not a JSON object of JWT claims")
		}
	})
}

func TestExplain(t *testing.T) {
	claims := writeClaims(t, `{"sub":"p1","scope":"invoices.read"}`)

	t.Run("text", func(t *testing.T) {
		r := run(t, "explain", "--claims", claims)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, `caller: subject "p1", tenant "", scopes [invoices.read]`)
		require.Contains(t, r.stdout, "\nreconcile-invoice (extended, ga)\n  visible:  no  because scope.missing(recon.run) refused it")
		require.Contains(t, r.stdout, "\nlookup-invoice (public, ga)\n  visible:  yes because state.ga, visibility.public granted it")
		require.Contains(t, r.stdout, "\n  limits:   cost_class=\"medium\" max_file_bytes=524288 max_pdf_pages=200\n", "reconcile-invoice's limits")
	})
	t.Run("one capability", func(t *testing.T) {
		r := run(t, "explain", "--claims", claims, "--capability", "reconcile-invoice")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "scope.missing(recon.run)")
		require.NotContains(t, r.stdout, "lookup-invoice")
	})
	t.Run("json", func(t *testing.T) {
		type reason struct{ Rule, Effect, Detail string }
		var out struct {
			Revision string
			Caller   struct {
				Authenticated bool
				Subject       string
				Scopes        []string
			}
			Capabilities []struct {
				Capability        string
				Visible, Entitled bool
				Reasons           struct{ Visible, Entitled []reason }
				Limits            map[string]any
			}
		}
		r := run(t, "explain", "--claims", claims, "--json")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		require.NotEmpty(t, out.Revision)
		require.True(t, out.Caller.Authenticated)
		require.Equal(t, "p1", out.Caller.Subject)
		want := map[string][2]bool{ // visible, entitled
			"extract-invoice-fields": {true, true},
			"lookup-invoice":         {true, true},
			"lookup-invoice-v1":      {true, true},
			"reconcile-invoice":      {false, false},
			"forecast-cashflow":      {false, false},
			"purge-invoice-cache":    {false, false},
			"reconcile-invoice-v0":   {false, false},
			"apply-remittance":       {false, false},
		}
		got := map[string][2]bool{}
		for _, c := range out.Capabilities {
			got[c.Capability] = [2]bool{c.Visible, c.Entitled}
			if c.Capability == "reconcile-invoice" {
				require.Contains(t, c.Reasons.Visible, reason{"scope.missing", "refuse", "recon.run"})
				require.Contains(t, c.Reasons.Entitled, reason{"scope.missing", "refuse", "recon.run"})
				require.Equal(t, map[string]any{"max_pdf_pages": 200.0, "max_file_bytes": 524288.0, "cost_class": "medium"}, c.Limits, "limits are shown for refused capabilities too")
			}
			if c.Capability == "lookup-invoice" {
				require.Nil(t, c.Limits, "no limits, no field")
			}
		}
		require.Equal(t, want, got)
	})
	t.Run("anonymous", func(t *testing.T) {
		r := run(t, "explain", "--json")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, `"authenticated": false`)
	})
}

// TestCardLockCheck locks the public card of a copy of the finance example
// and checks edited copies against the lock.
func TestCardLockCheck(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	lock := filepath.Join(t.TempDir(), "public-card.lock.json")
	r := run(t, "card", "lock", "--config", cfg, "--out", lock)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "locked public card (version 1.4.0+skills.")

	newSkill := `id: list-suppliers
state: ga
visibility: public
skill:
  name: List suppliers
  description: Lists the suppliers that sent invoices this year.
  tags: [finance, suppliers]
  inputModes: [text/plain]
  outputModes: [application/json]
requires_scopes: []
tenants: "*"
handler: invoices.lookup
owner: finance-agents-team
`
	cases := []struct {
		name  string
		edit  func(t *testing.T, cfg string)
		code  int
		finds []string // substrings of stdout
		not   []string
	}{
		{"unchanged", func(*testing.T, string) {}, cli.ExitOK, []string{"public card unchanged (version 1.4.0+skills."}, nil},
		{"an extended-only change is not a finding", func(t *testing.T, cfg string) {
			testutil.EditFile(t, cfg, "capabilities/reconcile-invoice.yaml", func(s string) string {
				return replaceOnce(t, s, "lists line-level differences.", "lists every line-level difference.")
			})
		}, cli.ExitOK, []string{"public card unchanged"}, nil},
		{"public description changed", func(t *testing.T, cfg string) {
			testutil.EditFile(t, cfg, "capabilities/lookup-invoice.yaml", func(s string) string {
				return replaceOnce(t, s, "due date and supplier.", "due date, supplier and currency.")
			})
		}, cli.ExitCheck, []string{"skill-changed: lookup-invoice description", "due date, supplier and currency."}, []string{"leak:"}},
		{"public skill added, version not bumped", func(t *testing.T, cfg string) {
			testutil.WriteFile(t, cfg, "capabilities/list-suppliers.yaml", newSkill)
		}, cli.ExitCheck, []string{"skill-added: list-suppliers", "version-not-bumped"}, nil},
		{"public skill added, version bumped", func(t *testing.T, cfg string) {
			testutil.WriteFile(t, cfg, "capabilities/list-suppliers.yaml", newSkill)
			testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string { return replaceOnce(t, s, "version: 1.4.0", "version: 1.5.0") })
		}, cli.ExitCheck, []string{"skill-added: list-suppliers"}, []string{"version-not-bumped"}},
		{"six words of an extended description in a public skill", func(t *testing.T, cfg string) {
			testutil.EditFile(t, cfg, "capabilities/extract-invoice-fields.yaml", func(s string) string {
				return replaceOnce(t, s, "from an invoice document.", "from an invoice document; it matches an invoice to its purchase.")
			})
		}, cli.ExitCheck, []string{"leak: reconcile-invoice -> skills[extract-invoice-fields].description", "+ matches an invoice to its purchase", "Fix every leak"}, nil},
		{"five words are not a leak", func(t *testing.T, cfg string) {
			testutil.EditFile(t, cfg, "capabilities/extract-invoice-fields.yaml", func(s string) string {
				return replaceOnce(t, s, "from an invoice document.", "from an invoice document; it matches an invoice to its.")
			})
		}, cli.ExitCheck, []string{"skill-changed: extract-invoice-fields description"}, []string{"leak:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cur := testutil.CopyFinance(t)
			tc.edit(t, cur)
			r := run(t, "card", "check", "--config", cur, "--lock", lock)
			require.Equal(t, tc.code, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			for _, s := range tc.finds {
				require.Contains(t, r.stdout, s)
			}
			for _, s := range tc.not {
				require.NotContains(t, r.stdout, s)
			}
			if tc.code == cli.ExitCheck {
				require.Contains(t, r.stderr, "finding(s)")
			}
		})
	}
	t.Run("a lock that is not a lock", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.lock.json")
		require.NoError(t, os.WriteFile(bad, []byte(`{"nope":true}`), 0o644))
		r := run(t, "card", "check", "--config", cfg, "--lock", bad)
		require.Equal(t, cli.ExitUsage, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	})
}

func TestCompileBundle(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bundle.tar.gz")
	r := run(t, "compile", "--out", out)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "wrote unsigned bundle "+out)

	f, err := os.Open(out)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	b, err := bundle.NewReader(f).Read()
	require.NoError(t, err)
	require.NotNil(t, b.Manifest.Roots)
	require.Equal(t, []string{"capgate"}, *b.Manifest.Roots)
	d, err := deployment.Load("")
	require.NoError(t, err)
	require.Equal(t, d.Snapshot.Revision, b.Manifest.Revision)
	require.NotEmpty(t, b.Modules, "the bundle carries the policy")
	require.NotEmpty(t, b.Data, "the bundle carries the compiled manifests")
}

func TestToken(t *testing.T) {
	d, err := deployment.Load("")
	require.NoError(t, err)
	v, err := identity.NewVerifier(t.Context(), d.Config.Auth, d.Config.ReadFile)
	require.NoError(t, err)

	cases := []struct {
		name   string
		args   []string
		sub    string
		tenant string
		scopes []string
	}{
		{"defaults", nil, "demo-user", "", nil},
		{"scopes and tenant", []string{"--sub", "partner-1", "--scope", "recon.run  a2a.preview", "--tenant", "acme"}, "partner-1", "acme", []string{"recon.run", "a2a.preview"}},
		{"ES256", []string{"--alg", "ES256", "--scope", "recon.run"}, "demo-user", "", []string{"recon.run"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, append([]string{"token"}, tc.args...)...)
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			require.Contains(t, r.stderr, "DEMO key")
			tok := strings.TrimSpace(r.stdout)
			require.Equal(t, 2, strings.Count(tok, "."), "one compact JWS on stdout")
			p, err := v.Verify(t.Context(), "Bearer "+tok)
			require.NoError(t, err)
			require.True(t, p.Authenticated)
			require.Equal(t, tc.sub, p.Subject)
			require.Equal(t, tc.tenant, p.Tenant)
			require.ElementsMatch(t, tc.scopes, p.Scopes)
		})
	}
}

func TestRouteStructured(t *testing.T) {
	// Both apply-remittance and reconcile-invoice take JSON from this caller.
	claims := writeClaims(t, `{"sub":"p1","scope":"payments.apply recon.run"}`)
	remittance := `{"remittance_ref": "RA-2201", "payer": "ACME", "amount": 1200, "invoices": ["INV-1042", "INV-1043"]}`

	r := run(t, "route", "--claims", claims, "--data", remittance, "here you go")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Equal(t, "layer: structured\ncapability: apply-remittance\n", r.stdout)

	r = run(t, "route", "--claims", claims, "--data", `{"invoice_id": "INV-20931", "po_number": "PO-5531"}`, "here you go")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Equal(t, "layer: structured\ncapability: reconcile-invoice\n", r.stdout)

	// A part of another shape (a malformed invoice number) is left to the classifier.
	r = run(t, "route", "--claims", claims, "--data", `{"remittance_ref": "RA-2201", "payer": "ACME", "invoices": ["1042"]}`, "here you go")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.NotContains(t, r.stdout, "layer: structured")

	r = run(t, "route", "--claims", claims, "--data", `{"remittance_ref": `, "x")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "--data must be one JSON value")

	cases := filepath.Join(t.TempDir(), "cases.jsonl")
	require.NoError(t, os.WriteFile(cases, []byte(
		`{"text": "here you go", "data": [`+remittance+`], "expect": "apply-remittance"}`+"\n"+
			`{"text": "What is the status of invoice INV-20931?", "expect": "lookup-invoice"}`+"\n"), 0o644))
	r = run(t, "route", "eval", "--manifests", "../../../../manifests/finance/capabilities", "--cases", cases, "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var m struct {
		Cases, Structured int
		InScopeAccuracy   float64 `json:"in_scope_accuracy"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m))
	require.Equal(t, 2, m.Cases)
	require.Equal(t, 1, m.Structured)
	require.Equal(t, 1.0, m.InScopeAccuracy)
}

func TestRouteEvalSweep(t *testing.T) {
	caps := filepath.Join("..", "..", "..", "..", "manifests", "finance", "capabilities")
	cases := filepath.Join(t.TempDir(), "cases.jsonl")
	require.NoError(t, os.WriteFile(cases, []byte(`{"text": "look up invoice INV-1", "expect": "lookup-invoice"}
{"text": "extract the fields from this invoice", "expect": "extract-invoice-fields"}
{"text": "what's the weather", "expect": null}
`), 0o644))

	r := run(t, "route", "eval", "--manifests", caps, "--cases", cases, "--sweep", "0.5, 0.6,0.99")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2+3, r.stdout)
	require.Equal(t, "| threshold | in-scope acc | OOS recall | clarification | misroute |", lines[0])
	require.True(t, strings.HasPrefix(lines[2], "| 0.50 |"), lines[2])
	require.True(t, strings.HasPrefix(lines[4], "| 0.99 |"), lines[4])

	r = run(t, "route", "eval", "--manifests", caps, "--cases", cases, "--sweep", "0.5,0.6", "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var figs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &figs))
	require.Len(t, figs, 2)
	require.InDelta(t, 0.6, figs[1]["threshold"], 1e-9)
	require.InDelta(t, 3, figs[1]["cases"], 0)

	for _, bad := range []string{"0.5,x", "1.5", "-0.1"} {
		r = run(t, "route", "eval", "--manifests", caps, "--cases", cases, "--sweep", bad)
		require.Equal(t, cli.ExitUsage, r.code, bad)
		require.Contains(t, r.stderr, "--sweep", bad)
	}
}

// The commit `make build` stamps (-X cli.Commit) is shown when the Go
// toolchain recorded none (test binaries, like -buildvcs=false builds,
// carry no VCS stamp).
func TestVersionShowsStampedCommit(t *testing.T) {
	old := cli.Commit
	t.Cleanup(func() { cli.Commit = old })
	cli.Commit = "0123456789abcdef0123456789abcdef01234567"
	r := run(t, "--version")
	require.Equal(t, cli.ExitOK, r.code)
	require.Contains(t, r.stdout, "(commit 0123456789abcdef0123456789abcdef01234567)")
}
