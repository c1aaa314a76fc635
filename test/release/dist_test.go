package release

import (
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDist runs `make dist` for the host's architecture only (DIST_PLATFORMS):
// cross-compiling capgate for the other one too would compile every package
// again, minutes on CI's 2 cores, where this one shares the image test's
// build. `make dist` builds both by default; the checks here are per file
// and do not depend on the architecture.
func TestDist(t *testing.T) {
	dist := t.TempDir()
	platform := "linux/" + runtime.GOARCH
	makeTarget(t, "dist", "DIST="+dist, "DIST_PLATFORMS="+platform)

	binName := "capgate-" + stampVersion + "-linux-" + runtime.GOARCH
	sbomName := binName + ".cdx.json"
	entries, err := os.ReadDir(dist)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{binName, sbomName, "SHA256SUMS"}, names)
	bin := filepath.Join(dist, binName)

	t.Run("static ELF for its architecture", func(t *testing.T) {
		f, err := elf.Open(bin)
		require.NoError(t, err)
		defer func() { _ = f.Close() }()
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
		require.Equal(t, want, f.Machine)
		for _, p := range f.Progs {
			require.NotEqual(t, elf.PT_INTERP, p.Type, "a dynamic loader: not static")
		}
		libs, err := f.ImportedLibraries()
		require.NoError(t, err)
		require.Empty(t, libs)
	})
	bi, err := buildinfo.ReadFile(bin)
	require.NoError(t, err)
	t.Run("built as a release", func(t *testing.T) {
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		require.Equal(t, "0", settings["CGO_ENABLED"])
		require.Equal(t, "true", settings["-trimpath"])
		require.Equal(t, "github.com/capgate/capgate/cmd/capgate", bi.Path)
	})
	t.Run("checksums", func(t *testing.T) {
		sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(sums)), "\n")
		got := map[string]string{}
		for _, l := range lines {
			sum, name, ok := strings.Cut(l, "  ")
			require.True(t, ok, "%q: not sha256sum's format", l)
			got[name] = sum
		}
		want := map[string]string{}
		for _, name := range []string{binName, sbomName} {
			data, err := os.ReadFile(filepath.Join(dist, name))
			require.NoError(t, err)
			s := sha256.Sum256(data)
			want[name] = hex.EncodeToString(s[:])
		}
		require.Equal(t, want, got)
	})
	t.Run("SBOM names the module and every module linked in", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(dist, sbomName))
		require.NoError(t, err)
		var bom struct {
			BOMFormat   string `json:"bomFormat"`
			SpecVersion string `json:"specVersion"`
			Metadata    struct {
				Component struct {
					Name    string `json:"name"`
					Version string `json:"version"`
					PURL    string `json:"purl"`
				} `json:"component"`
			} `json:"metadata"`
			Components []struct {
				Name     string `json:"name"`
				Version  string `json:"version"`
				Licenses []struct {
					License struct {
						ID   string `json:"id"`
						Name string `json:"name"`
					} `json:"license"`
					Expression string `json:"expression"`
				} `json:"licenses"`
			} `json:"components"`
		}
		require.NoError(t, json.Unmarshal(data, &bom))
		require.Equal(t, "CycloneDX", bom.BOMFormat)
		require.Equal(t, "github.com/capgate/capgate", bom.Metadata.Component.Name)
		// cyclonedx-gomod versions the module from git as Go does: the tag at
		// HEAD, else a pseudo-version ending in the commit.
		head, err := exec.Command("git", "-C", repoRoot(t), "rev-parse", "HEAD").Output()
		require.NoError(t, err)
		want := strings.TrimSpace(string(head))[:12]
		if tag, err := exec.Command("git", "-C", repoRoot(t), "describe", "--exact-match", "--tags", "HEAD").Output(); err == nil {
			want = strings.TrimSpace(string(tag))
		}
		require.True(t, strings.HasSuffix(bom.Metadata.Component.Version, want), "SBOM version %q does not name %s", bom.Metadata.Component.Version, want)
		have := map[string]bool{}
		licences := map[string][]string{}
		for _, c := range bom.Components {
			have[c.Name+"@"+c.Version] = true
			for _, l := range c.Licenses {
				licences[c.Name] = append(licences[c.Name], l.License.ID+l.License.Name+l.Expression)
			}
		}
		// Licence data (cyclonedx-gomod -licenses), as the modules' own licence files declare it.
		for mod, id := range map[string]string{"google.golang.org/grpc": "Apache-2.0", "go.uber.org/zap": "MIT", "github.com/open-policy-agent/opa": "Apache-2.0"} {
			require.Contains(t, licences[mod], id, "the SBOM gives %s's licence", mod)
		}
		require.NotEmpty(t, bi.Deps)
		for _, d := range bi.Deps {
			m := d
			if d.Replace != nil {
				m = d.Replace
			}
			require.True(t, have[m.Path+"@"+m.Version], "the binary links %s@%s; the SBOM does not name it", m.Path, m.Version)
		}
		require.True(t, have["std@"+strings.TrimPrefix(bi.GoVersion, "go")] || have["std@"+bi.GoVersion], "the SBOM names the Go standard library (%s)", bi.GoVersion)
	})
	t.Run("the binary runs", func(t *testing.T) {
		checkBinary(t, bin)
	})
}
