package deployment

import (
	"fmt"
	"io"
	"slices"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/diag"
)

// LoadBundle reads the config at path for the runtime settings (agent,
// listeners, authentication, handlers, identity, store, limits) and the
// bundle r — built by `capgate compile` — for the capabilities and policy
// modules. With a verification key in opts the bundle's signature is
// checked first, and an unsigned or tampered bundle is refused.
func LoadBundle(path string, r io.Reader, opts compile.VerifyOptions, checks ...config.Check) (*Deployment, error) {
	cfg, err := config.Load(path, checks...)
	if err != nil {
		return nil, err
	}
	snap, err := compile.ReadBundle(r, opts)
	if err != nil {
		return nil, err
	}
	return FromBundle(cfg, snap)
}

// FromBundle pairs a validated config with a snapshot read from a bundle.
// The bundle replaces the config's manifests and policy_dirs; everything
// else comes from the config. The two must agree: every handler a
// capability names is defined in the config's handlers, and the policy
// settings compiled into the bundle (auth.preview_scope, preview_tenants,
// anonymous_public) equal the config's, since the gateway reads those from
// the config while the policy reads them from the bundle. Every mismatch is
// reported at once as a *diag.Set.
func FromBundle(cfg *config.Config, snap *compile.Snapshot) (*Deployment, error) {
	if cfg == nil || snap == nil || snap.Registry == nil {
		return nil, fmt.Errorf("deployment from bundle: missing config or snapshot")
	}
	var problems diag.Set
	const bundleFile = "bundle"
	for _, c := range snap.Registry.All() {
		if c.Handler != "" && !cfg.HasHandler(c.Handler) {
			problems.Add(bundleFile, 0, "capabilities."+c.ID+".handler", "handler %q is not defined in %s handlers", c.Handler, cfg.File())
		}
	}
	s := snap.Settings
	if s.PreviewScope != cfg.Auth.PreviewScope {
		problems.Add(bundleFile, 0, "settings.preview_scope", "%q differs from auth.preview_scope %q in %s", s.PreviewScope, cfg.Auth.PreviewScope, cfg.File())
	}
	if !slices.Equal(nonNil(s.PreviewTenants), nonNil(cfg.Auth.PreviewTenants)) {
		problems.Add(bundleFile, 0, "settings.preview_tenants", "%q differs from auth.preview_tenants %q in %s", s.PreviewTenants, cfg.Auth.PreviewTenants, cfg.File())
	}
	if s.AnonymousPublic != cfg.Auth.AnonymousPublic {
		problems.Add(bundleFile, 0, "settings.anonymous_public", "%v differs from auth.anonymous_public %v in %s", s.AnonymousPublic, cfg.Auth.AnonymousPublic, cfg.File())
	}
	if err := problems.ErrOrNil(); err != nil {
		return nil, err
	}
	warnings := cfg.Warnings()
	if len(cfg.PolicyDirs) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s: policy_dirs are not read when serving a bundle: the bundle carries the policy modules", cfg.File()))
	}
	return &Deployment{Config: cfg, Snapshot: snap, Warnings: warnings}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
