package reload

import (
	"context"
	"io/fs"
	"path/filepath"
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
}

// watcher follows a set of directories with fsnotify. inotify watches a
// directory, not a tree, so recursive watches are expanded to every folder
// below, again on each sync (folders come and go).
type watcher struct {
	fsw *fsnotify.Watcher
	log *zap.Logger

	mu      sync.Mutex
	watched map[string]bool
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

// run calls changed for every event that may change what is loaded, until
// ctx ends. Attribute changes (chmod, touch) are ignored.
func (w *watcher) run(ctx context.Context, changed func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod {
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
