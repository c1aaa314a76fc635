package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
)

// denyMany refuses by id, by "*" for one subject, with two modules naming
// the same capability, and by reading the capabilities' data.
const denyMany = `package capgate.deny.many

deny contains {"capability": "reconcile-invoice-v2", "reason": "tenant review"} if input.caller.tenant == "globex"

deny contains {"capability": "*", "reason": "kill switch"} if input.caller.subject == "mallory"

deny contains {"capability": id, "reason": "no finance tags for initech"} if {
	input.caller.tenant == "initech"
	some id, c in data.capgate.capabilities
	"finance" in c.tags
}
`

const denyOther = `package capgate.deny.other

deny contains {"capability": "reconcile-invoice-v2", "reason": "tenant review"} if input.caller.tenant == "globex"
`

// TestReviewAgreesWithExplain holds Review (reasons per profile, deny per
// id) to Explain (every capability's full report, but for its limits) for every caller of the
// engine tests plus deny-module cases, over the fixture and a synthetic
// registry with every state, replaced_by and tenant lists.
func TestReviewAgreesWithExplain(t *testing.T) {
	extra := map[string]string{"many": denyMany, "other": denyOther}
	cs := []engine.Caller{
		{Authenticated: true, Subject: "mallory", Tenant: "acme", Scopes: []string{"recon.run"}},
		{Authenticated: true, Tenant: "globex", Scopes: []string{"recon.run"}},
		{Authenticated: true, Tenant: "initech", Scopes: []string{"recon.run", "finance.read", compiletest.PreviewScope}},
		{Authenticated: true, Tenant: compiletest.Tenant(1), Scopes: []string{compiletest.Scope(1), compiletest.Scope(4)}},
		{Authenticated: true, Tenant: compiletest.Tenant(2), Scopes: []string{compiletest.Scope(2), compiletest.PreviewScope}},
	}
	for _, tt := range callers {
		cs = append(cs, tt.caller)
	}
	regs := map[string]*manifest.Registry{"fixture": compiletest.Registry(), "synthetic": compiletest.Synthetic(60)}
	for name, reg := range regs {
		for _, mods := range []map[string]string{nil, extra} {
			e := newEngine(t, reg, mods)
			for i, c := range cs {
				t.Run(fmt.Sprintf("%s/deny=%v/%d", name, mods != nil, i), func(t *testing.T) {
					want, err := e.Explain(t.Context(), c)
					require.NoError(t, err)
					r, err := e.Review(t.Context(), c)
					require.NoError(t, err)
					require.Equal(t, len(want), r.Len())
					for i, d := range want {
						d.Limits = nil // not part of a review
						require.Equal(t, d, r.Decision(i))
						require.Equal(t, d.Visible, r.Visible(i), d.Capability)
						require.Equal(t, d.Entitled, r.Entitled(i), d.Capability)
					}
				})
			}
		}
	}
}

func TestReviewCancelled(t *testing.T) {
	e := newEngine(t, compiletest.Registry(), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r, err := e.Review(ctx, engine.Caller{})
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, r)
}
