package engine_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
)

func newEngine(t testing.TB, reg *manifest.Registry, extra map[string]string, opts ...engine.Option) *engine.Engine {
	t.Helper()
	s, err := compile.Build(reg, compiletest.Auth(), extra)
	require.NoError(t, err)
	e, err := engine.New(context.Background(), s, opts...)
	require.NoError(t, err)
	return e
}

// callers covers every rule of the fixture: anonymity, scopes, tenant
// lists, the three preview opt-ins, and the subject.
var callers = []struct {
	name                    string
	caller                  engine.Caller
	wantVisible, wantEntitl []string
}{
	{
		name:        "anonymous",
		caller:      engine.Caller{},
		wantVisible: []string{"export-ledger", "lookup-invoice"},
		wantEntitl:  []string{"lookup-invoice"},
	},
	{
		name:        "authenticated without scopes",
		caller:      engine.Caller{Authenticated: true, Subject: "alice", Tenant: "acme"},
		wantVisible: []string{"export-ledger", "lookup-invoice"},
		wantEntitl:  []string{"lookup-invoice"},
	},
	{
		name:        "partner of a listed tenant with recon.run",
		caller:      engine.Caller{Authenticated: true, Subject: "orchestrator", Tenant: "acme", Scopes: []string{"recon.run"}},
		wantVisible: []string{"export-ledger", "lookup-invoice", "reconcile-invoice", "reconcile-invoice-v2"},
		wantEntitl:  []string{"lookup-invoice", "reconcile-invoice", "reconcile-invoice-v2"},
	},
	{
		name:        "partner of an unlisted tenant with recon.run",
		caller:      engine.Caller{Authenticated: true, Subject: "orchestrator", Tenant: "initech", Scopes: []string{"recon.run"}},
		wantVisible: []string{"export-ledger", "lookup-invoice", "reconcile-invoice"},
		wantEntitl:  []string{"lookup-invoice", "reconcile-invoice"},
	},
	{
		name:        "scopes but not authenticated",
		caller:      engine.Caller{Tenant: "acme", Scopes: []string{"recon.run", "export.run", "finance.read", compiletest.PreviewScope}},
		wantVisible: []string{"export-ledger", "lookup-invoice"},
		wantEntitl:  []string{"lookup-invoice"},
	},
	{
		name:        "finance reader without preview",
		caller:      engine.Caller{Authenticated: true, Tenant: "acme", Scopes: []string{"finance.read", "export.run"}},
		wantVisible: []string{"export-ledger", "lookup-invoice"},
		wantEntitl:  []string{"export-ledger", "lookup-invoice"},
	},
	{
		name:        "preview by scope",
		caller:      engine.Caller{Authenticated: true, Tenant: "acme", Scopes: []string{"finance.read", compiletest.PreviewScope}},
		wantVisible: []string{"export-ledger", "forecast-cashflow", "lookup-invoice"},
		wantEntitl:  []string{"forecast-cashflow", "lookup-invoice"},
	},
	{
		name:        "preview by tenant",
		caller:      engine.Caller{Authenticated: true, Tenant: compiletest.PreviewTenant, Scopes: []string{"finance.read"}},
		wantVisible: []string{"export-ledger", "forecast-cashflow", "lookup-invoice"},
		wantEntitl:  []string{"forecast-cashflow", "lookup-invoice"},
	},
	{
		name:        "internal auditor",
		caller:      engine.Caller{Authenticated: true, Tenant: "acme", Scopes: []string{"audit.read"}},
		wantVisible: []string{"export-ledger", "lookup-invoice"},
		wantEntitl:  []string{"audit-ledger", "lookup-invoice"},
	},
	{
		name:        "mallory (only refused when the deny module is loaded)",
		caller:      engine.Caller{Authenticated: true, Subject: "mallory", Tenant: "acme", Scopes: []string{"recon.run"}},
		wantVisible: []string{"export-ledger", "lookup-invoice", "reconcile-invoice", "reconcile-invoice-v2"},
		wantEntitl:  []string{"lookup-invoice", "reconcile-invoice", "reconcile-invoice-v2"},
	},
}

func TestViewMatchesPolicy(t *testing.T) {
	e := newEngine(t, compiletest.Registry(), nil)
	for _, tt := range callers {
		t.Run(tt.name, func(t *testing.T) {
			v, err := e.View(t.Context(), tt.caller)
			require.NoError(t, err)
			require.Equal(t, tt.wantVisible, v.VisibleIDs())
			require.Equal(t, tt.wantEntitl, v.EntitledIDs())
			require.Equal(t, e.Revision(), v.Revision())
			require.Equal(t, len(tt.wantEntitl) > 0, v.AnyEntitled())
			require.Equal(t, tt.wantVisible, capIDs(v.VisibleCapabilities()))
			require.Equal(t, tt.wantEntitl, capIDs(v.EntitledCapabilities()))
		})
	}
}

func capIDs(caps []manifest.Capability) []string {
	out := make([]string, 0, len(caps))
	for _, c := range caps {
		out = append(out, c.ID)
	}
	return out
}

// TestViewAgreesWithDecide is the invariant that keeps cards, router and
// execution from disagreeing: for every caller and capability the cached
// view, Decide and Explain give the same answer.
func TestViewAgreesWithDecide(t *testing.T) {
	engines := map[string]*engine.Engine{
		"fixture":           newEngine(t, compiletest.Registry(), nil),
		"fixture with deny": newEngine(t, compiletest.Registry(), map[string]string{"sec": denySec}),
		"synthetic 120":     newEngine(t, compiletest.Synthetic(120), nil),
	}
	synthCallers := []engine.Caller{
		{},
		{Authenticated: true, Tenant: compiletest.Tenant(0), Scopes: []string{compiletest.Scope(1), compiletest.Scope(2)}},
		{Authenticated: true, Tenant: compiletest.Tenant(3), Scopes: []string{compiletest.Scope(7), compiletest.PreviewScope}},
		{Authenticated: true, Tenant: compiletest.PreviewTenant, Scopes: []string{compiletest.Scope(0), compiletest.Scope(5), compiletest.Scope(9)}},
	}
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			cs := synthCallers
			for _, c := range callers {
				cs = append(cs, c.caller)
			}
			for _, c := range cs {
				v, err := e.View(t.Context(), c)
				require.NoError(t, err)
				explained, err := e.Explain(t.Context(), c)
				require.NoError(t, err)
				reg := e.Snapshot().Registry
				all := reg.All()
				require.Len(t, explained, len(all))
				_, ok := v.EntitledAt(manifest.NewRegistry(all), 0)
				require.False(t, ok, "another registry, even with the same manifests, is asked by id")
				for i, capability := range all {
					at, ok := v.EntitledAt(reg, i)
					require.True(t, ok)
					require.Equal(t, v.Entitled(capability.ID), at, "%+v entitled at %d (%s)", c, i, capability.ID)
					d, err := e.Decide(t.Context(), c, capability.ID)
					require.NoError(t, err)
					require.True(t, d.Exists)
					require.Equal(t, v.Visible(capability.ID), d.Visible, "%+v visible %s", c, capability.ID)
					require.Equal(t, v.Entitled(capability.ID), d.Entitled, "%+v entitled %s", c, capability.ID)
					require.Equal(t, d, explained[i])
					require.Equal(t, string(capability.State), d.State)
					require.Equal(t, string(capability.Visibility), d.Visibility)
					require.Equal(t, d.Visible, !hasRefusal(d.VisibleReasons) && len(d.VisibleReasons) > 0)
					require.Equal(t, d.Entitled, !hasRefusal(d.EntitledReasons) && len(d.EntitledReasons) > 0)
				}
			}
		})
	}
}

func hasRefusal(rs []engine.Reason) bool {
	for _, r := range rs {
		if r.Effect == "refuse" {
			return true
		}
	}
	return false
}

func TestDecideReasons(t *testing.T) {
	e := newEngine(t, compiletest.Registry(), nil)
	partner := engine.Caller{Authenticated: true, Tenant: "initech", Scopes: []string{"recon.run"}}
	tests := []struct {
		name         string
		caller       engine.Caller
		capability   string
		wantExists   bool
		wantEntitled bool
		wantReason   engine.Reason // must be among the entitled reasons
	}{
		{name: "anonymous public", capability: "lookup-invoice", wantExists: true, wantEntitled: true,
			wantReason: engine.Reason{Rule: "auth.anonymous_public", Effect: "grant"}},
		{name: "missing scope", capability: "reconcile-invoice", wantExists: true,
			wantReason: engine.Reason{Rule: "scope.missing", Effect: "refuse", Detail: "recon.run"}},
		{name: "tenant not listed", caller: partner, capability: "reconcile-invoice-v2", wantExists: true,
			wantReason: engine.Reason{Rule: "tenant.not_listed", Effect: "refuse", Detail: "initech"}},
		{name: "deprecated names its replacement", caller: partner, capability: "reconcile-invoice", wantExists: true, wantEntitled: true,
			wantReason: engine.Reason{Rule: "state.deprecated", Effect: "grant", Detail: "reconcile-invoice-v2"}},
		{name: "removed", caller: partner, capability: "reconcile-invoice-v0", wantExists: true,
			wantReason: engine.Reason{Rule: "state.removed", Effect: "refuse", Detail: "reconcile-invoice-v2"}},
		{name: "unknown capability", caller: partner, capability: "no-such-thing",
			wantReason: engine.Reason{Rule: "capability.unknown", Effect: "refuse"}},
		{name: "empty capability id", caller: partner, capability: "",
			wantReason: engine.Reason{Rule: "capability.unknown", Effect: "refuse"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := e.Decide(t.Context(), tt.caller, tt.capability)
			require.NoError(t, err)
			require.Equal(t, tt.capability, d.Capability)
			require.Equal(t, tt.wantExists, d.Exists)
			require.Equal(t, tt.wantEntitled, d.Entitled)
			require.Contains(t, d.EntitledReasons, tt.wantReason)
		})
	}
}

const denySec = `package capgate.deny.sec

deny contains {"capability": "lookup-invoice", "reason": "maintenance"} if input.caller.subject == "mallory"
`

func TestDenyModuleRefusesBySubject(t *testing.T) {
	e := newEngine(t, compiletest.Registry(), map[string]string{"sec": denySec})
	base := engine.Caller{Authenticated: true, Tenant: "acme", Scopes: []string{"recon.run"}}
	tests := []struct {
		subject      string
		wantEntitled bool
	}{
		{subject: "alice", wantEntitled: true},
		{subject: "", wantEntitled: true},
		{subject: "mallory", wantEntitled: false},
		{subject: "alice", wantEntitled: true}, // after mallory: no cache bleed
	}
	for _, tt := range tests {
		t.Run(tt.subject, func(t *testing.T) {
			c := base
			c.Subject = tt.subject
			v, err := e.View(t.Context(), c)
			require.NoError(t, err)
			require.Equal(t, tt.wantEntitled, v.Entitled("lookup-invoice"))
			require.Equal(t, tt.wantEntitled, v.Visible("lookup-invoice"))
			require.True(t, v.Entitled("reconcile-invoice"), "the deny names one capability only")
			d, err := e.Decide(t.Context(), c, "lookup-invoice")
			require.NoError(t, err)
			require.Equal(t, tt.wantEntitled, d.Entitled)
			if !tt.wantEntitled {
				require.Contains(t, d.EntitledReasons, engine.Reason{Rule: "deny.sec", Effect: "refuse", Detail: "maintenance"})
				require.Contains(t, d.VisibleReasons, engine.Reason{Rule: "deny.sec", Effect: "refuse", Detail: "maintenance"})
			}
		})
	}
}

func TestViewCache(t *testing.T) {
	e := newEngine(t, compiletest.Registry(), nil)
	ctx := t.Context()
	view := func(c engine.Caller) *engine.View {
		t.Helper()
		v, err := e.View(ctx, c)
		require.NoError(t, err)
		return v
	}
	base := engine.Caller{Authenticated: true, Subject: "alice", Tenant: "acme", Scopes: []string{"recon.run", "finance.read"}}
	first := view(base)

	same := []struct {
		name string
		c    engine.Caller
	}{
		{name: "identical", c: base},
		{name: "scope order", c: engine.Caller{Authenticated: true, Subject: "alice", Tenant: "acme", Scopes: []string{"finance.read", "recon.run"}}},
		{name: "duplicate scopes", c: engine.Caller{Authenticated: true, Subject: "alice", Tenant: "acme", Scopes: []string{"recon.run", "finance.read", "recon.run"}}},
		{name: "another subject (no extra modules)", c: engine.Caller{Authenticated: true, Subject: "bob", Tenant: "acme", Scopes: []string{"recon.run", "finance.read"}}},
	}
	for _, tt := range same {
		t.Run("hit/"+tt.name, func(t *testing.T) {
			require.Same(t, first, view(tt.c))
		})
	}
	other := []struct {
		name string
		c    engine.Caller
	}{
		{name: "tenant", c: engine.Caller{Authenticated: true, Tenant: "globex", Scopes: base.Scopes}},
		{name: "scopes", c: engine.Caller{Authenticated: true, Tenant: "acme", Scopes: []string{"recon.run"}}},
		{name: "authentication", c: engine.Caller{Tenant: "acme", Scopes: base.Scopes}},
		{name: "scope joined differently", c: engine.Caller{Authenticated: true, Tenant: "acme", Scopes: []string{"recon.runfinance.read"}}},
	}
	for _, tt := range other {
		t.Run("miss/"+tt.name, func(t *testing.T) {
			require.NotSame(t, first, view(tt.c))
		})
	}

	t.Run("subject is part of the class with extra modules", func(t *testing.T) {
		ed := newEngine(t, compiletest.Registry(), map[string]string{"sec": denySec})
		a, err := ed.View(ctx, base)
		require.NoError(t, err)
		b, err := ed.View(ctx, engine.Caller{Authenticated: true, Subject: "bob", Tenant: "acme", Scopes: base.Scopes})
		require.NoError(t, err)
		require.NotSame(t, a, b)
		again, err := ed.View(ctx, base)
		require.NoError(t, err)
		require.Same(t, a, again)
	})
}

func TestViewCacheBounded(t *testing.T) {
	e := newEngine(t, compiletest.Registry(), nil, engine.WithCacheSize(2))
	ctx := t.Context()
	tenants := []string{"a", "b", "c"}
	views := make([]*engine.View, len(tenants))
	for i, tenant := range tenants {
		v, err := e.View(ctx, engine.Caller{Authenticated: true, Tenant: tenant})
		require.NoError(t, err)
		views[i] = v
	}
	require.Equal(t, 2, e.CachedViews())
	// "a" was the least recently used: evicted, so a new view is built.
	v, err := e.View(ctx, engine.Caller{Authenticated: true, Tenant: "a"})
	require.NoError(t, err)
	require.NotSame(t, views[0], v)
	require.Equal(t, views[0].EntitledIDs(), v.EntitledIDs())
	// "c" is still cached.
	v, err = e.View(ctx, engine.Caller{Authenticated: true, Tenant: "c"})
	require.NoError(t, err)
	require.Same(t, views[2], v)
	require.Equal(t, 2, e.CachedViews())
}

func TestViewSingleFlight(t *testing.T) {
	e := newEngine(t, compiletest.Synthetic(2000), nil)
	c := engine.Caller{Authenticated: true, Tenant: compiletest.Tenant(1), Scopes: []string{compiletest.Scope(3)}}
	const n = 32
	got := make([]*engine.View, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = e.View(t.Context(), c)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Same(t, got[0], got[i])
	}
	require.Equal(t, 1, e.CachedViews())
}

func TestCancelledContext(t *testing.T) {
	e := newEngine(t, compiletest.Registry(), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	v, err := e.View(ctx, engine.Caller{})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "evaluate policy")
	require.Nil(t, v)
	_, err = e.Decide(ctx, engine.Caller{}, "lookup-invoice")
	require.ErrorIs(t, err, context.Canceled)
	ds, err := e.Explain(ctx, engine.Caller{})
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, ds)
	require.Equal(t, 0, e.CachedViews())

	s, err := compile.Build(compiletest.Registry(), compiletest.Auth(), nil)
	require.NoError(t, err)
	_, err = engine.New(ctx, s)
	require.ErrorIs(t, err, context.Canceled)
}

func TestNewRefuses(t *testing.T) {
	s, err := compile.Build(compiletest.Registry(), compiletest.Auth(), nil)
	require.NoError(t, err)
	tests := []struct {
		name    string
		s       *compile.Snapshot
		opts    []engine.Option
		wantErr string
	}{
		{name: "nil snapshot", wantErr: "nil snapshot"},
		{name: "zero cache", s: s, opts: []engine.Option{engine.WithCacheSize(0)}, wantErr: "cache size"},
		{name: "broken module", s: &compile.Snapshot{Registry: s.Registry, Modules: map[string]string{"x.rego": "package capgate.x\n\np if {"}}, wantErr: "compile policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := engine.New(t.Context(), tt.s, tt.opts...)
			require.ErrorContains(t, err, tt.wantErr)
			require.Nil(t, e)
		})
	}
}

func TestEngineFromBundle(t *testing.T) {
	s, err := compile.Build(compiletest.Registry(), compiletest.Auth(), map[string]string{"sec": denySec})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, compile.WriteBundle(&buf, s, compile.BundleOptions{}))
	read, err := compile.ReadBundle(&buf, compile.VerifyOptions{})
	require.NoError(t, err)

	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	direct, err := engine.New(t.Context(), s, engine.WithLogger(log))
	require.NoError(t, err)
	fromBundle, err := engine.New(t.Context(), read, engine.WithLogger(log))
	require.NoError(t, err)
	require.Equal(t, direct.Revision(), fromBundle.Revision())
	for _, tt := range callers {
		a, err := direct.Explain(t.Context(), tt.caller)
		require.NoError(t, err)
		b, err := fromBundle.Explain(t.Context(), tt.caller)
		require.NoError(t, err)
		require.Equal(t, a, b, tt.name)
	}
}

// TestEngineUsesTheCheckedPolicy: the engine evaluates the very compiler
// and store the build's smoke test evaluated, not copies compiled and
// built again: a change written into the snapshot's store shows in an
// engine made afterwards.
func TestEngineUsesTheCheckedPolicy(t *testing.T) {
	ctx := t.Context()
	s, err := compile.Build(compiletest.Registry(), compiletest.Auth(), nil)
	require.NoError(t, err)
	compiler, store, err := s.Policy()
	require.NoError(t, err)
	again, againStore, err := s.Policy()
	require.NoError(t, err)
	require.Same(t, compiler, again)
	require.Same(t, store, againStore)

	anonymous := engine.Caller{}
	entitled := func(s *compile.Snapshot) bool {
		t.Helper()
		e, err := engine.New(ctx, s)
		require.NoError(t, err)
		d, err := e.Decide(ctx, anonymous, "lookup-invoice")
		require.NoError(t, err)
		return d.Entitled
	}
	require.True(t, entitled(s), "the fixture lets anonymous callers use public capabilities")

	// Turn anonymous use off in the kept store only.
	require.NoError(t, storage.WriteOne(ctx, store, storage.ReplaceOp,
		storage.MustParsePath("/capgate/settings/anonymous_public"), false))
	require.False(t, entitled(s), "the engine evaluates the snapshot's own store")

	// A snapshot not made by Build or ReadBundle gets its own, built from
	// its settings.
	made := &compile.Snapshot{Registry: s.Registry, Settings: s.Settings, Modules: s.Modules, Revision: s.Revision}
	c2, store2, err := made.Policy()
	require.NoError(t, err)
	require.NotSame(t, compiler, c2)
	require.NotSame(t, store, store2)
	require.True(t, entitled(made))
}
