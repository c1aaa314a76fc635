package rego_test

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/regocheck"
)

// This file evaluates with OPA's rego package; the tests that read the embedded policy (this
// package, also named rego) do so in other files, so neither import needs an alias.

// decide evaluates visible and entitled with OPA for the caller, over a store
// holding the finance agent's data.
func decide(t *testing.T, mods map[string]string, caller map[string]any) (visible, entitled []any) {
	t.Helper()
	c, err := regocheck.Compile(mods, true)
	require.NoError(t, err)
	store := inmem.NewFromObject(map[string]any{"capgate": map[string]any{
		"capabilities": map[string]any{
			"lookup-invoice":    map[string]any{"id": "lookup-invoice", "state": "ga", "visibility": "public", "requires_scopes": []any{}, "tenants": "*", "handler": "h", "tags": []any{}},
			"reconcile-invoice": map[string]any{"id": "reconcile-invoice", "state": "ga", "visibility": "extended", "requires_scopes": []any{"recon.run"}, "tenants": []any{"acme"}, "handler": "h", "tags": []any{}},
			"audit-trail":       map[string]any{"id": "audit-trail", "state": "ga", "visibility": "internal", "requires_scopes": []any{"audit.read"}, "tenants": "*", "handler": "h", "tags": []any{}},
		},
		"settings": map[string]any{"preview_scope": "", "preview_tenants": []any{}, "anonymous_public": false},
	}})
	rs, err := rego.New(
		rego.Compiler(c),
		rego.Store(store),
		rego.Query("visible := data.capgate.authz.visible; entitled := data.capgate.authz.entitled"),
		rego.Input(map[string]any{"caller": caller}),
	).Eval(t.Context())
	require.NoError(t, err)
	require.Len(t, rs, 1)
	return rs[0].Bindings["visible"].([]any), rs[0].Bindings["entitled"].([]any)
}
