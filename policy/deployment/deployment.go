// Package deployment loads a whole deployment — config, capability manifests
// and extra policy modules — into one validated, compiled snapshot.
package deployment

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/policy/regocheck"
)

// Deployment is a loaded, validated and compiled deployment.
type Deployment struct {
	Config   *config.Config
	Snapshot *compile.Snapshot
	// Warnings are findings that do not stop the deployment from serving.
	Warnings []string
}

// Registry is the deployment's capability registry.
func (d *Deployment) Registry() *manifest.Registry { return d.Snapshot.Registry }

// Load reads the config at path and everything it references. An empty path
// loads the embedded default (the finance example). checks are the
// runtime's checks of its settings (sidecar/settings.Checks; see
// config.Check).
func Load(path string, checks ...config.Check) (*Deployment, error) {
	var (
		cfg *config.Config
		err error
	)
	if path == "" {
		cfg, err = config.InspectFS(manifests.FS, manifests.DefaultConfig, checks...)
	} else {
		cfg, err = config.Inspect(path, checks...)
	}
	if err != nil {
		if cfg == nil {
			return nil, err
		}
		// The config has problems but decoded: check the manifests and
		// policy modules it names too, so every problem is reported at once.
		var all diag.Set
		all.Merge(err)
		_, _, perr := parts(cfg)
		all.Merge(perr)
		return nil, &all
	}
	return FromConfig(cfg)
}

// FromConfig loads the manifests and policy modules a validated config names,
// validates them together and compiles the snapshot. Every problem found is
// reported at once; nothing is compiled from a registry that failed.
func FromConfig(cfg *config.Config) (*Deployment, error) {
	reg, extra, err := parts(cfg)
	if err != nil {
		return nil, err
	}
	snap, err := compile.Build(reg, cfg.Auth, extra, compile.WithQuotas(cfg.Quotas))
	if err != nil {
		return nil, fmt.Errorf("compile deployment: %w", err)
	}
	warnings := append(cfg.Warnings(), problemStrings(reg.Warnings())...)
	warnings = append(warnings, scopeWarnings(cfg, reg)...)
	warnings = append(warnings, quotaWarnings(cfg, reg)...)
	return &Deployment{Config: cfg, Snapshot: snap, Warnings: warnings}, nil
}

// scopeWarnings names each scope that exactly one manifest requires and the
// config does not list as granted (auth.known_scopes, an issuer's scopes,
// an mTLS principal's, the preview scope): most likely a typo such as
// "alerts.raed", which would make the capability unreachable in silence.
// Each names the manifest's file and line, and the granted scope it most
// likely misspells.
func scopeWarnings(cfg *config.Config, reg *manifest.Registry) []string {
	granted := cfg.Auth.GrantedScopes()
	known := make([]string, 0, len(granted))
	for s := range granted {
		known = append(known, s)
	}
	sort.Strings(known)
	// A scope's users, each with the field that requires it: one use per
	// capability (requires_scopes first, then requires_any_of).
	type use struct {
		c     *manifest.Capability
		field string
		line  int
	}
	users := map[string][]use{}
	for i := range reg.All() {
		c := &reg.All()[i]
		add := func(s, field string, line int) {
			if u := users[s]; len(u) > 0 && u[len(u)-1].c == c {
				return
			}
			users[s] = append(users[s], use{c, field, line})
		}
		for _, s := range c.RequiresScopes {
			add(s, "requires_scopes", c.Source.ScopesLine)
		}
		for _, alt := range c.RequiresAnyOf {
			for _, s := range alt {
				add(s, "requires_any_of", c.Source.AnyOfLine)
			}
		}
	}
	var out []diag.Problem
	for s, us := range users {
		if len(us) == 1 && !granted[s] {
			u := us[0]
			out = append(out, diag.Problem{File: u.c.Source.File, Line: u.line, Field: u.field,
				Message: fmt.Sprintf("scope %q is required by %s only and granted by nothing the config knows%s (list the scopes your issuers grant in auth.issuers[].scopes or auth.known_scopes)", s, u.c.ID, scopeHint(s, known))})
		}
	}
	return problemStrings(out)
}

// scopeHint is "; did you mean X?" for the granted scope s likely
// misspells, else ": a typo?".
func scopeHint(s string, known []string) string {
	if m := diag.DidYouMean(s, known); m != "" {
		return m
	}
	return ": a typo?"
}

// problemStrings renders problems in reporting order.
func problemStrings(ps []diag.Problem) []string {
	set := diag.Set{Problems: ps}
	var out []string
	for _, p := range set.Sorted() {
		out = append(out, p.String())
	}
	return out
}

// parts loads and validates the manifests and policy modules cfg names.
func parts(cfg *config.Config) (*manifest.Registry, map[string]string, error) {
	var problems diag.Set

	dirs := make([]manifest.Dir, 0, len(cfg.Manifests))
	for _, p := range cfg.Manifests {
		fsys, name, err := cfg.Open(p)
		if err != nil {
			problems.Add(name, 0, "manifests", "%v", err)
			continue
		}
		dirs = append(dirs, manifest.Dir{FS: fsys, Name: name})
	}
	reg, err := manifest.Load(dirs, manifest.Options{Handlers: cfg.HasHandler})
	problems.Merge(err)
	if reg != nil {
		checkQuotas(cfg, reg, &problems)
	}

	extra, err := readModules(cfg)
	problems.Merge(err)
	if err == nil {
		problems.Merge(regocheck.ValidateExtraModules(extra))
	}
	if err := problems.ErrOrNil(); err != nil {
		return nil, nil, err
	}
	return reg, extra, nil
}

// readModules collects the .rego files (tests excluded) under policy_dirs,
// keyed by display path.
func readModules(cfg *config.Config) (map[string]string, error) {
	var problems diag.Set
	mods := map[string]string{}
	for _, dir := range cfg.PolicyDirs {
		fsys, name, err := cfg.Open(dir)
		if err != nil {
			problems.Add(name, 0, "policy_dirs", "%v", err)
			continue
		}
		var files []string
		err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(p, ".rego") && !strings.HasSuffix(p, "_test.rego") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			problems.Add(name, 0, "policy_dirs", "read policy modules: %v", err)
			continue
		}
		sort.Strings(files)
		key := moduleDir(dir)
		for _, f := range files {
			b, err := fs.ReadFile(fsys, f)
			if err != nil {
				problems.Add(path.Join(name, f), 0, "", "read policy module: %v", err)
				continue
			}
			mods[path.Join(key, f)] = string(b)
		}
	}
	return mods, problems.ErrOrNil()
}

// BasePath is the path of the advertised interface URL (agent.url) without a
// trailing slash: "" when the agent is served at the root. The JSON-RPC
// endpoint is at this path and the HTTP+JSON routes below it.
func (d *Deployment) BasePath() string {
	u, err := url.Parse(d.Config.Agent.URL)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.EscapedPath(), "/")
}

// moduleDir names a policy_dirs entry for module keys: the path as written
// in the config, made relative ("./policies" -> "policies",
// "/etc/capgate/deny" -> "etc/capgate/deny"), since bundles need relative
// module names.
func moduleDir(dir string) string {
	parts := strings.Split(path.Clean(filepath.ToSlash(dir)), "/")
	kept := parts[:0]
	for _, p := range parts {
		if p != "" && p != "." && p != ".." {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return "policies"
	}
	return strings.Join(kept, "/")
}
