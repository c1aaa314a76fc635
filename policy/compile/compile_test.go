package compile_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current output")

// requireGoldenJSON compares got with testdata/name, or rewrites it under -update.
func requireGoldenJSON(t *testing.T, name string, got any) {
	t.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	require.NoError(t, err)
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test ./policy/compile -update")
	require.JSONEq(t, string(want), string(b))
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

func TestBuildRefuses(t *testing.T) {
	with := func(edit func(caps []manifest.Capability) []manifest.Capability) *manifest.Registry {
		return manifest.NewRegistry(edit(compiletest.Capabilities()))
	}
	tests := []struct {
		name    string
		reg     *manifest.Registry
		extra   map[string]string
		wantErr string
	}{
		{
			name: "unresolved replaced_by",
			reg: with(func(c []manifest.Capability) []manifest.Capability {
				c[1].ReplacedBy = "nope"
				return c
			}),
			wantErr: `replaced_by "nope" does not exist`,
		},
		{
			name: "replaced_by names itself",
			reg: with(func(c []manifest.Capability) []manifest.Capability {
				c[1].ReplacedBy = c[1].ID
				return c
			}),
			wantErr: "replaced_by names itself",
		},
		{
			name: "replaced_by a removed capability",
			reg: with(func(c []manifest.Capability) []manifest.Capability {
				c[1].ReplacedBy = "reconcile-invoice-v0"
				return c
			}),
			wantErr: "is itself removed",
		},
		{
			name: "duplicate id",
			reg: with(func(c []manifest.Capability) []manifest.Capability {
				return append(c, c[0])
			}),
			wantErr: "duplicate",
		},
		{
			name: "empty id",
			reg: with(func(c []manifest.Capability) []manifest.Capability {
				c[0].ID = ""
				return c
			}),
			wantErr: "empty id",
		},
		{name: "nil registry", wantErr: "nil registry"},
		{
			name:    "extra module syntax error",
			reg:     compiletest.Registry(),
			extra:   map[string]string{"bad": "package capgate.deny.bad\n\ndeny contains x if {"},
			wantErr: "extra/bad.rego:3: rego_parse_error",
		},
		{
			name:    "extra module outside the deny prefix",
			reg:     compiletest.Registry(),
			extra:   map[string]string{"widen": "package capgate.authz\n\nvisible contains \"audit-ledger\"\n"},
			wantErr: "extra/widen.rego:1: package: package capgate.authz is not allowed",
		},
		{
			name:    "extra module outside the root",
			reg:     compiletest.Registry(),
			extra:   map[string]string{"other": "package capgate_other.deny\n\nx := 1\n"},
			wantErr: "extra/other.rego:1: package: package capgate_other.deny is not allowed",
		},
		{
			name:    "extra module fails strict mode",
			reg:     compiletest.Registry(),
			extra:   map[string]string{"strict": "package capgate.deny.strict\n\nimport data.capgate.settings\n\ndeny contains {\"capability\": \"*\", \"reason\": \"x\"} if false\n"},
			wantErr: "compile policy",
		},
		{
			name:    "extra module fails the input schema",
			reg:     compiletest.Registry(),
			extra:   map[string]string{"schema": "package capgate.deny.schema\n\ndeny contains {\"capability\": \"*\", \"reason\": \"x\"} if input.caller.nickname == \"x\"\n"},
			wantErr: "nickname",
		},
		{
			name:    "extra module conflicts at evaluation",
			reg:     compiletest.Registry(),
			extra:   map[string]string{"conflict": "package capgate.deny.conflict\n\nx := 1\n\nx := 2 if true\n\ndeny contains {\"capability\": \"*\", \"reason\": sprintf(\"%v\", [x])}\n"},
			wantErr: "evaluate policy over data",
		},
		{
			name:    "extra module name escapes",
			reg:     compiletest.Registry(),
			extra:   map[string]string{"../x": denySec},
			wantErr: "relative path",
		},
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
