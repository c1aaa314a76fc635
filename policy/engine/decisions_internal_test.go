package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/manifest"
)

// Deny modules that read every part of the input a decision may depend on:
// the subject, the tenant, the scopes (as a set and by position) and the
// capability's limits.
const (
	denyBySubject = `package capgate.deny.subject

deny contains {"capability": "lookup-invoice", "reason": "maintenance"} if input.caller.subject == "mallory"
`
	denyByScope = `package capgate.deny.scope

deny contains {"capability": "*", "reason": "suspended scope"} if "suspended" in input.caller.scopes
`
	denyByLimits = `package capgate.deny.cost

deny contains {"capability": id, "reason": "not on the free plan"} if {
	input.caller.tenant == "hobbyist"
	some id, cap in data.capgate.capabilities
	cap.limits.cost_class == "medium"
}
`
)

// diffCallers are callers of distinct and of equal classes: equal up to
// scope order, duplicates and (without extra modules) the subject, so that
// a cached decision is served to a caller other than the one it was
// evaluated for.
func diffCallers() []Caller {
	cs := []Caller{
		{},
		{Subject: "anon", Scopes: []string{"recon.run"}},
		{Authenticated: true, Subject: "alice", Tenant: "acme"},
		{Authenticated: true, Subject: "bob", Tenant: "acme"},
		{Authenticated: true, Subject: "mallory", Tenant: "acme", Scopes: []string{"recon.run"}},
		{Authenticated: true, Subject: "alice", Tenant: "acme", Scopes: []string{"recon.run"}},
		{Authenticated: true, Subject: "alice", Tenant: "acme", Scopes: []string{"recon.run", "finance.read", "recon.run"}},
		{Authenticated: true, Subject: "alice", Tenant: "acme", Scopes: []string{"finance.read", "recon.run"}},
		{Authenticated: true, Subject: "carol", Tenant: "initech", Scopes: []string{"recon.run", "suspended"}},
		{Authenticated: true, Tenant: "hobbyist", Scopes: []string{"recon.run", "audit.read"}},
		{Authenticated: true, Tenant: compiletest.PreviewTenant, Scopes: []string{"finance.read", "export.run"}},
		{Authenticated: true, Tenant: "acme", Scopes: []string{compiletest.PreviewScope, "finance.read"}},
		{Authenticated: true, Tenant: "globex", Scopes: []string{"audit.read", "export.run", "finance.read"}},
	}
	for i := range 12 {
		cs = append(cs, Caller{
			Authenticated: i%4 != 0,
			Subject:       fmt.Sprintf("user-%d", i%3),
			Tenant:        compiletest.Tenant(i % 5),
			Scopes:        []string{compiletest.Scope(i % 10), compiletest.Scope((i + 3) % 10), compiletest.Scope(i % 10)},
		})
	}
	return cs
}

// revisions are successive revisions of one deployment, as reloads
// produce them: the manifests change (state, tenants, scopes, limits) and
// deny modules come and go.
func revisions() []struct {
	name  string
	reg   *manifest.Registry
	extra map[string]string
} {
	changed := compiletest.Capabilities()
	for i := range changed {
		switch changed[i].ID {
		case "lookup-invoice":
			changed[i].State = manifest.StateDeprecated
			changed[i].ReplacedBy = "reconcile-invoice-v2"
			changed[i].Limits = map[string]any{"cost_class": "medium", manifest.LimitMaxParts: int64(2)}
		case "reconcile-invoice-v2":
			changed[i].Tenants = manifest.Tenants{List: []string{"initech"}}
		case "forecast-cashflow":
			changed[i].State = manifest.StateGA
			changed[i].RequiresScopes = []string{"finance.read", "export.run"}
		}
	}
	return []struct {
		name  string
		reg   *manifest.Registry
		extra map[string]string
	}{
		{name: "fixture", reg: compiletest.Registry()},
		{name: "deny by subject", reg: compiletest.Registry(), extra: map[string]string{"subject": denyBySubject}},
		{name: "manifests changed, deny modules added", reg: manifest.NewRegistry(changed),
			extra: map[string]string{"subject": denyBySubject, "scope": denyByScope, "cost": denyByLimits}},
		{name: "deny modules removed", reg: manifest.NewRegistry(changed)},
		{name: "synthetic 40", reg: compiletest.Synthetic(40)},
		{name: "synthetic 40 with deny", reg: compiletest.Synthetic(40), extra: map[string]string{"scope": denyByScope}},
	}
}

// TestDecideCacheMatchesPlain is the differential test of the decision
// cache: over successive revisions, for every caller and capability (and
// ids outside the registry), the cached Decide gives exactly the answer
// of an evaluation of the plain decision query for that very caller,
// whether the entry was evaluated for this caller or another of its class,
// and whether it was read cold, warm or after being evicted.
func TestDecideCacheMatchesPlain(t *testing.T) {
	ctx := t.Context()
	callers := diffCallers()
	var prev *Engine
	for _, rev := range revisions() {
		t.Run(rev.name, func(t *testing.T) {
			s, err := compile.Build(rev.reg, compiletest.Auth(), rev.extra)
			require.NoError(t, err)
			sizes := []int{DefaultDecisionCacheSize, 3} // 3: evicted all the time
			if rev.reg.Len() > 10 {
				sizes = sizes[:1] // the synthetic registries: the default only, for time
			}
			for _, size := range sizes {
				e, err := New(ctx, s, WithDecisionCacheSize(size))
				require.NoError(t, err)
				ids := append([]string{"no-such-capability", ""}, regIDs(rev.reg)...)
				for pass := range 2 { // cold, then warm (or evicted, with 3 entries)
					for _, c := range callers {
						for _, id := range ids {
							want, err := e.decide(ctx, c, id)
							require.NoError(t, err)
							got, err := e.Decide(ctx, c, id)
							require.NoError(t, err)
							require.Equal(t, want, got, "pass %d, caller %+v, capability %q", pass, c, id)
						}
					}
				}
				require.LessOrEqual(t, e.CachedDecisions(), size)
				if size > 3 {
					require.Equal(t, len(regIDs(rev.reg))*classes(e, callers), e.CachedDecisions(),
						"one entry per class and existing capability")
				}
				if prev != nil && prev.Revision() != e.Revision() {
					// The previous revision's engine answers for its own
					// policy; nothing of it reaches this one.
					for _, c := range callers {
						for _, id := range regIDs(rev.reg) {
							want, err := e.decide(ctx, c, id)
							require.NoError(t, err)
							got, err := e.Decide(ctx, c, id)
							require.NoError(t, err)
							require.Equal(t, want, got)
						}
					}
				}
			}
			prev, err = New(ctx, s)
			require.NoError(t, err)
		})
	}
}

// classes counts the entitlement classes among cs.
func classes(e *Engine, cs []Caller) int {
	seen := map[string]bool{}
	for _, c := range cs {
		seen[classKey(e.class(c))] = true
	}
	return len(seen)
}

// TestDecideCacheChangesWithRevision shows that the revisions above differ
// where the differential test needs them to: a cache that outlived a
// reload would serve the old answer and fail it.
func TestDecideCacheChangesWithRevision(t *testing.T) {
	ctx := t.Context()
	revs := revisions()
	engines := make([]*Engine, 4)
	for i := range engines {
		s, err := compile.Build(revs[i].reg, compiletest.Auth(), revs[i].extra)
		require.NoError(t, err)
		engines[i], err = New(ctx, s)
		require.NoError(t, err)
	}
	mallory := Caller{Authenticated: true, Subject: "mallory", Tenant: "acme", Scopes: []string{"recon.run"}}
	hobbyist := Caller{Authenticated: true, Tenant: "hobbyist", Scopes: []string{"recon.run"}}
	suspended := Caller{Authenticated: true, Tenant: "acme", Scopes: []string{"recon.run", "suspended"}}
	tests := []struct {
		caller     Caller
		capability string
		want       []bool // entitled at each revision
	}{
		{caller: mallory, capability: "lookup-invoice", want: []bool{true, false, false, true}},
		{caller: hobbyist, capability: "reconcile-invoice", want: []bool{true, true, false, true}},
		{caller: suspended, capability: "reconcile-invoice-v2", want: []bool{true, true, false, false}},
	}
	for _, tt := range tests {
		for i, e := range engines {
			d, err := e.Decide(ctx, tt.caller, tt.capability)
			require.NoError(t, err)
			require.Equal(t, tt.want[i], d.Entitled, "%s at revision %d (%s)", tt.capability, i, revs[i].name)
		}
	}
	d, err := engines[2].Decide(ctx, hobbyist, "lookup-invoice")
	require.NoError(t, err)
	require.Equal(t, map[string]any{"cost_class": "medium", manifest.LimitMaxParts: int64(2)}, d.Limits)
	require.Contains(t, d.EntitledReasons, Reason{Rule: "deny.cost", Effect: "refuse", Detail: "not on the free plan"})
}

func TestDecideUnknownNotCached(t *testing.T) {
	s, err := compile.Build(compiletest.Registry(), compiletest.Auth(), nil)
	require.NoError(t, err)
	e, err := New(context.Background(), s)
	require.NoError(t, err)
	for i := range 100 {
		d, err := e.Decide(t.Context(), Caller{}, fmt.Sprintf("client-text-%d", i))
		require.NoError(t, err)
		require.False(t, d.Exists)
	}
	require.Zero(t, e.CachedDecisions())
}

func regIDs(reg *manifest.Registry) []string {
	out := make([]string, 0, reg.Len())
	for _, c := range reg.All() {
		out = append(out, c.ID)
	}
	return out
}
