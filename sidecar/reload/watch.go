package reload

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// Watch is a directory whose changes call for a reload.
type Watch struct {
	Dir string
	// Recursive also watches every folder below Dir (manifests and
	// policy_dirs may be organized in sub-folders).
	Recursive bool
	// Files, when not empty, are the only files of Dir (absolute paths)
	// whose changes count: the config, a JWKS, a bundle — not notes.txt
	// beside them.
	Files []string
	// Match, when set, says whether a file below Dir (path relative to
	// Dir) is one the deployment reads: a manifest, a policy module.
	Match func(rel string) bool
}

// Reads reports whether a change of the file at path (absolute) can change
// what is loaded: it is one of the watch's files, or below a recursive
// watch and matched. A folder below a recursive watch counts (a new folder
// of manifests, one removed).
func (x Watch) Reads(path string, isDir bool) bool {
	dir := filepath.Clean(x.Dir)
	path = filepath.Clean(path)
	if !x.Recursive {
		if filepath.Dir(path) != dir {
			return false
		}
		return len(x.Files) == 0 || slices.Contains(x.Files, path)
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || rel == ".." {
		return false
	}
	return isDir || x.Match == nil || x.Match(rel)
}

// reads reports whether any watch reads path.
func reads(ws []Watch, path string, isDir bool) bool {
	return slices.ContainsFunc(ws, func(x Watch) bool { return x.Reads(path, isDir) })
}

// watcher follows a set of directories with fsnotify. inotify watches a
// directory, not a tree, so recursive watches are expanded to every folder
// below, again on each sync (folders come and go).
type watcher struct {
	fsw *fsnotify.Watcher
	log *zap.Logger

	mu      sync.Mutex
	watched map[string]bool
	ws      []Watch // the last synced watches, for filtering events
}

func newWatcher(log *zap.Logger) (*watcher, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return &watcher{fsw: fsw, log: log, watched: map[string]bool{}}, nil
}

// sync makes the watched set equal to the directories ws names.
func (w *watcher) sync(ws []Watch) {
	want := map[string]bool{}
	for _, x := range ws {
		dir := filepath.Clean(x.Dir)
		if !x.Recursive {
			want[dir] = true
			continue
		}
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == dir {
					want[dir] = true // let Add report it
				}
				return nil
			}
			if d.IsDir() {
				want[p] = true
			}
			return nil
		})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ws = append(w.ws[:0:0], ws...)
	for dir := range w.watched {
		if !want[dir] {
			_ = w.fsw.Remove(dir) // fails when the folder is gone: nothing to undo
			delete(w.watched, dir)
		}
	}
	for dir := range want {
		if w.watched[dir] {
			continue
		}
		if err := w.fsw.Add(dir); err != nil {
			w.log.Warn("cannot watch folder", zap.String("dir", dir), zap.Error(err))
			continue
		}
		w.watched[dir] = true
	}
}

// relevant reports whether an event is about a file the deployment reads
// (or a folder inside a watched tree, or one that was watched).
func (w *watcher) relevant(ev fsnotify.Event) bool {
	name := filepath.Clean(ev.Name)
	w.mu.Lock()
	defer w.mu.Unlock()
	isDir := w.watched[name]
	if !isDir && ev.Has(fsnotify.Create) {
		if st, err := os.Stat(name); err == nil && st.IsDir() {
			isDir = true
		}
	}
	return reads(w.ws, name, isDir)
}

// run calls changed for every event that may change what is loaded, until
// ctx ends: a change of a file the deployment reads. Attribute changes
// (chmod, touch) and other files in the watched folders are ignored.
func (w *watcher) run(ctx context.Context, changed func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod || !w.relevant(ev) {
				continue
			}
			w.log.Debug("file changed", zap.String("path", ev.Name), zap.String("op", ev.Op.String()))
			changed()
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			// An overflow loses events: reload to be sure nothing was missed.
			w.log.Warn("watch error", zap.Error(err))
			changed()
		}
	}
}

func (w *watcher) close() { _ = w.fsw.Close() }
