package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
)

func TestDecisionCarriesLimits(t *testing.T) {
	e := newEngine(t, compiletest.Registry(), nil)
	partner := engine.Caller{Authenticated: true, Tenant: "acme", Scopes: []string{"recon.run"}}
	tests := []struct {
		name       string
		caller     engine.Caller
		capability string
		want       map[string]any
	}{
		{name: "entitled", caller: partner, capability: "reconcile-invoice",
			want: map[string]any{"max_pdf_pages": int64(200), "cost_class": "medium"}},
		{name: "refused still reports them", capability: "reconcile-invoice",
			want: map[string]any{"max_pdf_pages": int64(200), "cost_class": "medium"}},
		{name: "none", caller: partner, capability: "lookup-invoice"},
		{name: "unknown capability", caller: partner, capability: "no-such-thing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := e.Decide(t.Context(), tt.caller, tt.capability)
			require.NoError(t, err)
			require.Equal(t, tt.want, d.Limits)
		})
	}
	ds, err := e.Explain(t.Context(), partner)
	require.NoError(t, err)
	for _, d := range ds {
		if d.Capability == "reconcile-invoice" {
			require.Equal(t, map[string]any{"max_pdf_pages": int64(200), "cost_class": "medium"}, d.Limits)
		}
	}
}

// denyCostly refuses capabilities whose limits say cost_class high to the
// tenants on the free plan: a deny module reading limits.
const denyCostly = `package capgate.deny.cost

free_plan := {"hobbyist"}

deny contains {"capability": id, "reason": "cost_class high is not on the free plan"} if {
	input.caller.tenant in free_plan
	some id, cap in data.capgate.capabilities
	cap.limits.cost_class == "high"
}
`

func TestDenyModuleReadsLimits(t *testing.T) {
	caps := compiletest.Capabilities()
	for i := range caps {
		if caps[i].ID == "lookup-invoice" {
			caps[i].Limits = map[string]any{"cost_class": "high", manifest.LimitMaxParts: int64(4)}
		}
	}
	e := newEngine(t, manifest.NewRegistry(caps), map[string]string{"cost": denyCostly})
	tests := []struct {
		tenant       string
		wantEntitled bool
	}{
		{tenant: "acme", wantEntitled: true},
		{tenant: "hobbyist", wantEntitled: false},
		{tenant: "acme", wantEntitled: true}, // after hobbyist: no cache bleed
	}
	for _, tt := range tests {
		t.Run(tt.tenant, func(t *testing.T) {
			c := engine.Caller{Authenticated: true, Subject: "alice", Tenant: tt.tenant}
			v, err := e.View(t.Context(), c)
			require.NoError(t, err)
			require.Equal(t, tt.wantEntitled, v.Entitled("lookup-invoice"))
			require.Equal(t, tt.wantEntitled, v.Visible("lookup-invoice"))
			d, err := e.Decide(t.Context(), c, "lookup-invoice")
			require.NoError(t, err)
			require.Equal(t, tt.wantEntitled, d.Entitled)
			if !tt.wantEntitled {
				require.Contains(t, d.EntitledReasons, engine.Reason{Rule: "deny.cost", Effect: "refuse", Detail: "cost_class high is not on the free plan"})
			}
			// reconcile-invoice's cost_class is medium: never refused by the module.
			d, err = e.Decide(t.Context(), engine.Caller{Authenticated: true, Tenant: tt.tenant, Scopes: []string{"recon.run"}}, "reconcile-invoice")
			require.NoError(t, err)
			require.True(t, d.Entitled)
		})
	}
}
