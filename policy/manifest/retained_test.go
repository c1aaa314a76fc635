package manifest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"testing/fstest"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/test/heaptest"
)

// writeSynthetic writes n synthetic manifests to dir, one JSON file per
// capability, as test/loadgen's memory test does.
func writeSynthetic(tb testing.TB, dir string, n int) {
	tb.Helper()
	for _, c := range compiletest.Synthetic(n).All() {
		if c.RequiresScopes == nil {
			c.RequiresScopes = []string{} // the manifest format wants a list
		}
		b, err := json.Marshal(c)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.ID+".json"), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkLoadRetained10k loads 10,000 one-file manifests and reports the
// heap the registry keeps once loading is over (retained-MiB/op), besides
// the time and allocations of Load itself.
func BenchmarkLoadRetained10k(b *testing.B) {
	const n = 10000
	dir := b.TempDir()
	writeSynthetic(b, dir, n)
	dirs := []manifest.Dir{{FS: os.DirFS(dir), Name: "capabilities"}}
	opts := manifest.Options{Handlers: func(string) bool { return true }}

	b.ReportAllocs()
	var retained heaptest.Retained
	for b.Loop() {
		b.StopTimer()
		retained.Start()
		b.StartTimer()
		reg, err := manifest.Load(dirs, opts)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if reg.Len() != n {
			b.Fatalf("loaded %d capabilities, want %d", reg.Len(), n)
		}
		retained.Stop()
		runtime.KeepAlive(reg)
		b.StartTimer()
	}
	retained.Report(b)
}

// TestLoadShares checks that the manifests of one load share their repeated
// strings and string lists (the registry's memory depends on it), and that
// nothing is shared between loads.
func TestLoadShares(t *testing.T) {
	const a = `id: reconcile-invoice
state: ga
visibility: extended
skill:
  name: Reconcile an invoice
  description: Matches an invoice to its purchase order.
  tags: [finance, invoices]
  inputModes: [text/plain, application/pdf]
  outputModes: [application/json]
requires_scopes: [recon.run]
tenants: [acme, globex]
handler: recon
owner: finance-team
`
	const b = `{
  "id": "reconcile-invoice-v0",
  "state": "deprecated",
  "visibility": "extended",
  "replaced_by": "reconcile-invoice",
  "skill": {"name": "Reconcile (old)", "description": "The old reconciler.", "tags": ["finance"],
            "inputModes": ["text/plain", "application/pdf"], "outputModes": ["application/json"]},
  "requires_scopes": ["recon.run"],
  "tenants": ["acme", "globex"],
  "handler": "recon",
  "owner": "finance-team"
}`
	load := func() (x, y *manifest.Capability) {
		t.Helper()
		fsys := fstest.MapFS{"reconcile-invoice.yaml": {Data: []byte(a)}, "old/reconcile-invoice-v0.json": {Data: []byte(b)}}
		reg, err := manifest.Load([]manifest.Dir{{FS: fsys, Name: "capabilities"}}, manifest.Options{})
		require.NoError(t, err)
		x, ok := reg.Get("reconcile-invoice")
		require.True(t, ok)
		y, ok = reg.Get("reconcile-invoice-v0")
		require.True(t, ok)
		return x, y
	}
	x, y := load()

	sameString := func(what string, s, t2 string) {
		t.Helper()
		require.Equal(t, s, t2, what)
		require.Same(t, unsafe.StringData(s), unsafe.StringData(t2), "%s: equal strings are not shared", what)
	}
	sameList := func(what string, l, m []string) {
		t.Helper()
		require.Equal(t, l, m, what)
		require.NotEmpty(t, l, what)
		require.Same(t, &l[0], &m[0], "%s: equal lists are not shared", what)
		require.Equal(t, len(l), cap(l), "%s: a shared list must not have room to append in place", what)
	}
	sameString("visibility", string(x.Visibility), string(y.Visibility))
	sameString("handler", x.Handler, y.Handler)
	sameString("owner", x.Owner, y.Owner)
	sameString("replaced_by and its target's id", x.ID, y.ReplacedBy)
	sameString("a tag in different tag lists", x.Skill.Tags[0], y.Skill.Tags[0])
	sameList("inputModes", x.Skill.InputModes, y.Skill.InputModes)
	sameList("outputModes", x.Skill.OutputModes, y.Skill.OutputModes)
	sameList("requires_scopes", x.RequiresScopes, y.RequiresScopes)
	sameList("tenants", x.Tenants.List, y.Tenants.List)
	require.Equal(t, len(x.Skill.Tags), cap(x.Skill.Tags))

	// An id that is part of its file name is kept there.
	for _, c := range []*manifest.Capability{x, y} {
		file := unsafe.Pointer(unsafe.StringData(c.Source.File))
		id := unsafe.Pointer(unsafe.StringData(c.ID))
		require.True(t, uintptr(id) >= uintptr(file) && uintptr(id)+uintptr(len(c.ID)) <= uintptr(file)+uintptr(len(c.Source.File)),
			"id %q is not kept within its file name %q", c.ID, c.Source.File)
	}

	// Interning lasts one load: a second load shares nothing with the first.
	x2, _ := load()
	require.NotSame(t, &x.Skill.InputModes[0], &x2.Skill.InputModes[0])
	require.NotSame(t, unsafe.StringData(x.Handler), unsafe.StringData(x2.Handler))
}
