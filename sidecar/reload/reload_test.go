package reload_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/sidecar/revision"
)

// statusCheck is a valid public manifest that is not in the finance example.
const statusCheck = `id: status-check
state: ga
visibility: public
skill:
  name: Check status
  description: Reports whether the finance agent is up.
  tags: [status]
  examples: ["Is the finance agent up?"]
  inputModes: [text/plain]
  outputModes: [application/json]
requires_scopes: []
tenants: "*"
handler: invoices.lookup
owner: ops
`

// broken is a manifest with two problems: an unknown state and a handler
// the config does not define.
const broken = `id: broken-one
state: shiny
visibility: public
skill:
  name: Broken
  description: Never served.
  tags: [broken]
  inputModes: [text/plain]
  outputModes: [application/json]
requires_scopes: []
tenants: "*"
handler: nowhere.to.be.found
owner: ops
`

// finance copies the finance example to a temp folder and returns the path
// of its capgate.yaml.
func finance(t *testing.T) string {
	t.Helper()
	sub, err := fs.Sub(manifests.FS, "finance")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, sub))
	return filepath.Join(dir, "capgate.yaml")
}

// put writes content to name inside the manifests folder atomically (write
// beside, then rename), as config management does.
func put(t *testing.T, cfgPath, name, content string) {
	t.Helper()
	dir := filepath.Join(filepath.Dir(cfgPath), "capabilities")
	tmp := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, name)))
}

func build(ctx context.Context, d *deployment.Deployment) (*revision.State, error) {
	return revision.Build(ctx, d, revision.Options{})
}

type fixture struct {
	cfg     string
	holder  *revision.Holder
	metrics *metrics.Metrics
	logs    *observer.ObservedLogs
	log     *zap.Logger
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg := finance(t)
	d, err := deployment.Load(cfg)
	require.NoError(t, err)
	rev, err := build(t.Context(), d)
	require.NoError(t, err)
	core, logs := observer.New(zapcore.DebugLevel)
	m := metrics.New()
	m.Revision.WithLabelValues(rev.ID()).Set(1)
	return &fixture{cfg: cfg, holder: revision.NewHolder(rev), metrics: m, logs: logs, log: zap.New(core)}
}

func (f *fixture) reloader(src reload.Source, opts ...reload.Option) *reload.Reloader {
	opts = append([]reload.Option{reload.WithLogger(f.log), reload.WithMetrics(f.metrics)}, opts...)
	return reload.New(src, build, f.holder, opts...)
}

func (f *fixture) count(result string) int {
	var m dto.Metric
	if err := f.metrics.Reloads.WithLabelValues(result).Write(&m); err != nil {
		panic(err)
	}
	return int(m.GetCounter().GetValue())
}

// revisions lists the revision labels of the revision gauge.
func (f *fixture) revisions(t *testing.T) []string {
	t.Helper()
	mfs, err := f.metrics.Registry.Gather()
	require.NoError(t, err)
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "capgate_policy_revision_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "revision" && m.GetGauge().GetValue() == 1 {
					out = append(out, l.GetValue())
				}
			}
		}
	}
	return out
}

func has(rev *revision.State, id string) bool {
	_, ok := rev.Registry().Get(id)
	return ok
}

func TestReloadSwapsGoodRevision(t *testing.T) {
	f := newFixture(t)
	old := f.holder.Load()
	r := f.reloader(reload.NewFiles(f.cfg))

	put(t, f.cfg, "status-check.yaml", statusCheck)
	require.NoError(t, r.Reload(t.Context()))

	cur := f.holder.Load()
	require.NotSame(t, old, cur)
	require.True(t, has(cur, "status-check"))
	require.False(t, has(old, "status-check"), "the old revision is immutable")
	require.Equal(t, 1, f.count(reload.ResultOK))
	require.Equal(t, 0, f.count(reload.ResultRejected))
	require.Contains(t, string(cur.PublicCard), "status-check")

	// The gauge names the new revision only.
	require.Equal(t, []string{cur.ID()}, f.revisions(t))
}

func TestReloadRejectsBadRevision(t *testing.T) {
	tests := []struct {
		name      string
		edit      func(t *testing.T, cfg string)
		stage     reload.Stage
		wantStage string
		want      []string // substrings of the listed problems
	}{
		{
			name:      "invalid manifest",
			edit:      func(t *testing.T, cfg string) { put(t, cfg, "broken.yaml", broken) },
			wantStage: "load",
			want:      []string{"broken.yaml", "state", "nowhere.to.be.found"},
		},
		{
			name: "invalid config",
			edit: func(t *testing.T, cfg string) {
				b, err := os.ReadFile(cfg)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(cfg, []byte(strings.Replace(string(b), "threshold: 0.6", "threshold: 7", 1)), 0o644))
			},
			wantStage: "load",
			want:      []string{"router.threshold"},
		},
		{
			name: "policy module that does not compile",
			edit: func(t *testing.T, cfg string) {
				dir := filepath.Join(filepath.Dir(cfg), "policy")
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "deny.rego"), []byte("package capgate.extra.deny\n\ndeny contains x if {\n"), 0o644))
				b, err := os.ReadFile(cfg)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(cfg, []byte(strings.Replace(string(b), "policy_dirs: []", "policy_dirs: [./policy]", 1)), 0o644))
			},
			wantStage: "load",
			want:      []string{"deny.rego"},
		},
		{
			name: "refused by the server",
			edit: func(t *testing.T, cfg string) { put(t, cfg, "status-check.yaml", statusCheck) },
			stage: func(context.Context, *revision.State, *revision.State) (func(), error) {
				return nil, errors.New("handler x: no such upstream")
			},
			wantStage: "stage",
			want:      []string{"handler x: no such upstream"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			old := f.holder.Load()
			var opts []reload.Option
			if tc.stage != nil {
				opts = append(opts, reload.WithStage(tc.stage))
			}
			r := f.reloader(reload.NewFiles(f.cfg), opts...)
			tc.edit(t, f.cfg)

			require.Error(t, r.Reload(t.Context()))
			require.Same(t, old, f.holder.Load(), "the last good revision keeps serving")
			require.Equal(t, 1, f.count(reload.ResultRejected))
			require.Equal(t, 0, f.count(reload.ResultOK))
			require.Equal(t, []string{old.ID()}, f.revisions(t))

			lines := f.logs.FilterMessageSnippet("reload rejected").All()
			require.Len(t, lines, 1, "one log line per rejection")
			ctx := lines[0].ContextMap()
			require.Equal(t, tc.wantStage, ctx["stage"])
			require.Equal(t, old.ID(), ctx["serving_revision"])
			problems, _ := ctx["problems"].([]any)
			require.NotEmpty(t, problems)
			all := ""
			for _, p := range problems {
				all += p.(string) + "\n"
			}
			for _, w := range tc.want {
				require.Contains(t, all, w)
			}
			require.NotContains(t, all, "Never served.", "problems name file and field, not file content")
		})
	}
}

// countingSource counts loads and can be made to fail.
type countingSource struct {
	reload.Source
	loads atomic.Int32
}

func (c *countingSource) Load(ctx context.Context) (*deployment.Deployment, error) {
	c.loads.Add(1)
	return c.Source.Load(ctx)
}

func TestTriggersAreDebounced(t *testing.T) {
	f := newFixture(t)
	src := &countingSource{Source: reload.NewFiles(f.cfg)}
	r := f.reloader(src, reload.WithDebounce(150*time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	// A burst: each trigger restarts the quiet period.
	for range 10 {
		r.Trigger()
		time.Sleep(20 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return f.count(reload.ResultOK) == 1 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(400 * time.Millisecond)
	require.EqualValues(t, 1, src.loads.Load(), "a burst of triggers is one reload")

	r.Trigger()
	require.Eventually(t, func() bool { return f.count(reload.ResultOK) == 2 }, 5*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 2, src.loads.Load())
}

func TestFileChangesReload(t *testing.T) {
	f := newFixture(t)
	r := f.reloader(reload.NewFiles(f.cfg), reload.WithDebounce(50*time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	wait := r.Start(ctx)
	defer func() { cancel(); wait() }()

	// A new manifest is served: the watcher is in place when Start returns,
	// so a change made right after it is not missed.
	put(t, f.cfg, "status-check.yaml", statusCheck)
	require.Eventually(t, func() bool { return has(f.holder.Load(), "status-check") }, 5*time.Second, 10*time.Millisecond)

	// A manifest in a sub-folder created after the start is seen too.
	sub := filepath.Join(filepath.Dir(f.cfg), "capabilities", "ops")
	require.NoError(t, os.Mkdir(sub, 0o755))
	require.Eventually(t, func() bool { return f.count(reload.ResultOK) >= 2 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, os.WriteFile(filepath.Join(sub, "status-2.yaml"), []byte(strings.ReplaceAll(statusCheck, "status-check", "status-two")), 0o644))
	require.Eventually(t, func() bool { return has(f.holder.Load(), "status-two") }, 5*time.Second, 10*time.Millisecond)

	// A broken one is rejected and the last good revision stays.
	good := f.holder.Load()
	put(t, f.cfg, "broken.yaml", broken)
	require.Eventually(t, func() bool { return f.count(reload.ResultRejected) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Same(t, good, f.holder.Load())

	// The config file itself is watched (its folder: editors rename).
	require.NoError(t, os.Remove(filepath.Join(filepath.Dir(f.cfg), "capabilities", "broken.yaml")))
	require.Eventually(t, func() bool { return f.holder.Load() != good }, 5*time.Second, 10*time.Millisecond)
	b, err := os.ReadFile(f.cfg)
	require.NoError(t, err)
	tmp := filepath.Join(t.TempDir(), "capgate.yaml")
	require.NoError(t, os.WriteFile(tmp, []byte(strings.Replace(string(b), "name: Finance Agent", "name: Finance Agent Two", 1)), 0o644))
	require.NoError(t, os.Rename(tmp, f.cfg))
	require.Eventually(t, func() bool { return f.holder.Load().Config().Agent.Name == "Finance Agent Two" }, 5*time.Second, 10*time.Millisecond)
}

func TestProblems(t *testing.T) {
	require.Equal(t, []string{"a", "b"}, reload.Problems(errors.New("a\n\n b ")))
	require.Nil(t, reload.Problems(nil))
	long := strings.Repeat("x\n", 80)
	require.Len(t, reload.Problems(errors.New(long)), 51)
}

func TestWatchesReadOnlyDeploymentFiles(t *testing.T) {
	cfg := finance(t)
	dir := filepath.Dir(cfg)
	ws := reload.NewFiles(cfg).Watches()
	reads := func(p string, isDir bool) bool {
		for _, w := range ws {
			if w.Reads(p, isDir) {
				return true
			}
		}
		return false
	}
	cases := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{"capgate.yaml", false, true},
		{"keys/demo.jwks.json", false, true},
		{"capabilities/lookup-invoice.yaml", false, true},
		{"capabilities/ops/new.yml", false, true},
		{"capabilities/ops", true, true}, // a new folder of manifests
		{"notes.txt", false, false},
		{"capgate.yaml.swp", false, false},
		{"keys/README.md", false, false},
		{"keys/demo-rs256.key.pem", false, false},
		{"capabilities/notes.txt", false, false},
		{"capabilities/.lookup-invoice.yaml.swp", false, false},
		{"capabilities/.hidden/x.yaml", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			require.Equal(t, tc.want, reads(filepath.Join(dir, tc.path), tc.isDir))
		})
	}
}

func TestBundleWatchesReadOnlyTheBundle(t *testing.T) {
	cfg := finance(t)
	dir := t.TempDir()
	b, err := reload.NewBundle(cfg, filepath.Join(dir, "bundle.tar.gz"), reload.BundleOptions{})
	require.NoError(t, err)
	reads := func(p string) bool {
		for _, w := range b.Watches() {
			if w.Reads(p, false) {
				return true
			}
		}
		return false
	}
	require.True(t, reads(filepath.Join(dir, "bundle.tar.gz")))
	require.True(t, reads(cfg))
	require.False(t, reads(filepath.Join(dir, "notes.txt")))
	require.False(t, reads(filepath.Join(dir, "bundle.tar.gz.tmp")))
}

func TestReloadWithoutChangeIsSilent(t *testing.T) {
	f := newFixture(t)
	r := f.reloader(reload.NewFiles(f.cfg))
	require.NoError(t, r.Reload(t.Context()))
	require.Zero(t, f.logs.FilterLevelExact(zapcore.InfoLevel).Len(), "same revision: no info line")
	require.Zero(t, f.logs.FilterLevelExact(zapcore.WarnLevel).Len(), "same revision: warnings are not repeated")
	require.Equal(t, 1, f.count(reload.ResultOK))

	put(t, f.cfg, "status-check.yaml", statusCheck)
	require.NoError(t, r.Reload(t.Context()))
	require.Equal(t, 1, f.logs.FilterMessage("reloaded").Len(), "a new revision is logged")
}
