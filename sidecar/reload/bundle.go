package reload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/download"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/rest"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/settings"
)

// DefaultPoll is the interval between two polls of a bundle URL.
const DefaultPoll = 30 * time.Second

// BundleOptions tune a Bundle source.
type BundleOptions struct {
	// Verify checks the bundle's signature (compile.ReadBundle): with a
	// public key, unsigned and tampered bundles are refused.
	Verify compile.VerifyOptions
	// Poll is the interval between polls of a URL (DefaultPoll when 0).
	Poll time.Duration
	// Logger logs polls (default: none).
	Logger *zap.Logger
}

// Bundle is a deployment whose capabilities and policy come from an OPA
// bundle built by `capgate compile` — a file, or an http(s) URL polled with
// ETag (OPA's downloader) — and whose runtime settings come from a config
// file (deployment.FromBundle).
type Bundle struct {
	config   string
	location string
	remote   *url.URL // nil: location is a file
	opts     BundleOptions
	log      *zap.Logger
	watches  watchSet

	dl      *download.Downloader
	fetchMu sync.Mutex // one download at a time
	mu      sync.Mutex
	snap    *compile.Snapshot // last bundle fetched and verified (remote)
	fresh   bool              // the last download brought a new bundle
}

var (
	_ Watched = (*Bundle)(nil)
	_ Poller  = (*Bundle)(nil)
)

// NewBundle returns the source of the bundle at location (a file path or
// an http(s) URL) served with the config file at configPath.
func NewBundle(configPath, location string, opts BundleOptions) (*Bundle, error) {
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	b := &Bundle{config: configPath, location: location, opts: opts, log: opts.Logger}
	if b.log == nil {
		b.log = zap.NewNop()
	}
	if !strings.HasPrefix(location, "http://") && !strings.HasPrefix(location, "https://") {
		return b, nil
	}
	u, err := url.Parse(location)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("bundle URL %q: not an absolute http(s) URL", location)
	}
	b.remote = u
	if b.dl, err = b.downloader(); err != nil {
		return nil, fmt.Errorf("bundle %s: %w", b.Location(), err)
	}
	return b, nil
}

// Location is where the bundle comes from, for logs: a URL loses its
// query and credentials.
func (b *Bundle) Location() string {
	if b.remote == nil {
		return b.location
	}
	return b.remote.Scheme + "://" + b.remote.Host + b.remote.Path
}

// downloader builds OPA's bundle downloader for the URL: manual trigger
// (Poll sets the pace), the raw bytes kept (WithBundlePersistence) so that
// compile.ReadBundle rebuilds and checks the snapshot from them. OPA's
// reader parses the bundle first; it must be given the same verification
// key, since it refuses to read a signed bundle it cannot check.
func (b *Bundle) downloader() (*download.Downloader, error) {
	base := b.remote.Scheme + "://" + b.remote.Host
	rc, err := json.Marshal(map[string]any{"url": base})
	if err != nil {
		return nil, err
	}
	client, err := rest.New(rc, nil, rest.Logger(logging.NewNoOpLogger()))
	if err != nil {
		return nil, err
	}
	trigger := plugins.TriggerManual
	conf := download.Config{Trigger: &trigger}
	if err := conf.ValidateAndInjectDefaults(); err != nil {
		return nil, err
	}
	p := strings.TrimPrefix(b.remote.EscapedPath(), "/")
	if b.remote.RawQuery != "" {
		p += "?" + b.remote.RawQuery
	}
	limit := b.opts.Verify.MaxBytes
	if limit <= 0 {
		limit = compile.DefaultMaxBundleBytes
	}
	dl := download.New(conf, client, p).
		WithCallback(b.update).
		WithBundlePersistence(true).
		WithSizeLimitBytes(limit).
		WithBundleParserOpts(ast.ParserOptions{RegoVersion: ast.RegoV1})
	if v := b.opts.Verify; len(v.PublicKey) > 0 {
		alg, kid := v.Alg, v.KeyID
		if alg == "" {
			alg = compile.DefaultSigningAlg
		}
		if kid == "" {
			kid = compile.DefaultKeyID
		}
		keys := map[string]*bundle.KeyConfig{kid: {Key: string(v.PublicKey), Algorithm: alg, Scope: v.Scope}}
		dl = dl.WithBundleVerificationConfig(bundle.NewVerificationConfig(keys, "", v.Scope, nil))
	}
	return dl, nil
}

// update receives the downloader's result. A new bundle is read and
// verified by compile.ReadBundle before it replaces the last good one; its
// error fails the download (the ETag is kept: the same refused bundle is
// not downloaded again).
func (b *Bundle) update(_ context.Context, u download.Update) error {
	if u.Error != nil || u.Bundle == nil {
		return nil // the error is Trigger's; nil Bundle: 304 Not Modified
	}
	raw, err := io.ReadAll(u.Raw)
	if err != nil {
		return err
	}
	snap, err := compile.ReadBundle(bytes.NewReader(raw), b.opts.Verify)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.snap, b.fresh = snap, true
	b.mu.Unlock()
	b.log.Info("bundle downloaded", zap.String("bundle", b.Location()), zap.String("etag", u.ETag), zap.String("bundle_revision", snap.Revision), zap.Int("bytes", len(raw)))
	return nil
}

// fetch downloads the URL once (conditional on the last ETag) and reports
// whether a new bundle arrived.
func (b *Bundle) fetch(ctx context.Context) (bool, error) {
	b.fetchMu.Lock()
	defer b.fetchMu.Unlock()
	b.mu.Lock()
	b.fresh = false
	b.mu.Unlock()
	if err := b.dl.Trigger(ctx); err != nil {
		return false, fmt.Errorf("bundle %s: %w", b.Location(), err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fresh, nil
}

// Load reads the config and the bundle: a file is read (and verified)
// again; a URL's last verified bundle is used, downloaded first when there
// is none yet.
func (b *Bundle) Load(ctx context.Context) (*deployment.Deployment, error) {
	cfg, err := config.Load(b.config, settings.Checks()...)
	if err != nil {
		return nil, err
	}
	b.watches.set(b.baseWatches(cfg))
	var snap *compile.Snapshot
	if b.remote == nil {
		raw, err := os.ReadFile(b.location)
		if err != nil {
			return nil, fmt.Errorf("read bundle: %w", err)
		}
		if snap, err = compile.ReadBundle(bytes.NewReader(raw), b.opts.Verify); err != nil {
			return nil, fmt.Errorf("bundle %s: %w", b.location, err)
		}
	} else {
		b.mu.Lock()
		snap = b.snap
		b.mu.Unlock()
		if snap == nil {
			if _, err := b.fetch(ctx); err != nil {
				return nil, err
			}
			b.mu.Lock()
			snap = b.snap
			b.mu.Unlock()
			if snap == nil {
				return nil, fmt.Errorf("bundle %s: the server sent no bundle", b.Location())
			}
		}
	}
	return deployment.FromBundle(cfg, snap)
}

// Watches are the config file's folder (and its JWKS files' folders) and,
// for a bundle file, the bundle's folder.
func (b *Bundle) Watches() []Watch {
	if ws, ok := b.watches.get(); ok {
		return ws
	}
	cfg, _ := config.Load(b.config) // nil on error: the config's folder only
	b.watches.set(b.baseWatches(cfg))
	ws, _ := b.watches.get()
	return ws
}

func (b *Bundle) baseWatches(cfg *config.Config) []Watch {
	ws := baseWatches(b.config, cfg)
	if b.remote == nil {
		abs, err := filepath.Abs(b.location)
		if err != nil {
			abs = b.location
		}
		ws = append(ws, fileWatch(abs))
	}
	return ws
}

// Poll downloads a URL every Poll interval until ctx ends; a file is not
// polled (its folder is watched). A new bundle that reads and verifies
// calls changed; a refused one calls failed. A server that cannot be
// reached or answers with an error is logged: that is no bundle, not a bad
// one.
func (b *Bundle) Poll(ctx context.Context, changed func(), failed func(error)) {
	if b.remote == nil {
		return
	}
	t := time.NewTicker(b.opts.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fresh, err := b.fetch(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && unreachable(err):
			b.log.Warn("bundle download failed; the last good bundle keeps serving", zap.String("bundle", b.Location()), zap.Error(err))
		case err != nil:
			failed(err)
		case fresh:
			changed()
		default:
			b.log.Debug("bundle not modified", zap.String("bundle", b.Location()))
		}
	}
}

// unreachable tells a failed request (transport error, error status) from
// a bundle that was received and refused.
func unreachable(err error) bool {
	var he download.HTTPError
	var ue *url.Error
	return errors.As(err, &he) || errors.As(err, &ue)
}
