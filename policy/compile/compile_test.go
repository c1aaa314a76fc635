package compile_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/test/golden"
)

// requireGoldenJSON compares got, as indented JSON, with testdata/name, or
// rewrites the file under -update.
func requireGoldenJSON(t *testing.T, name string, got any) {
	t.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	require.NoError(t, err)
	golden.JSONEq(t, filepath.Join("testdata", name), append(b, '\n'))
}

func TestBuildDataGolden(t *testing.T) {
	s, err := compile.Build(compiletest.Registry(), compiletest.Auth(), nil)
	require.NoError(t, err)
	data, err := s.Data()
	require.NoError(t, err)
	requireGoldenJSON(t, "data.golden.json", data)
	require.Len(t, s.Revision, compile.RevisionLen)
	require.Contains(t, s.Modules, "capgate/authz/authz.rego")
	require.False(t, s.SubjectSensitive())
}

const denySec = `package capgate.deny.sec

deny contains {"capability": "lookup-invoice", "reason": "maintenance"} if input.caller.subject == "mallory"
`

func TestBuildRevision(t *testing.T) {
	base, err := compile.Build(compiletest.Registry(), compiletest.Auth(), nil)
	require.NoError(t, err)

	changedSkill := compiletest.Capabilities()
	changedSkill[0].Skill.Description = "Another description."
	changedScope := compiletest.Capabilities()
	changedScope[1].RequiresScopes = []string{"recon.admin"}
	shuffled := compiletest.Capabilities()
	shuffled[0], shuffled[len(shuffled)-1] = shuffled[len(shuffled)-1], shuffled[0]
	otherAuth := compiletest.Auth()
	otherAuth.AnonymousPublic = false

	tests := []struct {
		name  string
		reg   *manifest.Registry
		auth  config.Auth
		extra map[string]string
		same  bool
	}{
		{name: "identical input", reg: compiletest.Registry(), auth: compiletest.Auth(), same: true},
		{name: "manifest order", reg: manifest.NewRegistry(shuffled), auth: compiletest.Auth(), same: true},
		{name: "skill text", reg: manifest.NewRegistry(changedSkill), auth: compiletest.Auth()},
		{name: "policy fact", reg: manifest.NewRegistry(changedScope), auth: compiletest.Auth()},
		{name: "settings", reg: compiletest.Registry(), auth: otherAuth},
		{name: "extra module", reg: compiletest.Registry(), auth: compiletest.Auth(), extra: map[string]string{"sec": denySec}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := compile.Build(tt.reg, tt.auth, tt.extra)
			require.NoError(t, err)
			if tt.same {
				require.Equal(t, base.Revision, s.Revision)
			} else {
				require.NotEqual(t, base.Revision, s.Revision)
			}
		})
	}
}

func TestBuildExtraModules(t *testing.T) {
	s, err := compile.Build(compiletest.Registry(), compiletest.Auth(), map[string]string{"sec": denySec})
	require.NoError(t, err)
	require.Equal(t, denySec, s.Modules["extra/sec.rego"])
	require.True(t, s.SubjectSensitive())
}

// TestBuildRefuses builds each case under testdata/refuse: the manifests of
// testdata/refuse/base/capabilities with the case's capabilities/ files
// added or put in their place (parsed one by one, without the registry-wide
// checks of manifest.Load, as a bundle's registry is), plus the case's
// extra/*.rego deny modules. The build must fail with the problems of the
// case's want.golden.txt (run with -update to rewrite them).
func TestBuildRefuses(t *testing.T) {
	root := filepath.Join("testdata", "refuse")
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	cases := 0
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "base" {
			continue
		}
		cases++
		t.Run(e.Name(), func(t *testing.T) {
			dir := filepath.Join(root, e.Name())
			files := readDir(t, filepath.Join(root, "base", "capabilities"))
			maps.Copy(files, readDir(t, filepath.Join(dir, "capabilities")))
			caps := make([]manifest.Capability, 0, len(files))
			for _, name := range slices.Sorted(maps.Keys(files)) {
				c, err := manifest.Parse(path.Join("capabilities", name), files[name])
				require.NoError(t, err)
				caps = append(caps, *c)
			}
			extra := map[string]string{}
			for name, src := range readDir(t, filepath.Join(dir, "extra")) {
				extra[name] = string(src)
			}
			s, err := compile.Build(manifest.NewRegistry(caps), compiletest.Auth(), extra)
			require.Error(t, err)
			require.Nil(t, s)
			golden.Equal(t, filepath.Join(dir, "want.golden.txt"), []byte(err.Error()+"\n"))
		})
	}
	require.NotZero(t, cases)
}

// readDir returns the files of dir by name; none when dir does not exist.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	out := make(map[string][]byte, len(entries))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = b
	}
	return out
}

// TestBuildRefusesInput covers what no manifest file can hold: a nil
// registry, an empty id, a module name that escapes ExtraDir.
func TestBuildRefusesInput(t *testing.T) {
	emptyID := compiletest.Capabilities()
	emptyID[0].ID = ""
	tests := []struct {
		name    string
		reg     *manifest.Registry
		extra   map[string]string
		wantErr string
	}{
		{name: "nil registry", wantErr: "nil registry"},
		{name: "empty id", reg: manifest.NewRegistry(emptyID), wantErr: `capability "": id: capability with an empty id`},
		{name: "extra module name escapes", reg: compiletest.Registry(), extra: map[string]string{"../x": denySec}, wantErr: "relative path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := compile.Build(tt.reg, compiletest.Auth(), tt.extra)
			require.ErrorContains(t, err, tt.wantErr)
			require.Nil(t, s)
		})
	}
}

func TestBuildSynthetic(t *testing.T) {
	s, err := compile.Build(compiletest.Synthetic(500), compiletest.Auth(), nil)
	require.NoError(t, err)
	data, err := s.Data()
	require.NoError(t, err)
	caps, ok := data["capabilities"].(map[string]any)
	require.True(t, ok)
	require.Len(t, caps, 500)
}
