package compile

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/manifest"
)

// revisionPlain is the revision as Build computed it before revisionData:
// over Data, the document after its JSON round trip.
func revisionPlain(t testing.TB, s *Snapshot) string {
	t.Helper()
	data, err := s.Data()
	require.NoError(t, err)
	rev, err := s.revision(data)
	require.NoError(t, err)
	return rev
}

// TestRevisionMatchesPlain: the revision hashed over revisionData is the
// one hashed over Data, for the example registries, the finance example,
// the manifest test data, the 10,000 synthetic capabilities and registries
// whose limits and strings are the edge cases of a JSON round trip (those
// revisionData leaves to Data included).
func TestRevisionMatchesPlain(t *testing.T) {
	regs := map[string]*manifest.Registry{
		"compiletest": compiletest.Registry(),
	}
	n := 10000
	if testing.Short() {
		n = 1000
	}
	regs["synthetic"] = compiletest.Synthetic(n)
	for name, dir := range map[string]string{
		"finance":        "../../manifests/finance/capabilities",
		"manifest valid": "../manifest/testdata/valid",
	} {
		reg, err := manifest.Load([]manifest.Dir{{FS: os.DirFS(dir), Name: name}}, manifest.Options{})
		require.NoError(t, err, name)
		regs[name] = reg
	}

	edge := func(limits map[string]any, tags ...string) *manifest.Registry {
		caps := compiletest.Capabilities()
		caps[0].Limits = limits
		if len(tags) > 0 {
			caps[1].Skill.Tags = tags
		}
		return manifest.NewRegistry(caps)
	}
	regs["numbers"] = edge(map[string]any{"max_calls_per_minute": int64(60), "big": 1e21, "small": 1.5e-7, "neg": math.Copysign(0, -1), "int": 7, "num": json.Number("1.50")})
	regs["nested"] = edge(map[string]any{"window": map[string]any{"z": []any{int64(1), "two", nil, true, map[string]any{}}, "a": "b"}})
	regs["escaped strings"] = edge(map[string]any{"html": "<a&b>", "ls": "x\u2028y", "quote": "\"\\", "ctl": "\x01", "uni": "é😀"}, "<tag>", "t\u2029")
	regs["invalid utf-8 in a limit"] = edge(map[string]any{"bad": "a\xffb"})
	regs["invalid utf-8 in a limit key"] = edge(map[string]any{"k\xfe": int64(1)})
	regs["invalid utf-8 in a tag"] = edge(nil, "ok", "b\xc3")
	regs["a struct in a limit"] = edge(map[string]any{"s": struct {
		B string `json:"b"`
		A int    `json:"a"`
	}{"x", 1}})
	regs["a list of ints"] = edge(map[string]any{"l": []int{3, 1}})

	for name, reg := range regs {
		t.Run(name, func(t *testing.T) {
			s := &Snapshot{Registry: reg, Settings: Settings{PreviewScope: "p", PreviewTenants: []string{"b", "a"}, AnonymousPublic: true}, Modules: map[string]string{"m.rego": "package m"}}
			data, err := s.revisionData()
			require.NoError(t, err)
			got, err := s.revision(data)
			require.NoError(t, err)
			require.Equal(t, revisionPlain(t, s), got)
		})
	}

	s, err := Build(compiletest.Synthetic(500), compiletest.Auth(), nil)
	require.NoError(t, err)
	require.Equal(t, revisionPlain(t, s), s.Revision, "Build")
}

// BenchmarkRevision10k is the revision of a start over 10,000 capabilities:
// the hashed document built, then hashed.
func BenchmarkRevision10k(b *testing.B) {
	s := &Snapshot{Registry: compiletest.Synthetic(10000), Settings: Settings{PreviewTenants: []string{}}, Modules: map[string]string{}}
	for _, tc := range []struct {
		name string
		data func() (map[string]any, error)
	}{{"Data", s.Data}, {"revisionData", s.revisionData}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				data, err := tc.data()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.revision(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
