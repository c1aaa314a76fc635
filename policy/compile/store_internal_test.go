package compile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/test/heaptest"
)

func snapshotData(t testing.TB, reg *manifest.Registry) map[string]any {
	t.Helper()
	s, err := Build(reg, compiletest.Auth(), nil)
	require.NoError(t, err)
	data, err := s.Data()
	require.NoError(t, err)
	return data
}

// TestInternerEqualsInterfaceToValue: the interned store holds exactly the
// values OPA's own conversion makes, for both fixtures and for every JSON
// kind (numbers, booleans, null, nested arrays and objects).
func TestInternerEqualsInterfaceToValue(t *testing.T) {
	odd := map[string]any{
		"n": []any{json1, json1, "1", true, nil, []any{"x"}, []any{"x"}, map[string]any{"k": []any{}}},
		"m": map[string]any{"a": []any{"x"}, "b": false, "c": json1},
	}
	for name, data := range map[string]map[string]any{
		"fixture":   snapshotData(t, compiletest.Registry()),
		"synthetic": snapshotData(t, compiletest.Synthetic(500)),
		"odd":       odd,
	} {
		t.Run(name, func(t *testing.T) {
			want, err := ast.InterfaceToValue(data)
			require.NoError(t, err)
			got, err := newInterner().value(data)
			require.NoError(t, err)
			require.Equal(t, 0, ast.Compare(want, got.Value), "interned %v\nwant %v", got, want)
		})
	}
}

var json1 = json.Number("1")

// TestInternerShares: equal strings and scalar arrays are one term.
func TestInternerShares(t *testing.T) {
	data := snapshotData(t, compiletest.Synthetic(100))
	v, err := newInterner().value(data)
	require.NoError(t, err)
	caps := v.Value.(ast.Object).Get(ast.StringTerm(keyCapabilities)).Value.(ast.Object)
	field := func(id, name string) *ast.Term {
		return caps.Get(ast.StringTerm(id)).Value.(ast.Object).Get(ast.StringTerm(name))
	}
	// cap-00001 and cap-00018 share tags ["synthetic","group-1"], handler h1 vs h2.
	require.Same(t, field("cap-00001", "tags"), field("cap-00018", "tags"))
	require.Same(t, field("cap-00001", "tenants"), field("cap-00002", "tenants"))
	require.Same(t, field("cap-00001", "state"), field("cap-00000", "state"))
	require.NotSame(t, field("cap-00001", "handler"), field("cap-00002", "handler"))
	require.Equal(t, 0, ast.Compare(field("cap-00001", "handler").Value, ast.String("h1")))
}

// TestStoreEqualsData: the store, built straight from the registry, holds
// exactly OPA's conversion of Data, the document the revision hashes and
// bundles carry.
func TestStoreEqualsData(t *testing.T) {
	for name, reg := range map[string]*manifest.Registry{
		"fixture":   compiletest.Registry(),
		"synthetic": compiletest.Synthetic(500),
		"empty":     compiletest.Synthetic(0),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := Build(reg, compiletest.Auth(), nil)
			require.NoError(t, err)
			data, err := s.Data()
			require.NoError(t, err)
			want, err := ast.InterfaceToValue(data)
			require.NoError(t, err)
			st, err := s.Store()
			require.NoError(t, err)
			got, err := storage.ReadOne(t.Context(), st, storage.MustParsePath("/"+Root))
			require.NoError(t, err)
			require.Equal(t, 0, ast.Compare(want, got), "store %v\nwant %v", got, want)
		})
	}
}

// TestRevisionStreamsMarshal: the revision, hashed piece by piece, is the
// hash of json.Marshal over the whole document, as it was computed before:
// revisions stay comparable across versions and between bundle writers.
func TestRevisionStreamsMarshal(t *testing.T) {
	odd := compiletest.Capabilities()
	odd[0].Skill.Description = "<b>Tom & Jerry</b> \u2028 naïve \"quoted\" \\ tab\t"
	odd[0].Limits = map[string]any{"ratio": 0.25, "big": int64(1) << 53, "nested": map[string]any{"z": []any{1, "a"}, "a": nil}}
	for name, reg := range map[string]*manifest.Registry{
		"fixture":   compiletest.Registry(),
		"synthetic": compiletest.Synthetic(300),
		"odd":       manifest.NewRegistry(odd),
		"empty":     compiletest.Synthetic(0),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := Build(reg, compiletest.Auth(), map[string]string{"deny/x.rego": "package capgate.deny.x\n"})
			require.NoError(t, err)
			data, err := s.Data()
			require.NoError(t, err)
			doc, err := s.bundleDocument(data)
			require.NoError(t, err)
			b, err := json.Marshal(map[string]any{"data": doc, "modules": s.Modules})
			require.NoError(t, err)
			sum := sha256.Sum256(b)
			require.Equal(t, hex.EncodeToString(sum[:])[:RevisionLen], s.Revision)
		})
	}
}

// TestProfilerMatchesProfileOf: the memo gives each capability the profile
// profileOf computes for it.
func TestProfilerMatchesProfileOf(t *testing.T) {
	var pr profiler
	for _, reg := range []*manifest.Registry{compiletest.Registry(), compiletest.Synthetic(300)} {
		for _, c := range reg.All() {
			key, p := pr.of(&c)
			wantKey, want := profileOf(&c)
			require.Equal(t, wantKey, key, c.ID)
			require.Equal(t, want, p, c.ID)
		}
	}
	require.Less(t, len(pr.seen), 100, "synthetic capabilities share profiles")
}

func TestStoreReadsInternedData(t *testing.T) {
	s, err := Build(compiletest.Synthetic(50), compiletest.Auth(), nil)
	require.NoError(t, err)
	st, err := s.Store()
	require.NoError(t, err)
	ctx := t.Context()
	txn, err := st.NewTransaction(ctx)
	require.NoError(t, err)
	defer st.Abort(ctx, txn)
	got, err := st.Read(ctx, txn, storage.MustParsePath("/capgate/capabilities/cap-00007/tenants"))
	require.NoError(t, err)
	want, err := ast.InterfaceToValue([]any{compiletest.Tenant(2), compiletest.Tenant(3)})
	require.NoError(t, err)
	require.Equal(t, 0, ast.Compare(want, got), "got %v", got)
}

// BenchmarkStoreRetained10k reports the heap a 10,000-capability store
// keeps, built the naive way (ast.InterfaceToValue) and interned.
func BenchmarkStoreRetained10k(b *testing.B) {
	data := snapshotData(b, compiletest.Synthetic(10_000))
	for _, bc := range []struct {
		name string
		conv func(map[string]any) (any, error)
	}{
		{"naive", func(d map[string]any) (any, error) { return ast.InterfaceToValue(d) }},
		{"interned", func(d map[string]any) (any, error) { return newInterner().value(d) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var retained heaptest.Retained
			for b.Loop() {
				retained.Start()
				v, err := bc.conv(data)
				require.NoError(b, err)
				retained.Stop()
				runtime.KeepAlive(v)
			}
			retained.Report(b)
		})
	}
}
