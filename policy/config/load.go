package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/diag/yamlnode"
	"github.com/capgate/capgate/policy/manifest"
)

// Load reads, defaults and validates the config file at path. Relative
// paths inside it resolve against its directory. Every problem is returned
// at once as a *diag.Set.
func Load(p string, checks ...Check) (*Config, error) {
	c, err := Inspect(p, checks...)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Inspect is Load that also returns the config when it decoded but has
// problems, so that a checker can go on to what it names (manifests, policy
// modules) and report every problem at once. A config returned with an
// error must not be served. The config is nil when nothing could be decoded.
func Inspect(p string, checks ...Check) (*Config, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", p, err)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", p, err)
	}
	c, err := parse(filepath.ToSlash(p), data)
	if c == nil {
		return nil, err
	}
	c.Dir = filepath.Dir(abs)
	c.dispDir = filepath.ToSlash(filepath.Dir(p))
	return c.finish(err, checks)
}

// LoadFS reads, defaults and validates the config file name inside fsys
// (e.g. the embedded default). Relative paths resolve inside fsys and may
// not leave it.
func LoadFS(fsys fs.FS, name string, checks ...Check) (*Config, error) {
	c, err := InspectFS(fsys, name, checks...)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// InspectFS is LoadFS that also returns a decoded config with problems
// (see Inspect).
func InspectFS(fsys fs.FS, name string, checks ...Check) (*Config, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", name, err)
	}
	c, err := parse(name, data)
	if c == nil {
		return nil, err
	}
	c.fsys = fsys
	c.Dir = path.Dir(name)
	c.dispDir = c.Dir
	return c.finish(err, checks)
}

// parse decodes data; it returns a nil config only when nothing could be
// decoded, and the decoding problems as the error.
func parse(file string, data []byte) (*Config, error) {
	var probs diag.Set
	root := yamlnode.Parse(file, data, &probs)
	if root == nil {
		return nil, probs.ErrOrNil()
	}
	c := &Config{file: file}
	d := &decoder{file: file, probs: &probs, lines: map[string]int{}, bad: map[string]bool{}}
	d.decode(root, reflect.ValueOf(c).Elem(), "")
	c.lines, c.bad = d.lines, d.bad
	c.HandlerBindings, c.HandlerExposeErrors = d.bindings, d.exposeErrors
	c.applyDefaults()
	return c, probs.ErrOrNil()
}

// finish validates the decoded config, runs the runtime's checks and joins
// decoding problems with validation problems; the config is returned with
// them (see Inspect).
func (c *Config) finish(decodeErr error, checks []Check) (*Config, error) {
	var all diag.Set
	all.Merge(decodeErr)
	all.Merge(c.Validate())
	all.Merge(c.Check(checks...))
	return c, all.ErrOrNil()
}

// A Check checks settings whose rules the runtime owns: capgate.yaml holds
// them — store and its credentials, push.allowed_urls, an issuer's
// jwks_file — and this package decodes them (their shape, types and keys,
// with did-you-mean), but what makes a value right lives with the code that
// uses it, under sidecar/, which nothing under policy/ imports. A Check
// returns its problems by field (diag.Problem's Field and Message); the
// config gives them its file and the field's line. The runtime's checks are
// sidecar/settings.Checks, which every loader of a config to serve passes
// to Load (or Inspect, LoadFS, InspectFS).
type Check func(c *Config) []diag.Problem

// Check runs checks on c and returns their problems at their lines, as a
// *diag.Set, or nil. A field whose value did not decode is not reported
// twice.
func (c *Config) Check(checks ...Check) error {
	v := &validator{c: c}
	for _, check := range checks {
		for _, p := range check(c) {
			v.add(p.Field, "%s", p.Message)
		}
	}
	return v.probs.ErrOrNil()
}

func (c *Config) applyDefaults() {
	setDefault(&c.Listen.A2A, DefaultListenA2A)
	setDefault(&c.Listen.ExtAuthz, DefaultListenExtAuthz)
	setDefault(&c.Listen.Admin, DefaultListenAdmin)
	setDefault(&c.Auth.ScopesClaim, DefaultScopesClaim)
	setDefault(&c.Auth.TenantClaim, DefaultTenantClaim)
	setDefault(&c.Store, DefaultStore)
	setDefault(&c.Cards.ExtendedCard, DefaultExtendedCard)
	setDefault(&c.Cards.DefaultVersion, DefaultCardVersion)
	setDefault(&c.Cards.SecurityRequirements, SecurityRequirementsOmit)
	if !c.present("router.threshold") {
		c.Router.Threshold = DefaultRouterThreshold
	}
	setDefault(&c.Tracing.Protocol, TracingGRPC)
	setDefault(&c.Tracing.ServiceName, DefaultTracingServiceName)
	if !c.present("tracing.sample_ratio") {
		c.Tracing.SampleRatio = 1
	}
	if !c.present("cards.max_age") {
		c.Cards.MaxAge = DefaultCardMaxAge
	}
	if !c.present("auth.jsonrpc_http_status") {
		c.Auth.JSONRPCHTTPStatus = JSONRPCStatusOK
	}
	if !c.present("auth.clock_skew") {
		c.Auth.ClockSkew = DefaultClockSkew
	}
	if c.Auth.MaxTokenLifetime == 0 {
		c.Auth.MaxTokenLifetime = DefaultMaxTokenLifetime
	}
	setDefault(&c.Identity.Issuer, c.Agent.URL)
	setDefault(&c.Identity.AgentID, c.Agent.URL)
	if c.Identity.TTL == 0 {
		c.Identity.TTL = DefaultIdentityTTL
	}
	if x := c.Identity.TokenExchange; x != nil && x.Timeout == 0 {
		x.Timeout = DefaultExchangeTimeout
	}
	if m := c.Router.Model; m != nil && m.Timeout == 0 {
		m.Timeout = DefaultModelTimeout
	}
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Limits.MaxDepth == 0 {
		c.Limits.MaxDepth = DefaultMaxDepth
	}
	if c.Limits.HandlerTimeout == 0 {
		c.Limits.HandlerTimeout = DefaultHandlerTimeout
	}
	if c.Limits.StreamIdleTimeout == 0 {
		c.Limits.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if c.Limits.PendingTTL == 0 {
		c.Limits.PendingTTL = DefaultPendingTTL
	}
	if c.Limits.PendingPerCaller == 0 {
		c.Limits.PendingPerCaller = DefaultPendingPerCaller
	}
	if c.Limits.MessageIDWindow == 0 {
		c.Limits.MessageIDWindow = DefaultMessageIDWindow
	}
	if c.Limits.MessageIDsPerCaller == 0 {
		c.Limits.MessageIDsPerCaller = DefaultMessageIDsPerCaller
	}
	if c.Limits.ReadTimeout == 0 {
		c.Limits.ReadTimeout = DefaultReadTimeout
	}
	if c.Limits.IdleTimeout == 0 {
		c.Limits.IdleTimeout = DefaultIdleTimeout
	}
	if t := c.Auth.TrustedProxy; t != nil {
		setDefault(&t.Header, DefaultProxySecretHeader)
		setDefault(&t.PeerHeader, DefaultProxyPeerHeader)
	}
	if !c.present("limits.stream_keepalive") {
		c.Limits.StreamKeepAlive = DefaultStreamKeepAlive // an explicit 0 turns keep-alives off
	}
	if !c.present("limits.memory") {
		c.Limits.Memory = MemoryLimit{Auto: true}
	}
	if c.Agent.Streaming == nil {
		on := true
		c.Agent.Streaming = &on
	}
}

func setDefault(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func (c *Config) present(field string) bool {
	_, ok := c.lines[field]
	return ok && !c.bad[field]
}

// File is the display path of the config file.
func (c *Config) File() string {
	if c.file == "" {
		return "config"
	}
	return c.file
}

// Handler bindings, as the A2A specification names them (AgentInterface.protocolBinding).
const (
	BindingJSONRPC  = "JSONRPC"
	BindingHTTPJSON = "HTTP+JSON"
	BindingGRPC     = "GRPC"
)

// HandlerBinding is the binding handler name is called over: its declared
// binding, JSONRPC by default.
func (c *Config) HandlerBinding(name string) string {
	if b := c.HandlerBindings[name]; b != "" {
		return b
	}
	return BindingJSONRPC
}

// HasHandler reports whether the config defines a handler of that name.
func (c *Config) HasHandler(name string) bool {
	_, ok := c.Handlers[name]
	return ok
}

// Open returns a filesystem rooted at the directory rel (relative to the
// config file; on disk it may also be absolute or climb with ".."), and its
// display name for messages.
func (c *Config) Open(rel string) (fs.FS, string, error) {
	if c.fsys != nil {
		name, err := c.embedded(rel)
		if err != nil {
			return nil, "", err
		}
		st, err := fs.Stat(c.fsys, name)
		if err != nil {
			return nil, "", fmt.Errorf("open %s: %w", name, pathless(err))
		}
		if !st.IsDir() {
			return nil, "", fmt.Errorf("open %s: not a directory", name)
		}
		sub, err := fs.Sub(c.fsys, name)
		if err != nil {
			return nil, "", fmt.Errorf("open %s: %w", name, pathless(err))
		}
		return sub, name, nil
	}
	p, display := c.onDisk(rel)
	st, err := os.Stat(p)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", display, pathless(err))
	}
	if !st.IsDir() {
		return nil, "", fmt.Errorf("open %s: not a directory", display)
	}
	return os.DirFS(p), display, nil
}

// ReadFile reads the file rel (relative to the config file), e.g. a JWKS.
func (c *Config) ReadFile(rel string) ([]byte, error) {
	if c.fsys != nil {
		name, err := c.embedded(rel)
		if err != nil {
			return nil, err
		}
		b, err := fs.ReadFile(c.fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, pathless(err))
		}
		return b, nil
	}
	p, display := c.onDisk(rel)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", display, pathless(err))
	}
	return b, nil
}

func (c *Config) embedded(rel string) (string, error) {
	if path.IsAbs(rel) {
		return "", fmt.Errorf("open %s: absolute paths cannot be used in an embedded config", rel)
	}
	name := path.Join(c.Dir, rel)
	if !fs.ValidPath(name) {
		return "", fmt.Errorf("open %s: outside the embedded filesystem", rel)
	}
	return name, nil
}

func (c *Config) onDisk(rel string) (osPath, display string) {
	if filepath.IsAbs(rel) {
		return filepath.Clean(rel), filepath.ToSlash(filepath.Clean(rel))
	}
	dir := c.Dir
	if dir == "" {
		dir = "."
	}
	dd := c.dispDir
	if dd == "" {
		dd = "."
	}
	return filepath.Join(dir, rel), filepath.ToSlash(filepath.Join(dd, rel))
}

// pathless drops the path from an fs error: the caller names it already.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ManifestDirs opens every manifests folder.
func (c *Config) ManifestDirs() ([]manifest.Dir, error) {
	var probs diag.Set
	dirs := make([]manifest.Dir, 0, len(c.Manifests))
	for i, rel := range c.Manifests {
		fsys, name, err := c.Open(rel)
		if err != nil {
			field := fmt.Sprintf("manifests[%d]", i)
			probs.Add(c.File(), c.line(field), field, "%v", err)
			continue
		}
		dirs = append(dirs, manifest.Dir{FS: fsys, Name: name})
	}
	if err := probs.ErrOrNil(); err != nil {
		return nil, err
	}
	return dirs, nil
}

// LoadRegistry loads and validates the manifests the config names, checking
// handlers against the config.
func (c *Config) LoadRegistry() (*manifest.Registry, error) {
	dirs, err := c.ManifestDirs()
	if err != nil {
		return nil, err
	}
	return manifest.Load(dirs, manifest.Options{Handlers: c.HasHandler})
}

// envName is a portable environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Secret reads a secret given as name_file (relative to the config file,
// surrounding white space removed) or name_env (the variable's value as
// is): "" when neither is set. On error, key is the setting at fault; the
// error never holds the secret.
func (c *Config) Secret(name, file, env string) (p, key string, err error) {
	switch {
	case file != "" && env != "":
		return "", name + "_file", fmt.Errorf("set this or %s_env, not both", name)
	case file != "":
		b, err := c.ReadFile(file)
		if err != nil {
			return "", name + "_file", err
		}
		if p = strings.TrimSpace(string(b)); p == "" {
			return "", name + "_file", fmt.Errorf("%s is empty", file)
		}
		return p, "", nil
	case env != "":
		if !envName.MatchString(env) {
			return "", name + "_env", fmt.Errorf("%q is not an environment variable name", env)
		}
		p, ok := os.LookupEnv(env)
		if !ok {
			return "", name + "_env", fmt.Errorf("the environment variable %s is not set", env)
		}
		if p == "" {
			return "", name + "_env", fmt.Errorf("the environment variable %s is empty", env)
		}
		return p, "", nil
	}
	return "", "", nil
}
