package reload

import (
	"context"
	"path/filepath"
	"strings"
	"sync"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/settings"
)

// Files is the deployment on disk: the config file and the manifests and
// policy modules it names, read again on every Load.
type Files struct {
	path    string
	watches watchSet
}

var _ Watched = (*Files)(nil)

// NewFiles returns the source of the config file at path.
func NewFiles(path string) *Files {
	return &Files{path: path}
}

// Load reads the config and everything it references (deployment.Load).
func (f *Files) Load(context.Context) (*deployment.Deployment, error) {
	cfg, err := config.Load(f.path, settings.Checks()...)
	if err != nil {
		return nil, err
	}
	f.watches.set(baseWatches(f.path, cfg), trees(cfg))
	return deployment.FromConfig(cfg)
}

// Watches are the config file's folder, the folders of the JWKS files it
// names, and the manifests and policy_dirs folders with their sub-folders.
// Before the first Load they come from reading the config once.
func (f *Files) Watches() []Watch {
	if ws, ok := f.watches.get(); ok {
		return ws
	}
	cfg, err := config.Load(f.path)
	if err != nil {
		return baseWatches(f.path, nil)
	}
	f.watches.set(baseWatches(f.path, cfg), trees(cfg))
	ws, _ := f.watches.get()
	return ws
}

// watchSet is the list of watches from the last config read.
type watchSet struct {
	mu    sync.Mutex
	list  []Watch
	known bool
}

func (s *watchSet) set(lists ...[]Watch) {
	var all []Watch
	for _, l := range lists {
		all = append(all, l...)
	}
	s.mu.Lock()
	s.list, s.known = all, true
	s.mu.Unlock()
}

func (s *watchSet) get() ([]Watch, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Watch(nil), s.list...), s.known
}

// baseWatches are the folders of the config file and of the files it reads
// (JWKS). The folder, not the file, is watched: editors and config
// management replace files by renaming, which a watch on the file misses.
// Only those files count (fileWatch), not others in their folders.
func baseWatches(path string, cfg *config.Config) []Watch {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	ws := []Watch{fileWatch(abs)}
	if cfg == nil {
		return ws
	}
	for _, is := range cfg.Auth.Issuers {
		if is.JWKSFile != "" {
			ws = append(ws, fileWatch(onDisk(cfg, is.JWKSFile)))
		}
	}
	return ws
}

// fileWatch watches one file through its folder.
func fileWatch(file string) Watch {
	file = filepath.Clean(file)
	return Watch{Dir: filepath.Dir(file), Files: []string{file}}
}

// trees are the manifests and policy_dirs folders, watched recursively for
// the files loading reads there: manifests, and policy modules.
func trees(cfg *config.Config) []Watch {
	var ws []Watch
	for _, rel := range cfg.Manifests {
		ws = append(ws, Watch{Dir: onDisk(cfg, rel), Recursive: true, Match: manifest.IsManifestFile})
	}
	for _, rel := range cfg.PolicyDirs {
		ws = append(ws, Watch{Dir: onDisk(cfg, rel), Recursive: true, Match: isModule})
	}
	return ws
}

// isModule matches the Rego files deployment.Load reads from policy_dirs.
func isModule(rel string) bool {
	return strings.HasSuffix(rel, ".rego") && !strings.HasSuffix(rel, "_test.rego")
}

func onDisk(cfg *config.Config, rel string) string {
	if filepath.IsAbs(rel) {
		return filepath.Clean(rel)
	}
	return filepath.Join(cfg.Dir, rel)
}
