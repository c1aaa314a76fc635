package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/test/testutil"
)

const decommission = "decommission-vehicle"

// anyOfDeployment copies the finance example with the any-of example
// manifest (test/testdata/any-of: admins or shift leads may decommission),
// edited by edit when not nil, and returns its config path.
func anyOfDeployment(t *testing.T, edit func(string) string) string {
	t.Helper()
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "  payments.remittance: builtin:echo\n", "  payments.remittance: builtin:echo\n  fleet.decommission: builtin:echo\n")
	})
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "test", "testdata", "any-of", "decommission-vehicle.yaml"))
	require.NoError(t, err)
	s := string(b)
	if edit != nil {
		s = edit(s)
	}
	testutil.WriteFile(t, cfg, "capabilities/decommission-vehicle.yaml", s)
	return cfg
}

// adminsOnly is the any-of example before shift leads were let in.
func adminsOnly(t *testing.T) func(string) string {
	return func(s string) string {
		s = replaceOnce(t, s, "requires_scopes: []", "requires_scopes: [fleet.admin]")
		return replaceOnce(t, s, "requires_any_of:\n  - [fleet.admin]\n  - [fleet.dispatch, fleet.shift_lead]\n", "")
	}
}

// The any-of example through the access tools: the matrix and explain
// name the alternative that grants each cell, the diff from admins-only
// names requires_any_of as the cause of the shift leads' gain, and replay
// of recorded traffic finds the shift lead's refusal turned into an allow.
func TestAnyOfAccessTools(t *testing.T) {
	head := anyOfDeployment(t, nil)
	base := anyOfDeployment(t, adminsOnly(t))

	t.Run("matrix", func(t *testing.T) {
		r := run(t, "access", "matrix", "--config", head, "--capability", decommission, "--json")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		var out struct {
			Rows []struct {
				Class string
				Cells []struct{ Level, Rule string }
			}
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		cells := map[string]string{}
		for _, row := range out.Rows {
			cells[row.Class] = row.Cells[0].Level + " " + row.Cells[0].Rule
		}
		require.Equal(t, "entitled auth.authenticated scope.any_of_held(fleet.admin) state.ga tenant.any", cells["scopes:fleet.admin"])
		require.Equal(t, "entitled auth.authenticated scope.any_of_held(fleet.dispatch fleet.shift_lead) state.ga tenant.any", cells["scopes:fleet.dispatch+fleet.shift_lead"])
		require.Equal(t, "none scope.any_of_missing(fleet.admin of [fleet.admin]) scope.any_of_missing(fleet.dispatch fleet.shift_lead of [fleet.dispatch fleet.shift_lead])", cells["authenticated"])
	})

	t.Run("diff names the alternative", func(t *testing.T) {
		r := run(t, "access", "diff", "--base", base, "--head", head, "--json")
		require.Equal(t, cli.ExitCheck, r.code, "shift leads gain: %s", r.stderr)
		var out struct {
			Gained []struct {
				Class, Capability string
				Head              struct{ Rule string }
				Causes            []struct{ Summary string }
			}
			Lost []struct{ Class, Capability string }
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		require.Empty(t, out.Lost, "admins keep it")
		var gained []string
		for _, g := range out.Gained {
			gained = append(gained, g.Class+" "+g.Capability)
			if g.Class == "scopes:fleet.dispatch+fleet.shift_lead" {
				require.Contains(t, g.Head.Rule, "scope.any_of_held(fleet.dispatch fleet.shift_lead)")
				var causes []string
				for _, c := range g.Causes {
					causes = append(causes, c.Summary)
				}
				require.Contains(t, causes, "decommission-vehicle: requires_any_of (none) → [fleet.admin] or [fleet.dispatch fleet.shift_lead]")
				require.Contains(t, causes, "decommission-vehicle: requires_scopes [fleet.admin] → []")
			}
		}
		require.Contains(t, gained, "scopes:fleet.dispatch+fleet.shift_lead decommission-vehicle")
		require.NotContains(t, gained, "authenticated decommission-vehicle")
	})

	t.Run("explain", func(t *testing.T) {
		claims := writeClaims(t, `{"sub": "lead-1", "tenant": "acme", "scope": "fleet.dispatch fleet.shift_lead"}`)
		r := run(t, "explain", "--config", head, "--claims", claims, "--capability", decommission)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "scope.any_of_held")
		require.Contains(t, r.stdout, "fleet.dispatch fleet.shift_lead")
		claims = writeClaims(t, `{"sub": "d-1", "tenant": "acme", "scope": "fleet.dispatch"}`)
		r = run(t, "explain", "--config", head, "--claims", claims, "--capability", decommission)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "scope.any_of_missing")
	})

	t.Run("replay", func(t *testing.T) {
		srv := testutil.Start(t, testutil.LoadDeployment(t, base))
		sent := 0
		send := func(tok string) {
			t.Helper()
			sent++
			resp := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m`+strconv.Itoa(sent)+`","role":"ROLE_USER",
				"parts":[{"text":"Decommission vehicle V-17"}]},"metadata":{"skillId":"`+decommission+`"}}}`, "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
			srv.WaitDecision(t, resp.Header.Get("X-Capgate-Decision-Id"))
		}
		send(testutil.Token(t, testutil.TokenOptions{Subject: "admin-1", Tenant: "acme", Scopes: []string{"fleet.admin"}}))
		send(testutil.Token(t, testutil.TokenOptions{Subject: "lead-1", Tenant: "acme", Scopes: []string{"fleet.dispatch", "fleet.shift_lead"}}))
		var lines bytes.Buffer
		for _, e := range srv.Decisions.All() {
			b, err := json.Marshal(e.ContextMap())
			require.NoError(t, err)
			lines.Write(append(b, '\n'))
		}
		log := filepath.Join(t.TempDir(), "decisions.log")
		require.NoError(t, os.WriteFile(log, lines.Bytes(), 0o644))

		r := run(t, "access", "replay", "--decisions", log, "--head", head, "--json")
		require.Equal(t, cli.ExitCheck, r.code, "a refusal turned allow: %s", r.stderr)
		var out replayOut
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stderr)
		require.Len(t, out.Flips, 1, "the admin's allow is unchanged")
		f := out.Flips[0]
		require.Equal(t, "lead-1", f.Caller.Subject)
		require.Equal(t, decommission, f.Capability)
		require.Contains(t, f.Before, "scope.missing")
		require.Contains(t, f.After, "scope.any_of_held", "the rule of the alternative that grants it now")
	})
}

// capgate validate reads requires_any_of like requires_scopes: a scope of
// an alternative nothing grants is a warning at its line, with the scope
// it likely misspells; a bad shape is an error at the element.
func TestValidateAnyOf(t *testing.T) {
	cfg := anyOfDeployment(t, func(s string) string {
		return replaceOnce(t, s, "[fleet.dispatch, fleet.shift_lead]", "[fleet.dispatch, fleet.shift_laed]")
	})
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "known_scopes: [", "known_scopes: [fleet.admin, fleet.dispatch, fleet.shift_lead, ")
	})
	file := filepath.Join(filepath.Dir(cfg), "capabilities", "decommission-vehicle.yaml")
	r := run(t, "validate", "--config", cfg)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, `warning: `+file+`:18: requires_any_of: scope "fleet.shift_laed" is required by decommission-vehicle only and granted by nothing the config knows; did you mean fleet.shift_lead?`)
	require.NotContains(t, r.stderr, `"fleet.admin"`, "a granted scope is no finding")

	cfg = anyOfDeployment(t, func(s string) string {
		return replaceOnce(t, s, "  - [fleet.dispatch, fleet.shift_lead]\n", "  - [fleet.dispatch, fleet.shift_lead]\n  - []\n")
	})
	r = run(t, "validate", "--config", cfg)
	require.Equal(t, cli.ExitCheck, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout+r.stderr, "decommission-vehicle.yaml:20: requires_any_of[2]: empty alternative: it would grant every caller; list its scopes")
}
