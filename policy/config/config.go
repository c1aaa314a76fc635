// Package config holds the deployment configuration (capgate.yaml): the
// agent card base, where manifests and policy modules live, authentication,
// handlers, listeners, router, store, cards, identity, audit, limits, push,
// decision logs and tracing; it is decoded and validated once, reporting
// every problem with its line.
//
// The rule of the layers: this package holds the file's shape and the rules
// of the policy's own settings; nothing under policy/ imports sidecar/ (a
// test in test/imports holds it). Settings whose rules the runtime owns (the
// store, push.allowed_urls, an issuer's JWKS file) are decoded here and
// checked by the runtime's Checks (sidecar/settings), which Load runs and
// reports with their lines like its own problems.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/diag/yamlnode"
	"github.com/capgate/capgate/policy/quota"
)

// Defaults.
const (
	DefaultListenA2A       = "127.0.0.1:8080"
	DefaultListenExtAuthz  = "127.0.0.1:9191"
	DefaultListenAdmin     = "127.0.0.1:9090"
	DefaultScopesClaim     = "scope"
	DefaultTenantClaim     = "tenant"
	DefaultRouterThreshold = 0.7
	DefaultStore           = "memory"
	DefaultCardMaxAge      = 300 * time.Second
	DefaultClockSkew       = 30 * time.Second
	// DefaultMaxTokenLifetime bounds exp - iat of a caller's token (auth.max_token_lifetime).
	DefaultMaxTokenLifetime = 24 * time.Hour
	// JSONRPCStatusOK and JSONRPCStatusAuth are the values of
	// auth.jsonrpc_http_status.
	JSONRPCStatusOK          = 200
	JSONRPCStatusAuth        = 401
	DefaultExtendedCard      = "auto"
	DefaultCardVersion       = "1.0"
	DefaultMaxBodyBytes      = 1 << 20
	DefaultMaxDepth          = 64
	DefaultIdentityTTL       = 60 * time.Second
	DefaultHandlerTimeout    = 30 * time.Second
	DefaultStreamIdleTimeout = 5 * time.Minute
	DefaultStreamKeepAlive   = 15 * time.Second
	// MinStreamKeepAlive is the shortest limits.stream_keepalive accepted
	// (0 turns keep-alives off).
	MinStreamKeepAlive      = time.Second
	DefaultExchangeTimeout  = 5 * time.Second
	DefaultModelTimeout     = 2 * time.Second
	DefaultPendingTTL       = 10 * time.Minute
	DefaultPendingPerCaller = 100
	// DefaultMessageIDWindow is how long a caller's messageId is remembered
	// (limits.message_id_window); MaxMessageIDWindow bounds it (the Redis
	// store's default binding TTL: a retry must still find its task).
	DefaultMessageIDWindow = 24 * time.Hour
	MinMessageIDWindow     = time.Minute
	MaxMessageIDWindow     = 30 * 24 * time.Hour
	// DefaultMessageIDsPerCaller bounds the messageIds remembered per owner
	// (limits.message_ids_per_caller); MaxMessageIDsPerCaller bounds that.
	DefaultMessageIDsPerCaller = 10000
	MaxMessageIDsPerCaller     = 1000000
	DefaultReadTimeout         = 30 * time.Second
	DefaultIdleTimeout         = 120 * time.Second
	DefaultProxySecretHeader   = "x-capgate-proxy-secret"
	DefaultProxyPeerHeader     = "x-forwarded-client-cert"
	// TrustedProxyUnix in auth.trusted_proxy.addresses trusts connections
	// over the gateway's Unix socket (listen.a2a: unix:...).
	TrustedProxyUnix = "unix"
	// MinMemoryLimit is the smallest limits.memory accepted: below it the
	// runtime would collect without pause.
	MinMemoryLimit ByteSize = 16 << 20
)

// Config is a validated deployment configuration.
type Config struct {
	Agent      Agent             `yaml:"agent"`
	Manifests  []string          `yaml:"manifests"`   // relative to the config file
	PolicyDirs []string          `yaml:"policy_dirs"` // relative to the config file
	Auth       Auth              `yaml:"auth"`
	Handlers   map[string]string `yaml:"handlers"` // handler name -> "builtin:echo" or http(s) URL (url of the object form)
	Listen     Listen            `yaml:"listen"`
	Router     Router            `yaml:"router"`
	Store      string            `yaml:"store"` // "memory" or a backend's URL (sidecar/tasks/backends)
	// StorePasswordFile holds the password of the Redis servers of store
	// (relative to the config file); it takes precedence over one in the URL.
	StorePasswordFile string `yaml:"store_password_file"`
	// StorePasswordEnv names the environment variable holding that
	// password instead (set one of the two).
	StorePasswordEnv string `yaml:"store_password_env"`
	// StoreSentinelPasswordFile and StoreSentinelPasswordEnv give the
	// password of the Sentinels of a redis-sentinel:// store (their
	// requirepass), never sent to the Redis servers.
	StoreSentinelPasswordFile string   `yaml:"store_sentinel_password_file"`
	StoreSentinelPasswordEnv  string   `yaml:"store_sentinel_password_env"`
	Cards                     Cards    `yaml:"cards"`
	Identity                  Identity `yaml:"identity"`
	Audit                     Audit    `yaml:"audit"`
	Limits                    Limits   `yaml:"limits"`
	Push                      Push     `yaml:"push"`
	// Services and DecisionLogs are OPA's `services` and `decision_logs`
	// configuration (OPA's schema, passed to OPA's decision-log plugin
	// unchanged). Without decision_logs, decisions go to the console.
	Services     map[string]any `yaml:"services"`
	DecisionLogs map[string]any `yaml:"decision_logs"`
	// Tracing exports OpenTelemetry traces over OTLP; off by default.
	Tracing Tracing `yaml:"tracing"`
	// Quotas are the cost classes and plans capgate counts calls against
	// (package quota; docs/quotas.md).
	Quotas quota.Config `yaml:"quotas"`

	// Dir is the directory of the config file; relative paths resolve against it.
	// For a config read from an fs.FS it is a path inside that FS.
	Dir string `yaml:"-"`

	// HandlerBindings is the binding of each handler declared in the object
	// form of handlers ({url, binding}): JSONRPC, HTTP+JSON or GRPC. A
	// handler not in it is called over JSON-RPC (see HandlerBinding).
	HandlerBindings map[string]string `yaml:"-"`
	// HandlerExposeErrors names the handlers declared with expose_errors:
	// true in the object form: their error messages reach callers as they
	// wrote them. Every other handler's errors reach callers as the A2A code
	// with capgate's own message.
	HandlerExposeErrors map[string]bool `yaml:"-"`

	fsys    fs.FS          // nil: the config was read from disk
	file    string         // display path of the config file
	dispDir string         // display path of Dir
	lines   map[string]int // field path -> line
	bad     map[string]bool
}

// Agent is the base of every card.
type Agent struct {
	Name             string      `yaml:"name"`
	Description      string      `yaml:"description"`
	Version          string      `yaml:"version"`
	URL              string      `yaml:"url"`
	Provider         *Provider   `yaml:"provider"`
	Extensions       []Extension `yaml:"extensions"`
	DocumentationURL string      `yaml:"documentation_url"`
	Streaming        *bool       `yaml:"streaming"` // default true
	// GRPC serves the A2A 1.0 gRPC binding (lf.a2a.v1.A2AService) on the A2A listener and
	// advertises it in the card; default true. False refuses gRPC requests as unimplemented.
	GRPC *bool `yaml:"grpc"`
	// InterfaceURLs override the URL the card advertises for one binding, for deployments
	// whose clients reach a binding elsewhere than agent.url (a proxy, a separate gRPC host).
	InterfaceURLs InterfaceURLs `yaml:"interface_urls"`
}

// InterfaceURLs are the per-binding overrides of agent.interface_urls; an empty one is derived
// from agent.url (see Agent.InterfaceURL).
type InterfaceURLs struct {
	JSONRPC  string `yaml:"jsonrpc"`
	HTTPJSON string `yaml:"http_json"`
	// GRPC is a gRPC target URI, dns:///host:port (see GRPCTarget).
	GRPC string `yaml:"grpc"`
}

// Forms of cards.security_requirements. The A2A proto writes a requirement's scopes as a
// StringList ({"list": [...]}), a2a-go v2.3.1 as a bare array (a2aproject/a2a-go#430); no form
// is read by every client, so the default states no requirement.
const (
	SecurityRequirementsOmit  = "omit"
	SecurityRequirementsProto = "proto"
	SecurityRequirementsA2AGo = "a2a-go"
)

// SecurityRequirementForms are the values of cards.security_requirements.
var SecurityRequirementForms = []string{SecurityRequirementsOmit, SecurityRequirementsProto, SecurityRequirementsA2AGo}

// ServesGRPC reports whether the gateway serves the gRPC binding (agent.grpc, default true).
func (a Agent) ServesGRPC() bool { return a.GRPC == nil || *a.GRPC }

// InterfaceURL is the URL the card advertises for binding (BindingJSONRPC, BindingHTTPJSON or
// BindingGRPC): agent.interface_urls' entry when set; otherwise agent.url for the two HTTP
// bindings and GRPCTarget(agent.url) for gRPC. An unknown binding is "".
func (a Agent) InterfaceURL(binding string) string {
	switch binding {
	case BindingJSONRPC:
		return cmp.Or(a.InterfaceURLs.JSONRPC, a.URL)
	case BindingHTTPJSON:
		return cmp.Or(a.InterfaceURLs.HTTPJSON, a.URL)
	case BindingGRPC:
		if a.InterfaceURLs.GRPC != "" {
			return a.InterfaceURLs.GRPC
		}
		return GRPCTarget(a.URL)
	}
	return ""
}

// GRPCTarget is the gRPC target URI for an http(s) URL: "dns:///host:port", the port the
// URL's or its scheme's default (80, 443). It is an absolute URI (scheme dns, empty
// authority, path /host:port) in gRPC's name syntax, which a2a-go (grpc.NewClient),
// @a2a-js/sdk (grpc-js) and the A2A TCK (grpcio) dial as given; an http(s) URL is no gRPC
// target for any of them. The URL's path is dropped: gRPC methods are served at the host's
// root. A URL that does not parse as http(s) is returned as it is.
func GRPCTarget(httpURL string) string {
	u, err := url.Parse(httpURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return httpURL
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return "dns:///" + net.JoinHostPort(u.Hostname(), port)
}

// Provider is the card's provider block.
type Provider struct {
	Organization string `yaml:"organization"`
	URL          string `yaml:"url"`
}

// Extension is an A2A extension the agent declares.
type Extension struct {
	URI         string         `yaml:"uri"`
	Description string         `yaml:"description"`
	Required    bool           `yaml:"required"`
	Params      map[string]any `yaml:"params"`
	// Methods are JSON-RPC methods the extension adds, each served by a
	// capability's handler; admitted only to callers that activated the
	// extension and are entitled to that capability.
	Methods []ExtensionMethod `yaml:"methods"`
}

// ExtensionMethod is one method an extension adds.
type ExtensionMethod struct {
	Name       string `yaml:"name"`       // the JSON-RPC method, e.g. finance/explainVariance
	Capability string `yaml:"capability"` // the capability whose handler serves it
}

// Auth configures caller authentication and the policy settings derived from it.
type Auth struct {
	Issuers         []Issuer      `yaml:"issuers"`
	ScopesClaim     string        `yaml:"scopes_claim"`
	TenantClaim     string        `yaml:"tenant_claim"`
	PreviewScope    string        `yaml:"preview_scope"`
	PreviewTenants  []string      `yaml:"preview_tenants"`
	AnonymousPublic bool          `yaml:"anonymous_public"`
	ClockSkew       time.Duration `yaml:"clock_skew"`
	// MaxTokenLifetime bounds how long a caller's token may be valid: exp - iat (or, without
	// iat, exp - nbf, else exp - now). Default DefaultMaxTokenLifetime.
	MaxTokenLifetime time.Duration `yaml:"max_token_lifetime"`
	// JSONRPCHTTPStatus is the HTTP status of a JSON-RPC answer that
	// refuses a caller for authentication or authorization:
	// JSONRPCStatusOK (200, the default: A2A's JSON-RPC binding and a2a-go)
	// or JSONRPCStatusAuth (401 for -31401, 403 for -31403, with
	// WWW-Authenticate). The JSON-RPC error body is the same either way.
	JSONRPCHTTPStatus int `yaml:"jsonrpc_http_status"`
	// MTLSPrincipals maps the peer principal Envoy reports for an mTLS
	// client (attributes.source.principal, e.g. a SPIFFE id) to the
	// principal capgate decides for; a bearer token, when present, wins.
	MTLSPrincipals map[string]MTLSPrincipal `yaml:"mtls_principals"`
	// KnownScopes are scopes the deployment's issuers grant, beside each
	// issuer's own scopes list: a manifest scope that only one manifest
	// names and no list holds is warned about (a likely typo).
	KnownScopes []string `yaml:"known_scopes"`
	// TrustedProxy says how the gateway, behind Envoy, learns the mTLS
	// peer Envoy verified; absent, no proxy is trusted and the gateway
	// authenticates bearer tokens only.
	TrustedProxy *TrustedProxy `yaml:"trusted_proxy"`
}

// TrustedProxy is the proxy (Envoy) the gateway takes the mTLS peer from:
// a request from one of Addresses carrying the shared secret in Header has
// its peer read from PeerHeader (Envoy's x-forwarded-client-cert, URI=).
type TrustedProxy struct {
	Addresses  []string `yaml:"addresses"`   // IPs or CIDRs of the proxy, or "unix"
	SecretFile string   `yaml:"secret_file"` // relative to the config file
	Header     string   `yaml:"header"`      // default x-capgate-proxy-secret
	PeerHeader string   `yaml:"peer_header"` // default x-forwarded-client-cert
}

// Push configures push notifications (webhooks an agent calls back).
type Push struct {
	// Enabled advertises capabilities.pushNotifications and admits the
	// push config methods; off (the default), they are refused at both doors.
	Enabled bool `yaml:"enabled"`
	// AllowedURLs are URL prefixes a webhook must start with (default: none).
	AllowedURLs []string `yaml:"allowed_urls"`
}

// MTLSPrincipal is who an mTLS peer is.
type MTLSPrincipal struct {
	Subject string   `yaml:"subject"` // default: the peer principal itself
	Tenant  string   `yaml:"tenant"`
	Scopes  []string `yaml:"scopes"`
}

// Issuer is one trusted token issuer.
type Issuer struct {
	Issuer     string   `yaml:"issuer"`
	Audiences  []string `yaml:"audiences"`
	JWKSFile   string   `yaml:"jwks_file"` // relative to the config file
	JWKSURL    string   `yaml:"jwks_url"`
	Algorithms []string `yaml:"algorithms"`
	// Tenants this issuer may assert (empty: any); a token naming another
	// tenant is refused.
	Tenants []string `yaml:"tenants"`
	// Scopes this issuer may grant (empty: any); other scopes in its tokens
	// are dropped.
	Scopes []string `yaml:"scopes"`
	// TokenURL is the issuer's OAuth 2.0 token endpoint: the card then advertises an oauth2
	// scheme with the client credentials flow and the scopes its skills need.
	TokenURL string `yaml:"token_url"`
	// DiscoveryURL is the issuer's OpenID Connect discovery document
	// (.../.well-known/openid-configuration): the card then advertises an openIdConnect scheme.
	DiscoveryURL string `yaml:"discovery_url"`
}

// GrantedScopes are the scopes the config says some credential can carry:
// auth.known_scopes, every issuer's scopes, the mTLS principals' scopes and
// the preview scope.
func (a Auth) GrantedScopes() map[string]bool {
	out := map[string]bool{}
	for _, s := range a.KnownScopes {
		out[s] = true
	}
	for _, is := range a.Issuers {
		for _, s := range is.Scopes {
			out[s] = true
		}
	}
	for _, p := range a.MTLSPrincipals {
		for _, s := range p.Scopes {
			out[s] = true
		}
	}
	if a.PreviewScope != "" {
		out[a.PreviewScope] = true
	}
	return out
}

// Listen holds listener addresses: host:port, or for a2a and extauthz
// also a Unix domain socket, "unix:/absolute/path" (see Network).
type Listen struct {
	A2A      string `yaml:"a2a"`
	ExtAuthz string `yaml:"extauthz"`
	Admin    string `yaml:"admin"`
	// AdminTokenFile holds the secret (at least 32 bytes) a caller of the admin listener's
	// /v1/usage must send as "Authorization: Bearer <secret>". Unset, /v1/usage answers
	// loopback peers only. Relative to the config file.
	AdminTokenFile string `yaml:"admin_token_file"`
}

// MinAdminTokenBytes is the shortest listen.admin_token_file secret.
const MinAdminTokenBytes = 32

// AdminToken reads listen.admin_token_file: nil when it is not set.
func (c *Config) AdminToken() ([]byte, error) {
	if c.Listen.AdminTokenFile == "" {
		return nil, nil
	}
	b, err := c.ReadFile(c.Listen.AdminTokenFile)
	if err != nil {
		return nil, fmt.Errorf("listen.admin_token_file: %w", err)
	}
	tok := bytes.TrimSpace(b)
	if len(tok) < MinAdminTokenBytes {
		return nil, fmt.Errorf("listen.admin_token_file: the secret must be at least %d bytes", MinAdminTokenBytes)
	}
	return tok, nil
}

// Override returns l with each address o gives in place of l's (an empty
// one keeps l's): serve's --listen-* flags over the config.
func (l Listen) Override(o Listen) Listen {
	pick := func(over, base string) string {
		if over != "" {
			return over
		}
		return base
	}
	return Listen{A2A: pick(o.A2A, l.A2A), ExtAuthz: pick(o.ExtAuthz, l.ExtAuthz), Admin: pick(o.Admin, l.Admin)}
}

// UnixPrefix starts a listen address that is a Unix domain socket path.
const UnixPrefix = "unix:"

// Network splits a listen address into what net.Listen takes: "unix" and
// the socket path for "unix:/path" (or "unix:///path"), else "tcp" and the
// host:port as given.
func Network(addr string) (network, address string) {
	if rest, ok := strings.CutPrefix(addr, UnixPrefix); ok {
		if strings.HasPrefix(rest, "///") {
			rest = rest[2:]
		}
		return "unix", rest
	}
	return "tcp", addr
}

// Router holds routing settings.
type Router struct {
	Threshold float64 `yaml:"threshold"`
	// Model is the optional model-based router, asked only when the
	// classifier is unsure.
	Model *ModelRouter `yaml:"model"`
}

// ModelRouter is an OpenAI-compatible chat-completions endpoint.
type ModelRouter struct {
	URL       string        `yaml:"url"`         // e.g. https://llm.internal/v1/chat/completions
	Model     string        `yaml:"model"`       // model name sent in the request
	APIKeyEnv string        `yaml:"api_key_env"` // environment variable holding the bearer key
	Timeout   time.Duration `yaml:"timeout"`     // default 2s; a timeout means clarification
}

// Identity configures the credential each handler call carries: a token
// capgate issues for this caller and this capability, or one obtained by
// RFC 8693 token exchange.
type Identity struct {
	// Issuer is the iss of capgate's tokens (default: agent.url).
	Issuer string `yaml:"issuer"`
	// AgentID is the actor (act.sub) in capgate's tokens (default: agent.url).
	AgentID string `yaml:"agent_id"`
	// SigningKeyFile is a PEM P-256 private key; empty: generated at start
	// (tokens then do not survive a restart; a warning is logged).
	SigningKeyFile string `yaml:"signing_key_file"`
	// TTL of issued tokens (default and maximum 60s).
	TTL time.Duration `yaml:"ttl"`
	// ForwardCallerToken also passes the caller's own bearer token to
	// handlers, in X-Capgate-Caller-Authorization. Off by default.
	ForwardCallerToken bool `yaml:"forward_caller_token"`
	// TokenExchange, when set, replaces self-issued tokens.
	TokenExchange *TokenExchange `yaml:"token_exchange"`
}

// TokenExchange configures RFC 8693 token exchange at an OAuth 2.0 server.
type TokenExchange struct {
	TokenEndpoint    string        `yaml:"token_endpoint"`
	ClientID         string        `yaml:"client_id"`
	ClientSecretFile string        `yaml:"client_secret_file"` // relative to the config file
	Handlers         []string      `yaml:"handlers"`           // empty: every handler
	Timeout          time.Duration `yaml:"timeout"`            // default 5s
}

// Audit configures the audit stream of handler invocations.
type Audit struct {
	// File receives JSON lines; empty: standard output, beside the other logs.
	File string `yaml:"file"`
}

// Limits bound what requests may carry.
type Limits struct {
	MaxBodyBytes int64 `yaml:"max_body_bytes"` // default 1 MiB
	MaxDepth     int   `yaml:"max_depth"`      // JSON nesting, default 64
	// HandlerTimeout bounds one unary handler call (default 30s).
	HandlerTimeout time.Duration `yaml:"handler_timeout"`
	// StreamIdleTimeout bounds the silence between two events of a
	// streamed handler answer (default 5m).
	StreamIdleTimeout time.Duration `yaml:"stream_idle_timeout"`
	// StreamKeepAlive is how often a Server-Sent Events stream to the
	// client carries a keep-alive comment (": keep-alive") while no event
	// is sent, so that proxies on the way (Envoy's idle timeouts, load
	// balancers) do not close a quiet but live stream (default 15s; 0
	// sends none).
	StreamKeepAlive time.Duration `yaml:"stream_keepalive"`
	// Memory is the Go runtime's soft memory limit (debug.SetMemoryLimit):
	// the heap is collected harder as it nears the limit. "auto" (the
	// default) is 90% of the container's cgroup memory limit when one is
	// set; a size is that limit; 0 leaves the runtime's own setting (the
	// GOMEMLIMIT environment variable, or none). See docs/operations.md.
	Memory MemoryLimit `yaml:"memory"`
	// PendingTTL bounds how long a clarification task capgate holds waits
	// for the caller's reply (default 10m).
	PendingTTL time.Duration `yaml:"pending_ttl"`
	// PendingPerCaller caps the clarification tasks one owner may hold
	// (default 100).
	PendingPerCaller int `yaml:"pending_per_caller"`
	// MessageIDWindow is how long the messageId of a message a caller sent
	// is remembered: a SendMessage or SendStreamingMessage repeating it
	// within the window, from the same owner, does not call the handler
	// again (default 24h, in [1m, 720h]).
	MessageIDWindow time.Duration `yaml:"message_id_window"`
	// MessageIDsPerCaller bounds the messageIds remembered per owner; the
	// oldest are forgotten first (default 10000, in [1, 1000000]).
	MessageIDsPerCaller int `yaml:"message_ids_per_caller"`
	// ReadTimeout bounds reading one request, headers and body (default 30s).
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing one response (default 0: none, so that
	// streams can last; stream_idle_timeout bounds their silences).
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes keep-alive connections idle this long (default 120s).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

// MemoryLimit is limits.memory: "auto", a size, or 0 (capgate sets none).
type MemoryLimit struct {
	// Auto: 90% of the cgroup's memory limit, when one is set and no
	// other limit (GOMEMLIMIT) is in force.
	Auto bool
	// Size is a fixed limit (when not Auto); 0: none.
	Size ByteSize
}

// MemoryAuto is the value of limits.memory that sizes the limit from the
// cgroup, and the default.
const MemoryAuto = "auto"

// AutoMemoryPercent is the part of the cgroup's memory limit that "auto"
// gives the Go heap: the rest is for mapped code, stacks and the margin
// below the hard limit.
const AutoMemoryPercent = 90

// String is "auto", or the size.
func (m MemoryLimit) String() string {
	if m.Auto {
		return MemoryAuto
	}
	return m.Size.String()
}

// UnmarshalYAML reads "auto" or a size, for code that decodes a Config
// with yaml.v3 directly.
func (m *MemoryLimit) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseMemoryLimit(n)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// errMemoryLimit is the problem with a value that is neither "auto" nor a size.
var errMemoryLimit = errors.New(`want "auto", a size such as "64MiB" or a number of bytes`)

func parseMemoryLimit(n *yaml.Node) (MemoryLimit, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == yamlnode.TagStr && n.Value == MemoryAuto {
		return MemoryLimit{Auto: true}, nil
	}
	b, err := parseByteSize(n)
	switch {
	case err == nil:
		return MemoryLimit{Size: b}, nil
	case n.Kind == yaml.ScalarNode && n.ShortTag() == yamlnode.TagStr:
		return MemoryLimit{}, fmt.Errorf("%q: %w", n.Value, errMemoryLimit)
	default:
		return MemoryLimit{}, errMemoryLimit
	}
}

// ByteSize is a number of bytes; in YAML an integer or a string with a
// unit ("64MiB", "48 MB").
type ByteSize int64

// UnmarshalYAML reads an integer number of bytes or a size with a unit,
// for code that decodes a Config with yaml.v3 directly (Load reports
// problems with their line instead).
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseByteSize(n)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// errByteSize is the problem with a value that is not a size.
var errByteSize = errors.New(`want a size such as "64MiB" or a number of bytes`)

// parseByteSize reads a scalar: an integer (bytes) or a string with a unit.
func parseByteSize(n *yaml.Node) (ByteSize, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, errByteSize
	}
	switch n.ShortTag() {
	case yamlnode.TagInt:
		var i int64
		if err := n.Decode(&i); err != nil {
			return 0, fmt.Errorf("%q: %w", n.Value, errByteSize)
		}
		return ByteSize(i), nil
	case yamlnode.TagStr:
		b, err := humanize.ParseBytes(n.Value)
		if err != nil || b > math.MaxInt64 {
			return 0, fmt.Errorf("%q: %w", n.Value, errByteSize)
		}
		return ByteSize(b), nil
	default:
		return 0, errByteSize
	}
}

// String formats the size with binary units, e.g. "64 MiB".
func (b ByteSize) String() string { return humanize.IBytes(uint64(max(b, 0))) }

// Tracing protocols.
const (
	TracingGRPC = "grpc"
	TracingHTTP = "http"
)

// DefaultTracingServiceName is the service.name of capgate's spans.
const DefaultTracingServiceName = "capgate"

// Tracing configures OpenTelemetry tracing. It is on when OTLPEndpoint is
// set.
type Tracing struct {
	// OTLPEndpoint is the collector's URL: http://host:port (plaintext)
	// or https://host:port; for the http protocol a path may follow
	// (default /v1/traces).
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// Protocol is grpc (default, OTLP/gRPC) or http (OTLP/HTTP protobuf).
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of new traces sampled, in [0, 1] (default
	// 1); a request that arrives with a trace follows its sampled flag
	// (parent-based sampling).
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceName is the spans' service.name (default "capgate").
	ServiceName string `yaml:"service_name"`
}

// Enabled reports whether traces are exported.
func (t Tracing) Enabled() bool { return t.OTLPEndpoint != "" }

// Cards holds card serving settings.
type Cards struct {
	MaxAge time.Duration `yaml:"max_age"`
	// ExtendedCard: "auto" (default: advertised when any non-removed
	// capability is extended or preview), "on" or "off".
	ExtendedCard string `yaml:"extended_card"`
	// DefaultVersion is the card shape served at /.well-known/agent-card.json to a request
	// that names no A2A-Version: "1.0" (default) or "0.3", for fleets of 0.3 clients that
	// fetch that path without the header.
	DefaultVersion string `yaml:"default_version"`
	// SecurityRequirements is how the card states which schemes a caller must use
	// (securityRequirements, per card and per skill): SecurityRequirementsOmit (the default),
	// SecurityRequirementsProto or SecurityRequirementsA2AGo; see docs/cards.md for which
	// clients read which.
	SecurityRequirements string `yaml:"security_requirements"`
	// SigningKeyFile is a PEM private key (P-256 → ES256, RSA ≥ 2048 bits →
	// RS256), read relative to the config file. When set, the public and
	// extended cards carry a JWS in signatures (see docs/cards.md).
	SigningKeyFile string `yaml:"signing_key_file"`
	// SigningKID is the signature's kid (default: the key's RFC 7638
	// thumbprint); the key is published under it in the admin JWKS.
	SigningKID string `yaml:"signing_kid"`
	// SigningJKU, when set, is put in the signature's protected header as
	// jku: where verifiers can find the key set.
	SigningJKU string `yaml:"signing_jku"`
}
