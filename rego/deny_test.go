package rego_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/regocheck"
	"github.com/capgate/capgate/rego"
)

const secModule = `package capgate.deny.sec

# Incident 42: reconciliation is off until the fix ships.
deny contains {"capability": "reconcile-invoice", "reason": "incident 42"} if not input.caller.subject in exempt

exempt := {"break-glass"}
`

const widenModule = `package capgate.authz

visible contains "audit-trail"

entitled contains "audit-trail"
`

func TestExtraModulesValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want string // substring of the error; empty when accepted
	}{
		{"deny module accepted", secModule, ""},
		{"deeper package for helpers accepted", "package capgate.deny.sec.lists\n\nexempt := {\"break-glass\"}\n", ""},
		{"package capgate.authz widening", widenModule, "x.rego:1: package: package capgate.authz is not allowed"},
		{"package capgate", "package capgate\n\ncapabilities := {}\n", "package capgate is not allowed"},
		{"package capgate.deny itself", "package capgate.deny\n\nsec := {\"deny\": {{\"capability\": \"*\"}}}\n", "package capgate.deny is not allowed"},
		{"package x", "package x\n\nallow := true\n", "package x is not allowed"},
		{"deny rule that is never read", "package capgate.deny.sec.sub\n\ndeny contains {\"capability\": \"*\"}\n", "x.rego:3: rule: capgate.deny.sec.sub.deny is never read"},
		{"deny rule in a ref head", "package capgate.deny.sec\n\nsub.deny contains {\"capability\": \"*\"}\n", "capgate.deny.sec.sub.deny is never read"},
		{"deny function", "package capgate.deny.sec\n\ndeny(x) := {{\"capability\": x}}\n", "x.rego:3: rule: capgate.deny.sec.deny must be a set"},
		{"parse error", "package capgate.deny.sec\n\ndeny contains\n", "x.rego:4: rego_parse_error"},
		{"internal helper of the policy", "package capgate.deny.sec\n\ndeny contains {\"capability\": \"*\"} if not data.capgate.authz._authenticated\n", "x.rego:3: rule: capgate.authz._authenticated reads an internal rule of capgate.authz"},
		{"internal helper through an import", "package capgate.deny.sec\n\nimport data.capgate.authz\n\ndeny contains {\"capability\": \"*\"} if authz._caller.tenant == \"x\"\n", "x.rego:5: rule: capgate.authz._caller reads an internal rule"},
		{"internal helper through an aliased import", "package capgate.deny.sec\n\nimport data.capgate.authz._settings as s\n\ndeny contains {\"capability\": \"*\"} if s.anonymous_public\n", "x.rego:3: rule: capgate.authz._settings reads an internal rule"},
		{"policy rule by a dynamic name", "package capgate.deny.sec\n\ndeny contains {\"capability\": \"*\"} if data.capgate.authz[input.caller.tenant]\n", "x.rego:3: rule: capgate.authz[input.caller.tenant] reads an internal rule"},
		{"helper of its own named like the policy's", "package capgate.deny.sec\n\n_authenticated if input.caller.authenticated\n\ndeny contains {\"capability\": \"*\"} if not _authenticated\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := regocheck.ValidateExtraModules(map[string]string{"x.rego": tc.src})
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestExtraModulesEveryProblem(t *testing.T) {
	err := regocheck.ValidateExtraModules(map[string]string{
		"a.rego": widenModule,
		"b.rego": "package capgate\n\nsettings := {\"anonymous_public\": true}\n",
		"c.rego": secModule,
	})
	require.EqualError(t, err, "a.rego:1: package: package capgate.authz is not allowed: extra modules must use a package under capgate.deny.<name>; they may only add deny rules, never rules of capgate.authz or elsewhere\n"+
		"b.rego:1: package: package capgate is not allowed: extra modules must use a package under capgate.deny.<name>; they may only add deny rules, never rules of capgate.authz or elsewhere")
}

func TestDenyModuleEndToEnd(t *testing.T) {
	partner := map[string]any{"authenticated": true, "subject": "orchestrator", "tenant": "acme", "scopes": []any{"recon.run"}}

	builtin, err := rego.Modules()
	require.NoError(t, err)
	visible, entitled := decide(t, builtin, partner)
	require.ElementsMatch(t, []any{"lookup-invoice", "reconcile-invoice"}, visible)
	require.ElementsMatch(t, []any{"lookup-invoice", "reconcile-invoice"}, entitled)

	withSec, err := regocheck.Modules(map[string]string{"sec/deny.rego": secModule})
	require.NoError(t, err)
	visible, entitled = decide(t, withSec, partner)
	require.ElementsMatch(t, []any{"lookup-invoice"}, visible)
	require.ElementsMatch(t, []any{"lookup-invoice"}, entitled)

	breakGlass := map[string]any{"authenticated": true, "subject": "break-glass", "tenant": "acme", "scopes": []any{"recon.run"}}
	_, entitled = decide(t, withSec, breakGlass)
	require.ElementsMatch(t, []any{"lookup-invoice", "reconcile-invoice"}, entitled)

	// A module that would widen is refused before it is ever compiled ...
	_, err = regocheck.Modules(map[string]string{"evil/widen.rego": widenModule})
	require.ErrorContains(t, err, "package capgate.authz is not allowed")

	// ... and the refusal matters: compiled anyway, it would widen.
	widened := map[string]string{"evil/widen.rego": widenModule}
	for f, src := range builtin {
		widened[f] = src
	}
	anonymous := map[string]any{"authenticated": false}
	visible, entitled = decide(t, widened, anonymous)
	require.Contains(t, visible, "audit-trail")
	require.Contains(t, entitled, "audit-trail")
}

func TestExtraModulesFileNameClash(t *testing.T) {
	builtin, err := rego.Modules()
	require.NoError(t, err)
	for f := range builtin {
		_, err := regocheck.Modules(map[string]string{f: secModule})
		require.ErrorContains(t, err, "file name is used by the built-in policy")
	}
}
