package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/capgate/capgate/policy/diag"
)

// Algorithms are the JWT signature algorithms an issuer may use.
var Algorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// BuiltinHandlers are the handler targets served inside capgate.
var BuiltinHandlers = []string{"builtin:echo"}

// ExtendedCardModes are the values of cards.extended_card.
var ExtendedCardModes = []string{"auto", "on", "off"}

var (
	semverRE     = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	versionSegRE = regexp.MustCompile(`^v\d+(\.\d+)*$`)
)

// validator reports problems at the line of the field they concern.
type validator struct {
	c     *Config
	probs diag.Set
}

func (v *validator) add(field, format string, args ...any) {
	if v.c.bad[field] {
		return // a decoding problem was already reported here
	}
	v.probs.Add(v.c.File(), v.c.line(field), field, format, args...)
}

// line finds the line of a field, or of its nearest enclosing field.
func (c *Config) line(field string) int {
	for field != "" {
		if l, ok := c.lines[field]; ok {
			return l
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			break
		}
		field = field[:i]
	}
	return 0
}

// Validate checks the whole config and returns every problem as a
// *diag.Set, or nil.
func (c *Config) Validate() error {
	v := &validator{c: c}
	v.agent()
	v.paths()
	v.auth()
	v.handlers()
	v.listen()
	if t := c.Router.Threshold; math.IsNaN(t) || t < 0 || t > 1 {
		v.add("router.threshold", "%v is outside [0, 1]", t)
	}
	if c.Cards.DefaultVersion != "1.0" && c.Cards.DefaultVersion != "0.3" {
		v.add("cards.default_version", "%q is not one of 1.0, 0.3", c.Cards.DefaultVersion)
	}
	if f := c.Cards.SecurityRequirements; !slices.Contains(SecurityRequirementForms, f) {
		v.add("cards.security_requirements", "%q is not one of %s%s", f, strings.Join(SecurityRequirementForms, ", "), diag.DidYouMean(f, SecurityRequirementForms))
	}
	if !slices.Contains(ExtendedCardModes, c.Cards.ExtendedCard) {
		v.add("cards.extended_card", "%q is not one of %s%s", c.Cards.ExtendedCard, strings.Join(ExtendedCardModes, ", "), diag.DidYouMean(c.Cards.ExtendedCard, ExtendedCardModes))
	}
	if c.Cards.MaxAge < 0 {
		v.add("cards.max_age", "%s is negative", c.Cards.MaxAge)
	}
	v.cardSigning()
	if s := c.Auth.JSONRPCHTTPStatus; s != JSONRPCStatusOK && s != JSONRPCStatusAuth {
		v.add("auth.jsonrpc_http_status", "%d is not one of 200 (always 200), 401 (401 or 403 with WWW-Authenticate for authentication and authorization failures)", s)
	}
	if c.Auth.ClockSkew < 0 {
		v.add("auth.clock_skew", "%s is negative", c.Auth.ClockSkew)
	}
	if c.Auth.MaxTokenLifetime < 0 {
		v.add("auth.max_token_lifetime", "%s is negative (0 or unset: the default %s)", c.Auth.MaxTokenLifetime, DefaultMaxTokenLifetime)
	}
	v.identity()
	v.limits()
	v.trustedProxy()
	v.tracing()
	c.Quotas.Check("quotas", v.add)
	for peer := range c.Auth.MTLSPrincipals {
		if strings.TrimSpace(peer) == "" || strings.ContainsAny(peer, " \t\n") {
			v.add("auth.mtls_principals", "%q is not a peer principal (e.g. spiffe://example.org/ns/partners/sa/orchestrator)", peer)
		}
	}
	if m := c.Router.Model; m != nil {
		if !httpURL(m.URL) {
			v.add("router.model.url", "%q is not an absolute http(s) URL", m.URL)
		}
		if strings.TrimSpace(m.Model) == "" {
			v.add("router.model.model", "required")
		}
		if m.Timeout < 0 {
			v.add("router.model.timeout", "%s is negative", m.Timeout)
		}
	}
	return v.probs.ErrOrNil()
}

func (v *validator) agent() {
	a := v.c.Agent
	for field, val := range map[string]string{"agent.name": a.Name, "agent.description": a.Description, "agent.version": a.Version, "agent.url": a.URL} {
		if strings.TrimSpace(val) == "" {
			v.add(field, "required")
		}
	}
	if a.Version != "" && !semverRE.MatchString(a.Version) {
		v.add("agent.version", "%q is not a semantic version (want x.y.z, e.g. 1.4.0)", a.Version)
	}
	if a.URL != "" && !httpURL(a.URL) {
		v.add("agent.url", "%q is not an absolute http(s) URL", a.URL)
	}
	if a.DocumentationURL != "" && !httpURL(a.DocumentationURL) {
		v.add("agent.documentation_url", "%q is not an absolute http(s) URL", a.DocumentationURL)
	}
	v.interfaceURLs()
	if p := a.Provider; p != nil {
		if strings.TrimSpace(p.Organization) == "" {
			v.add("agent.provider.organization", "required")
		}
		switch {
		case p.URL == "":
			v.add("agent.provider.url", "required")
		case !httpURL(p.URL):
			v.add("agent.provider.url", "%q is not an absolute http(s) URL", p.URL)
		}
	}
	seen := map[string]int{}
	methods := map[string]string{}
	for i, e := range a.Extensions {
		field := fmt.Sprintf("agent.extensions[%d].uri", i)
		u, err := url.Parse(e.URI)
		switch {
		case e.URI == "":
			v.add(field, "required")
		case err != nil || !u.IsAbs():
			v.add(field, "%q is not an absolute URI", e.URI)
		}
		if j, dup := seen[e.URI]; dup && e.URI != "" {
			v.add(field, "%q is already declared by agent.extensions[%d]", e.URI, j)
		}
		seen[e.URI] = i
		for k, m := range e.Methods {
			mf := fmt.Sprintf("agent.extensions[%d].methods[%d]", i, k)
			switch {
			case m.Name == "":
				v.add(mf+".name", "required")
			case strings.IndexFunc(m.Name, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 || len(m.Name) > 128:
				v.add(mf+".name", "%q is not a method name (up to 128 characters, no spaces or control characters)", m.Name)
			default:
				if prev, dup := methods[m.Name]; dup {
					v.add(mf+".name", "%q is already added by %s", m.Name, prev)
				}
				methods[m.Name] = mf
			}
			if m.Capability == "" {
				v.add(mf+".capability", "required: the capability whose handler serves the method")
			}
		}
	}
}

func (v *validator) paths() {
	c := v.c
	if len(c.Manifests) == 0 {
		v.add("manifests", "required: at least one folder of capability manifests")
	}
	for field, dirs := range map[string][]string{"manifests": c.Manifests, "policy_dirs": c.PolicyDirs} {
		for i, rel := range dirs {
			f := fmt.Sprintf("%s[%d]", field, i)
			if rel == "" {
				v.add(f, "empty path")
				continue
			}
			if _, _, err := c.Open(rel); err != nil {
				v.add(f, "%v", err)
			}
		}
	}
}

func (v *validator) auth() {
	a := v.c.Auth
	seen := map[string]int{}
	for i, is := range a.Issuers {
		pre := fmt.Sprintf("auth.issuers[%d]", i)
		if strings.TrimSpace(is.Issuer) == "" {
			v.add(pre+".issuer", "required")
		} else if j, dup := seen[is.Issuer]; dup {
			v.add(pre+".issuer", "%q is already configured by auth.issuers[%d]", is.Issuer, j)
		} else {
			seen[is.Issuer] = i
		}
		if len(is.Audiences) == 0 {
			v.add(pre+".audiences", "required: at least one audience")
		}
		for j, aud := range is.Audiences {
			if strings.TrimSpace(aud) == "" {
				v.add(fmt.Sprintf("%s.audiences[%d]", pre, j), "empty audience")
			}
		}
		switch {
		case is.JWKSFile == "" && is.JWKSURL == "":
			if !v.c.bad[pre+".jwks_file"] && !v.c.bad[pre+".jwks_url"] { // else misspelt, and reported so
				v.add(pre, "one of jwks_file or jwks_url is required")
			}
		case is.JWKSFile != "" && is.JWKSURL != "":
			v.add(pre, "jwks_file and jwks_url are both set; use exactly one")
		case is.JWKSFile != "":
			v.jwksFile(pre+".jwks_file", is.JWKSFile)
		case !httpURL(is.JWKSURL):
			v.add(pre+".jwks_url", "%q is not an absolute http(s) URL", is.JWKSURL)
		}
		if is.TokenURL != "" && !httpURL(is.TokenURL) {
			v.add(pre+".token_url", "%q is not an absolute http(s) URL", is.TokenURL)
		}
		if is.DiscoveryURL != "" && !httpURL(is.DiscoveryURL) {
			v.add(pre+".discovery_url", "%q is not an absolute http(s) URL", is.DiscoveryURL)
		}
		if len(is.Algorithms) == 0 {
			v.add(pre+".algorithms", "required: one or more of %s", strings.Join(Algorithms, ", "))
		}
		for j, alg := range is.Algorithms {
			f := fmt.Sprintf("%s.algorithms[%d]", pre, j)
			switch {
			case slices.Contains(Algorithms, alg):
			case strings.EqualFold(alg, "none"):
				v.add(f, "%q is refused: unsigned tokens are never accepted", alg)
			case strings.HasPrefix(strings.ToUpper(alg), "HS"):
				v.add(f, "%q is refused: shared-secret (HMAC) algorithms are not supported; use an asymmetric algorithm such as RS256 or ES256", alg)
			default:
				v.add(f, "%q is not one of %s%s", alg, strings.Join(Algorithms, ", "), diag.DidYouMean(alg, Algorithms))
			}
		}
	}
	for field, claim := range map[string]string{"auth.scopes_claim": a.ScopesClaim, "auth.tenant_claim": a.TenantClaim} {
		if strings.TrimSpace(claim) == "" {
			v.add(field, "required")
		}
	}
	if strings.IndexFunc(a.PreviewScope, unicode.IsSpace) >= 0 {
		v.add("auth.preview_scope", "%q contains whitespace: give one scope", a.PreviewScope)
	}
	for i, t := range a.PreviewTenants {
		if strings.TrimSpace(t) == "" {
			v.add(fmt.Sprintf("auth.preview_tenants[%d]", i), "empty tenant id")
		}
	}
}

func (v *validator) handlers() {
	names := make([]string, 0, len(v.c.Handlers))
	for name := range v.c.Handlers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		target := v.c.Handlers[name]
		field := "handlers." + name
		if v.c.present(field + ".url") {
			field += ".url" // the object form
		}
		switch {
		case strings.TrimSpace(name) == "":
			v.add("handlers", "empty handler name")
		case slices.Contains(BuiltinHandlers, target):
		case strings.HasPrefix(target, "builtin:"):
			v.add(field, "%q is not a builtin handler (known: %s)", target, strings.Join(BuiltinHandlers, ", "))
		case !httpURL(target):
			v.add(field, "%q is neither a builtin handler (%s) nor an absolute http(s) URL", target, strings.Join(BuiltinHandlers, ", "))
		}
		v.handlerBinding(name, target)
	}
	for name := range v.c.HandlerBindings {
		if _, ok := v.c.Handlers[name]; !ok {
			v.add("handlers."+name, "a binding without a handler")
		}
	}
}

// handlerBinding checks handlers.<name>.binding against the target: a
// builtin is served in process over JSON-RPC; a gRPC handler is reached at
// http://host:port (h2c) or https://host:port, with no path (gRPC routes by
// the service's own path) and no query.
func (v *validator) handlerBinding(name, target string) {
	b, declared := v.c.HandlerBindings[name]
	if !declared {
		return
	}
	field := "handlers." + name + ".binding"
	switch b {
	case BindingJSONRPC, BindingHTTPJSON, BindingGRPC:
	default:
		v.add(field, "%q is not a binding (want %s, %s or %s)%s", b, BindingJSONRPC, BindingHTTPJSON, BindingGRPC, diag.DidYouMean(b, []string{BindingJSONRPC, BindingHTTPJSON, BindingGRPC}))
		return
	}
	urlField := "handlers." + name + ".url"
	if strings.HasPrefix(target, "builtin:") {
		if b != BindingJSONRPC {
			v.add(field, "builtin handlers are called over %s only", BindingJSONRPC)
		}
		return
	}
	u, err := url.Parse(target)
	if err != nil || !httpURL(target) {
		return // reported above
	}
	switch {
	case b == BindingGRPC && (u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != ""):
		v.add(urlField, "%q: a %s handler is http://host:port (h2c) or https://host:port, with no path or query", target, BindingGRPC)
	case b == BindingHTTPJSON && (u.RawQuery != "" || u.Fragment != ""):
		v.add(urlField, "%q: an %s handler's base URL has no query or fragment", target, BindingHTTPJSON)
	}
}

// maxUnixPath is the longest socket path Linux accepts (sun_path is 108
// bytes with its terminating NUL).
const maxUnixPath = 107

func (v *validator) listen() {
	for _, p := range v.c.Listen.Check() {
		v.add(p.Field, "%s", p.Message)
	}
	if _, err := v.c.AdminToken(); err != nil {
		v.add("listen.admin_token_file", "%v", strings.TrimPrefix(err.Error(), "listen.admin_token_file: "))
	}
}

// Check reports what is wrong with the listen addresses (each a Unix socket
// path or host:port, the admin listener TCP only, no address used twice):
// the config's rule, applied also to the addresses serve's --listen-* flags
// put in place of the config's.
func (l Listen) Check() []diag.Problem {
	var out []diag.Problem
	add := func(field, format string, args ...any) {
		out = append(out, diag.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	addrs := []struct{ field, addr string }{{"listen.a2a", l.A2A}, {"listen.extauthz", l.ExtAuthz}, {"listen.admin", l.Admin}}
	used := map[string]string{}
	for _, a := range addrs {
		if network, path := Network(a.addr); network == "unix" {
			switch {
			case a.field == "listen.admin":
				add(a.field, "%q: the admin listener must be host:port (the kubelet's probes and Prometheus reach it over TCP)", a.addr)
			case !strings.HasPrefix(path, "/") || path != filepath.Clean(path):
				add(a.field, "%q: a Unix socket needs a clean absolute path (e.g. unix:/var/run/capgate/a2a.sock)", a.addr)
			case len(path) > maxUnixPath:
				add(a.field, "%q: the socket path is longer than %d bytes", a.addr, maxUnixPath)
			default:
				if other, dup := used[path]; dup {
					add(a.field, "%q is also %s", a.addr, other)
				}
				used[path] = a.field
			}
			continue
		}
		host, port, err := net.SplitHostPort(a.addr)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n < 0 || n > 65535 {
			add(a.field, "%q is not host:port (e.g. 127.0.0.1:8080)", a.addr)
			continue
		}
		key := net.JoinHostPort(host, port)
		if other, dup := used[key]; dup && n != 0 {
			add(a.field, "%q is also %s", a.addr, other)
		}
		used[key] = a.field
	}
	return out
}

// Warnings lists things that are allowed but probably wrong, each as
// "file:line: field: message".
func (c *Config) Warnings() []string {
	var out []string
	warn := func(field, format string, args ...any) {
		out = append(out, diag.Problem{File: c.File(), Line: c.line(field), Field: field, Message: fmt.Sprintf(format, args...)}.String())
	}
	if c.Cards.DefaultVersion == "0.3" {
		warn("cards.default_version", "\"0.3\" serves the 0.3 card to every request for /.well-known/agent-card.json "+
			"that names no A2A-Version, and A2A 1.0 clients that send none (a2a-go v2's resolver, the A2A TCK) "+
			"cannot read it; 0.3 clients find the 0.3 card at /.well-known/agent.json with the default \"1.0\"")
	}
	if u, err := url.Parse(c.Agent.URL); err == nil && c.Agent.ServesGRPC() && c.Agent.InterfaceURLs.GRPC == "" && strings.Trim(u.Path, "/") != "" {
		warn("agent.url", "%q has a path, but gRPC methods are served at the host's root: the card advertises "+
			"gRPC at %s; if a proxy routes only that path to capgate, set agent.interface_urls.grpc to where "+
			"clients reach gRPC (setting it also silences this warning), or agent.grpc: false", c.Agent.URL, GRPCTarget(c.Agent.URL))
	}
	for i, e := range c.Agent.Extensions {
		u, err := url.Parse(e.URI)
		if err != nil || !u.IsAbs() {
			continue // an error already
		}
		segs := strings.FieldsFunc(u.Path+"/"+u.Opaque, func(r rune) bool { return r == '/' || r == ':' })
		if !slices.ContainsFunc(segs, versionSegRE.MatchString) {
			field := fmt.Sprintf("agent.extensions[%d].uri", i)
			warn(field, "%q has no version segment (e.g. /v1); a breaking change needs a new URI", e.URI)
		}
	}
	return out
}

// jwksFile checks that a jwks_file can be read; what it must hold is the
// runtime's rule (sidecar/settings, with jwks.Check).
func (v *validator) jwksFile(field, rel string) {
	_, err := v.c.ReadFile(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.add(field, "%q does not exist", rel)
	case err != nil:
		v.add(field, "%v", err)
	}
}

// interfaceURLs checks agent.interface_urls: the HTTP bindings' overrides are http(s) URLs, the
// gRPC one a target every A2A gRPC client dials (see GRPCTarget).
func (v *validator) interfaceURLs() {
	o := v.c.Agent.InterfaceURLs
	for field, val := range map[string]string{"agent.interface_urls.jsonrpc": o.JSONRPC, "agent.interface_urls.http_json": o.HTTPJSON} {
		if val != "" && !httpURL(val) {
			v.add(field, "%q is not an absolute http(s) URL", val)
		}
	}
	if o.GRPC != "" {
		if err := checkGRPCTarget(o.GRPC); err != nil {
			v.add("agent.interface_urls.grpc", "%v", err)
		}
	}
}

// checkGRPCTarget accepts dns:///host:port, the gRPC target form a2a-go, @a2a-js/sdk and the
// A2A TCK all dial as advertised (docs/cards.md, "The gRPC interface").
func checkGRPCTarget(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "dns" || u.Host != "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not a gRPC target dns:///host:port (an http(s) URL is no gRPC target for A2A clients)", s)
	}
	host, port, err := net.SplitHostPort(strings.TrimPrefix(u.Path, "/"))
	if err != nil || host == "" || strings.Contains(host, "/") {
		return fmt.Errorf("%q is not a gRPC target dns:///host:port: it names no host:port", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q is not a gRPC target dns:///host:port: %q is not a port", s, port)
	}
	return nil
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func (v *validator) cardSigning() {
	cs := v.c.Cards
	if cs.SigningKeyFile != "" {
		if _, err := v.c.ReadFile(cs.SigningKeyFile); err != nil {
			v.add("cards.signing_key_file", "%v", err)
		}
	}
	if cs.SigningKeyFile == "" && (cs.SigningKID != "" || cs.SigningJKU != "") {
		v.add("cards.signing_key_file", "required when cards.signing_kid or cards.signing_jku is set")
	}
	if cs.SigningJKU != "" && !httpURL(cs.SigningJKU) {
		v.add("cards.signing_jku", "%q is not an absolute http(s) URL", cs.SigningJKU)
	}
}

func (v *validator) tracing() {
	t := v.c.Tracing
	if t.Protocol != TracingGRPC && t.Protocol != TracingHTTP {
		v.add("tracing.protocol", "%q is neither grpc nor http", t.Protocol)
	}
	if r := t.SampleRatio; math.IsNaN(r) || r < 0 || r > 1 {
		v.add("tracing.sample_ratio", "%v is outside [0, 1]", r)
	}
	if t.OTLPEndpoint == "" {
		return
	}
	u, err := url.Parse(t.OTLPEndpoint)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		v.add("tracing.otlp_endpoint", "%q is not an http(s)://host:port URL", t.OTLPEndpoint)
	case u.User != nil:
		v.add("tracing.otlp_endpoint", "%q carries credentials in the URL", u.Redacted())
	case t.Protocol == TracingGRPC && u.Path != "" && u.Path != "/":
		v.add("tracing.otlp_endpoint", "%q has a path: OTLP/gRPC takes host:port only", t.OTLPEndpoint)
	}
}

func (v *validator) identity() {
	id := v.c.Identity
	if id.TTL < 0 || id.TTL > DefaultIdentityTTL {
		v.add("identity.ttl", "%s is outside (0s, 60s]: handler tokens are short-lived", id.TTL)
	}
	if id.SigningKeyFile != "" {
		if _, err := v.c.ReadFile(id.SigningKeyFile); err != nil {
			v.add("identity.signing_key_file", "%v", err)
		}
	}
	x := id.TokenExchange
	if x == nil {
		return
	}
	if !httpURL(x.TokenEndpoint) {
		v.add("identity.token_exchange.token_endpoint", "%q is not an absolute http(s) URL", x.TokenEndpoint)
	}
	if strings.TrimSpace(x.ClientID) == "" {
		v.add("identity.token_exchange.client_id", "required")
	}
	if x.ClientSecretFile == "" {
		v.add("identity.token_exchange.client_secret_file", "required")
	} else if _, err := v.c.ReadFile(x.ClientSecretFile); err != nil {
		v.add("identity.token_exchange.client_secret_file", "%v", err)
	}
	for i, h := range x.Handlers {
		if _, ok := v.c.Handlers[h]; !ok {
			v.add(fmt.Sprintf("identity.token_exchange.handlers[%d]", i), "%q is not a configured handler", h)
		}
	}
	if x.Timeout < 0 {
		v.add("identity.token_exchange.timeout", "%s is negative", x.Timeout)
	}
}

func (v *validator) limits() {
	l := v.c.Limits
	if l.MaxBodyBytes < 1024 || l.MaxBodyBytes > 64<<20 {
		v.add("limits.max_body_bytes", "%d is outside [1024, 67108864]", l.MaxBodyBytes)
	}
	if l.MaxDepth < 8 || l.MaxDepth > 512 {
		v.add("limits.max_depth", "%d is outside [8, 512]", l.MaxDepth)
	}
	if l.HandlerTimeout < 0 {
		v.add("limits.handler_timeout", "%s is negative", l.HandlerTimeout)
	}
	if l.StreamIdleTimeout < 0 {
		v.add("limits.stream_idle_timeout", "%s is negative", l.StreamIdleTimeout)
	}
	for name, d := range map[string]time.Duration{"limits.pending_ttl": l.PendingTTL, "limits.read_timeout": l.ReadTimeout,
		"limits.write_timeout": l.WriteTimeout, "limits.idle_timeout": l.IdleTimeout} {
		if d < 0 {
			v.add(name, "%s is negative", d)
		}
	}
	if l.PendingPerCaller < 0 || l.PendingPerCaller > 100000 {
		v.add("limits.pending_per_caller", "%d is outside [0, 100000]", l.PendingPerCaller)
	}
	if w := l.MessageIDWindow; w < MinMessageIDWindow || w > MaxMessageIDWindow {
		v.add("limits.message_id_window", "%s is outside [%s, %s]", w, MinMessageIDWindow, MaxMessageIDWindow)
	}
	if n := l.MessageIDsPerCaller; n < 1 || n > MaxMessageIDsPerCaller {
		v.add("limits.message_ids_per_caller", "%d is outside [1, %d]", n, MaxMessageIDsPerCaller)
	}
	if k := l.StreamKeepAlive; k != 0 && k < MinStreamKeepAlive {
		v.add("limits.stream_keepalive", "%s is below %s (0 turns keep-alives off)", k, MinStreamKeepAlive)
	} else if k > 0 && l.StreamIdleTimeout > 0 && k >= l.StreamIdleTimeout {
		v.add("limits.stream_keepalive", "%s is not shorter than limits.stream_idle_timeout (%s): proxies would see the stream idle first", k, l.StreamIdleTimeout)
	}
	if m := l.Memory.Size; m < 0 {
		v.add("limits.memory", "%d is negative (0 leaves the runtime's setting)", int64(m))
	} else if m != 0 && m < MinMemoryLimit {
		v.add("limits.memory", "%s is below the minimum %s (0 leaves the runtime's setting)", m, MinMemoryLimit)
	}
}

func (v *validator) trustedProxy() {
	t := v.c.Auth.TrustedProxy
	if t == nil {
		return
	}
	if len(t.Addresses) == 0 {
		v.add("auth.trusted_proxy.addresses", "required: the addresses the proxy connects from (e.g. 127.0.0.1)")
	}
	for i, a := range t.Addresses {
		if _, _, err := net.ParseCIDR(a); err != nil && net.ParseIP(a) == nil && a != TrustedProxyUnix {
			v.add(fmt.Sprintf("auth.trusted_proxy.addresses[%d]", i), "%q is neither an IP address, a CIDR nor %q", a, TrustedProxyUnix)
		}
	}
	if t.SecretFile == "" {
		v.add("auth.trusted_proxy.secret_file", "required: a file holding the secret the proxy sends (at least 32 bytes)")
	} else if b, err := v.c.ReadFile(t.SecretFile); err != nil {
		v.add("auth.trusted_proxy.secret_file", "cannot be read: %v", err)
	} else if len(strings.TrimSpace(string(b))) < 32 {
		v.add("auth.trusted_proxy.secret_file", "the secret must be at least 32 bytes")
	}
}

// Line is the line of field in the config file (or of its nearest enclosing field), 0 when
// unknown: for checks of the config against what it names (the registry's capabilities).
func (c *Config) Line(field string) int { return c.line(field) }
