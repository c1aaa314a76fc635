package access_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/access"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/test/golden"
)

// requireGolden compares got with testdata/golden/name, or rewrites it with
// -update. The policy revisions (content hashes, which change with every
// edit of the embedded policy) are written as <base-revision> and
// <head-revision>.
func requireGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	for side, rev := range revisions {
		got = bytes.ReplaceAll(got, []byte(rev), []byte("<"+side+"-revision>"))
	}
	golden.Equal(t, filepath.Join("testdata", "golden", name), got)
}

type side struct {
	d *deployment.Deployment
	e *engine.Engine
}

// revisions maps each golden deployment to its policy revision.
var revisions = map[string]string{}

func load(t testing.TB, name string) side {
	t.Helper()
	return loadPath(t, name, filepath.Join("testdata", name, "capgate.yaml"))
}

func build(t testing.TB, s side, classes []access.Class) *access.Matrix {
	t.Helper()
	m, err := access.Build(context.Background(), s.e, classes)
	require.NoError(t, err)
	return m
}

func render(t *testing.T, write func(io.Writer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, write(&b))
	return b.Bytes()
}

func TestMatrixGolden(t *testing.T) {
	for _, name := range []string{"base", "head"} {
		t.Run(name, func(t *testing.T) {
			s := load(t, name)
			m := build(t, s, access.Derive(s.d.Snapshot))
			requireGolden(t, "matrix-"+name+".txt", render(t, func(w io.Writer) error { return access.WriteText(w, m) }))
			requireGolden(t, "matrix-"+name+".md", render(t, func(w io.Writer) error { return access.WriteMarkdown(w, m) }))
			requireGolden(t, "matrix-"+name+".json", render(t, func(w io.Writer) error { return access.WriteJSON(w, m) }))
		})
	}
}

// find returns the change of class × capability, or fails.
func find(t *testing.T, changes []access.CellChange, class, capability string) access.CellChange {
	t.Helper()
	for _, c := range changes {
		if c.Class == class && c.Capability == capability {
			return c
		}
	}
	require.Failf(t, "change not found", "%s × %s in %d changes", class, capability, len(changes))
	return access.CellChange{}
}

func diff(t testing.TB, base, head side) (*access.Matrix, *access.Matrix, *access.Diff) {
	t.Helper()
	classes := access.Derive(base.d.Snapshot, head.d.Snapshot)
	bm, hm := build(t, base, classes), build(t, head, classes)
	d, err := access.Compare(bm, hm)
	require.NoError(t, err)
	d.BaseName, d.HeadName = "testdata/base", "testdata/head"
	return bm, hm, d
}

func TestDiffGolden(t *testing.T) {
	base, head := load(t, "base"), load(t, "head")
	_, _, d := diff(t, base, head)

	requireGolden(t, "diff.txt", render(t, func(w io.Writer) error { return access.WriteDiffText(w, d) }))
	requireGolden(t, "diff.md", render(t, func(w io.Writer) error { return access.WriteDiffMarkdown(w, d) }))
	requireGolden(t, "diff.json", render(t, func(w io.Writer) error { return access.WriteDiffJSON(w, d) }))

	t.Run("deny module in policy_dirs removes a grant", func(t *testing.T) {
		c := find(t, d.Lost, "scopes:recon.run", "reconcile-invoice")
		require.Len(t, c.Causes, 1)
		require.Equal(t, "deny module sec", c.Causes[0].Field, "the loss is attributed to the new deny module")
		require.Contains(t, c.Causes[0].Cause(), "config: deny module sec added")
		require.Equal(t, access.Entitled, c.Base.Level())
		require.Equal(t, access.None, c.Head.Level())
		require.Contains(t, c.Head.EntitledReasons, engine.Reason{Rule: "deny.sec", Effect: "refuse", Detail: "incident 42"})
	})
	t.Run("tenant added to a capability", func(t *testing.T) {
		c := find(t, d.Gained, "tenant:globex", "reconcile-invoice-v2")
		require.Equal(t, access.None, c.Base.Level())
		require.Equal(t, access.Entitled, c.Head.Level())
		require.Contains(t, c.Base.EntitledReasons, engine.Reason{Rule: "tenant.not_listed", Effect: "refuse", Detail: "globex"})
		require.Contains(t, c.Head.EntitledReasons, engine.Reason{Rule: "tenant.listed", Effect: "grant", Detail: "globex"})
	})
	t.Run("capability made public", func(t *testing.T) {
		c := find(t, d.Gained, "anonymous", "export-ledger")
		require.Equal(t, access.None, c.Base.Level())
		require.Equal(t, access.Visible, c.Head.Level(), "public shows it to everyone, running still needs the scope")
		require.Contains(t, d.Capabilities, access.CapabilityChange{Kind: access.Changed, ID: "export-ledger",
			Base:   &access.Capability{ID: "export-ledger", State: "ga", Visibility: "extended"},
			Head:   &access.Capability{ID: "export-ledger", State: "ga", Visibility: "public"},
			Fields: []access.FieldChange{{Capability: "export-ledger", Field: "visibility", Base: "extended", Head: "public"}}})
		require.Equal(t, []access.FieldChange{{Capability: "export-ledger", Field: "visibility", Base: "extended", Head: "public"}}, c.Causes)
	})
	t.Run("preview promoted to ga", func(t *testing.T) {
		c := find(t, d.Gained, "all-scopes", "forecast-cashflow")
		require.Contains(t, c.Base.EntitledReasons, engine.Reason{Rule: "state.preview_not_opted_in", Effect: "refuse"})
		require.Equal(t, access.Entitled, c.Head.Level())
		for _, g := range d.Gained {
			require.NotEqual(t, "preview", g.Class, "an opted-in caller had it already: %+v", g)
		}
	})
	t.Run("capability added", func(t *testing.T) {
		c := find(t, d.Gained, "tenant:acme", "match-payments")
		require.Equal(t, []engine.Reason{{Rule: "capability.unknown", Effect: "refuse"}}, c.Base.EntitledReasons)
		require.Equal(t, access.Entitled, c.Head.Level())
		require.Contains(t, d.Capabilities, access.CapabilityChange{Kind: access.Added, ID: "match-payments",
			Head: &access.Capability{ID: "match-payments", State: "ga", Visibility: "extended"}})
		require.Equal(t, "match-payments: capability added (extended, ga)", c.Causes[0].Cause())
	})
	t.Run("removed capability", func(t *testing.T) {
		c := find(t, d.Lost, "anonymous", "lookup-invoice-v1")
		require.Equal(t, access.Visible, c.Base.Level())
		require.Contains(t, c.Head.EntitledReasons, engine.Reason{Rule: "state.removed", Effect: "refuse", Detail: "lookup-invoice"})
		gone := find(t, d.Lost, "all-scopes", "purge-cache")
		require.Equal(t, access.EntitledHidden, gone.Base.Level())
		require.Equal(t, []engine.Reason{{Rule: "capability.unknown", Effect: "refuse"}}, gone.Head.EntitledReasons)
		require.Contains(t, d.Capabilities, access.CapabilityChange{Kind: access.Removed, ID: "purge-cache",
			Base: &access.Capability{ID: "purge-cache", State: "ga", Visibility: "internal"}})
	})
}

func TestDiffOfItselfIsEmpty(t *testing.T) {
	for _, name := range []string{"base", "head"} {
		t.Run(name, func(t *testing.T) {
			s := load(t, name)
			_, _, d := diff(t, s, s)
			require.True(t, d.Empty(), "%+v", d)
			require.Contains(t, string(render(t, func(w io.Writer) error { return access.WriteDiffText(w, d) })), "no change in access")
		})
	}
}

func TestDeriveClasses(t *testing.T) {
	base, head := load(t, "base"), load(t, "head")
	names := func(cs []access.Class) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	require.Equal(t, []string{"anonymous", "authenticated",
		"scopes:export.run", "scopes:forecast.read", "scopes:ops.admin", "scopes:recon.run", "all-scopes",
		"tenant:acme", "other-tenant", "preview"}, names(access.Derive(base.d.Snapshot)))
	both := access.Derive(base.d.Snapshot, head.d.Snapshot)
	require.Contains(t, names(both), "tenant:globex", "a tenant only the head lists is asked on both sides")
	require.Contains(t, names(both), "scopes:ops.admin", "a scope only the base requires is asked on both sides")
}

func TestBuildRefuses(t *testing.T) {
	s := load(t, "base")
	tests := []struct {
		name    string
		classes []access.Class
		wantErr string
	}{
		{name: "no classes", wantErr: "no caller classes"},
		{name: "unnamed", classes: []access.Class{{}}, wantErr: "without a name"},
		{name: "twice", classes: []access.Class{{Name: "a"}, {Name: "a"}}, wantErr: `"a" named twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := access.Build(t.Context(), s.e, tt.classes)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := access.Build(ctx, s.e, access.Derive(s.d.Snapshot))
	require.ErrorIs(t, err, context.Canceled)
}

func TestParseCallers(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []access.CallerSpec
		wantErr string
	}{
		{name: "valid", in: "callers:\n  - name: anon\n  - name: partner\n    description: p\n    claims: {sub: p1, tenant: acme, scope: recon.run}\n",
			want: []access.CallerSpec{{Name: "anon"}, {Name: "partner", Description: "p", Claims: map[string]any{"sub": "p1", "tenant": "acme", "scope": "recon.run"}}}},
		{name: "empty", in: "callers: []\n", wantErr: "the list is empty"},
		{name: "unknown key", in: "callers:\n  - name: a\n    claim: {}\n", wantErr: "field claim not found"},
		{name: "no name", in: "callers:\n  - description: x\n", wantErr: "callers[0]: name is required"},
		{name: "twice", in: "callers:\n  - name: a\n  - name: a\n", wantErr: `callers[1]: name "a" is used twice`},
		{name: "not yaml", in: "callers: [", wantErr: "callers:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := access.ParseCallers([]byte(tt.in))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestDiffNamesCausesAndRanksRisk is the widening change of issue 26: the
// finance example (base) against a copy where purge-invoice-cache no
// longer requires ops.admin and apply-remittance is public. The scope
// change is named as the cause of every authenticated class's gain, and
// those runnable gains of an internal capability come before the visible
// ones of a public capability, in every output form.
func TestDiffNamesCausesAndRanksRisk(t *testing.T) {
	base := loadPath(t, "finance", filepath.Join("..", "..", "manifests", "finance", "capgate.yaml"))
	head := loadPath(t, "widen", filepath.Join("testdata", "widen", "capgate.yaml"))
	bm, hm, _ := diff(t, base, head)
	for _, m := range []*access.Matrix{bm, hm} {
		m.Facts.AddAuth(base.d.Config.Auth)
	}
	d, err := access.Compare(bm, hm)
	require.NoError(t, err)
	d.BaseName, d.HeadName = "manifests/finance/capgate.yaml", "testdata/widen/capgate.yaml"
	d.Provenance = access.Provenance{GeneratedAt: time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC), Version: "v0.0.0-test", Commit: "0123456789ab", Config: "testdata/widen/capgate.yaml"}

	scope := access.FieldChange{Capability: "purge-invoice-cache", Field: "requires_scopes", Base: "[ops.admin]", Head: "[]"}
	require.Equal(t, "purge-invoice-cache: requires_scopes [ops.admin] → []", scope.Cause())
	visibility := access.FieldChange{Capability: "apply-remittance", Field: "visibility", Base: "extended", Head: "public"}

	groups := d.GainGroups()
	require.Len(t, groups, 2)
	require.Equal(t, "purge-invoice-cache", groups[0].Capability, "runnable gains of an internal capability first")
	require.Equal(t, "finance-platform-team", groups[0].Owner)
	require.Equal(t, []access.FieldChange{scope}, groups[0].Causes)
	require.Equal(t, "apply-remittance", groups[1].Capability)
	require.Equal(t, []access.FieldChange{visibility}, groups[1].Causes)
	for _, c := range groups[0].Gains {
		require.Equal(t, []access.FieldChange{scope}, c.Causes, c.Class)
		require.True(t, c.Risk.Runs)
		require.Equal(t, "internal", c.Risk.Visibility)
	}
	require.Equal(t, "authenticated", groups[0].Gains[0].Class, "the class of every authenticated caller first")
	require.Equal(t, "every authenticated caller", groups[0].Gains[0].Risk.Callers)
	require.Equal(t, "anonymous", groups[1].Gains[0].Class, "then anonymous before narrower classes")
	require.False(t, groups[1].Gains[0].Risk.Runs)
	// Every form carries the cause and the order.
	for name, write := range map[string]func(io.Writer) error{
		"widen.txt":  func(w io.Writer) error { return access.WriteDiffText(w, d) },
		"widen.md":   func(w io.Writer) error { return access.WriteDiffMarkdown(w, d) },
		"widen.json": func(w io.Writer) error { return access.WriteDiffJSON(w, d) },
		"widen.html": func(w io.Writer) error { return access.WriteDiffHTML(w, bm, hm, d) },
	} {
		got := render(t, write)
		requireGolden(t, name, got)
		s := string(got)
		require.Contains(t, s, "purge-invoice-cache: requires_scopes [ops.admin] → []", name)
		require.Less(t, strings.Index(s, "purge-invoice-cache (internal"), strings.Index(s, "apply-remittance (public"), name)
		require.NotContains(t, s, "&gt;", name)
	}
}

func loadPath(t testing.TB, name, path string) side {
	t.Helper()
	d, err := deployment.Load(path)
	require.NoError(t, err)
	revisions[name] = d.Snapshot.Revision
	e, err := engine.New(context.Background(), d.Snapshot)
	require.NoError(t, err)
	return side{d, e}
}

// TestDiffNamesARoutingChange: a capability whose routing policy changes (issue 25's
// routing.mode and min_confidence) is named by the diff as a changed field, though no caller
// gains or loses access by it.
func TestDiffNamesARoutingChange(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "manifests", "finance"))))
	f := filepath.Join(dir, "capabilities", "apply-remittance.yaml")
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(f, append(b, []byte("routing: {mode: confirm, min_confidence: 0.9}\n")...), 0o600))
	base := loadPath(t, "finance", filepath.Join("..", "..", "manifests", "finance", "capgate.yaml"))
	head := loadPath(t, "routing", filepath.Join(dir, "capgate.yaml"))
	_, _, d := diff(t, base, head)
	require.Empty(t, d.Gained)
	require.Empty(t, d.Lost)
	var got []access.FieldChange
	for _, c := range d.Capabilities {
		got = append(got, c.Fields...)
	}
	require.Equal(t, []access.FieldChange{{Capability: "apply-remittance", Field: "routing", Base: "auto", Head: "confirm (min_confidence 0.9)"}}, got)
}
