package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/config/configtest"
	"github.com/capgate/capgate/policy/diag"
)

// base is a valid config; cases change one thing in it (configtest.Base).
const base, lookup = configtest.Base, configtest.Lookup

var demoJWKS = configtest.DemoJWKS()

func fsWith(cfg string) fstest.MapFS { return configtest.FS(cfg) }

func TestLoadFSValid(t *testing.T) {
	c, err := config.LoadFS(fsWith(base), "capgate.yaml")
	require.NoError(t, err)
	require.Empty(t, c.Warnings())

	// Defaults fill what the file leaves out.
	require.Equal(t, config.DefaultScopesClaim, c.Auth.ScopesClaim)
	require.Equal(t, config.DefaultTenantClaim, c.Auth.TenantClaim)
	require.Equal(t, config.DefaultClockSkew, c.Auth.ClockSkew)
	require.Equal(t, config.DefaultCardMaxAge, c.Cards.MaxAge)
	require.Equal(t, config.DefaultExtendedCard, c.Cards.ExtendedCard)
	require.NotNil(t, c.Agent.Streaming)
	require.True(t, *c.Agent.Streaming)
	require.True(t, c.HasHandler("invoices.lookup"))
	require.False(t, c.HasHandler("invoices.find"))

	reg, err := c.LoadRegistry()
	require.NoError(t, err)
	require.Equal(t, 1, reg.Len())
	got, ok := reg.Get("lookup-invoice")
	require.True(t, ok)
	require.Equal(t, "capabilities/lookup-invoice.yaml", got.Source.File)
}

func TestDefaults(t *testing.T) {
	min := `agent: {name: A, description: B, version: 0.1.0, url: https://a.example.com}
manifests: [capabilities]
`
	c, err := config.LoadFS(fsWith(min), "capgate.yaml")
	require.NoError(t, err)
	require.Equal(t, config.Listen{A2A: config.DefaultListenA2A, ExtAuthz: config.DefaultListenExtAuthz, Admin: config.DefaultListenAdmin}, c.Listen)
	require.Equal(t, config.DefaultRouterThreshold, c.Router.Threshold)
	require.Equal(t, config.DefaultStore, c.Store)

	// An explicit zero is kept, not replaced by the default.
	c, err = config.LoadFS(fsWith(min+"router: {threshold: 0}\ncards: {max_age: 0s, extended_card: off}\n"), "capgate.yaml")
	require.NoError(t, err)
	require.Zero(t, c.Router.Threshold)
	require.Zero(t, c.Cards.MaxAge)
	require.Equal(t, "off", c.Cards.ExtendedCard)

	c, err = config.LoadFS(fsWith(min+"auth: {clock_skew: 2m}\n"), "capgate.yaml")
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, c.Auth.ClockSkew)
	require.Equal(t, config.JSONRPCStatusOK, c.Auth.JSONRPCHTTPStatus, "default")

	c, err = config.LoadFS(fsWith(min+"auth: {jsonrpc_http_status: 401}\n"), "capgate.yaml")
	require.NoError(t, err)
	require.Equal(t, config.JSONRPCStatusAuth, c.Auth.JSONRPCHTTPStatus)
}

func TestStreamKeepAlive(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"":                                  config.DefaultStreamKeepAlive,
		"limits: {stream_keepalive: 30s}\n": 30 * time.Second,
		"limits: {stream_keepalive: 0s}\n":  0, // an explicit 0 turns keep-alives off
	} {
		c, err := config.LoadFS(fsWith(base+in), "capgate.yaml")
		require.NoError(t, err, in)
		require.Equal(t, want, c.Limits.StreamKeepAlive, in)
	}
	require.Less(t, config.DefaultStreamKeepAlive, config.DefaultStreamIdleTimeout)
}

func TestListenUnixSockets(t *testing.T) {
	c, err := config.LoadFS(fsWith(strings.Replace(base,
		"listen: {a2a: 127.0.0.1:8080, extauthz: 127.0.0.1:9191, admin: 127.0.0.1:9090}",
		"listen: {a2a: 'unix:/run/capgate/a2a.sock', extauthz: 'unix:///run/capgate/extauthz.sock', admin: 127.0.0.1:9090}", 1)), "capgate.yaml")
	require.NoError(t, err)
	for _, tt := range []struct{ addr, network, address string }{
		{c.Listen.A2A, "unix", "/run/capgate/a2a.sock"},
		{c.Listen.ExtAuthz, "unix", "/run/capgate/extauthz.sock"},
		{c.Listen.Admin, "tcp", "127.0.0.1:9090"},
	} {
		n, a := config.Network(tt.addr)
		require.Equal(t, tt.network, n, tt.addr)
		require.Equal(t, tt.address, a, tt.addr)
	}
}

func TestLoadFSMemoryLimit(t *testing.T) {
	for in, want := range map[string]config.MemoryLimit{
		"":                              {Auto: true}, // unset: auto, the default
		"limits: {memory: auto}\n":      {Auto: true},
		"limits: {max_depth: 32}\n":     {Auto: true},
		"limits: {memory: 48MiB}\n":     {Size: 48 << 20},
		"limits: {memory: \"64 MB\"}\n": {Size: 64_000_000},
		"limits: {memory: 1GiB}\n":      {Size: 1 << 30},
		"limits: {memory: 33554432}\n":  {Size: 32 << 20},
		"limits: {memory: 0}\n":         {}, // the runtime's setting
	} {
		c, err := config.LoadFS(fsWith(base+in), "capgate.yaml")
		require.NoError(t, err, in)
		require.Equal(t, want, c.Limits.Memory, in)
	}
	require.Equal(t, "48 MiB", config.ByteSize(48<<20).String())
	require.Equal(t, "48 MiB", config.MemoryLimit{Size: 48 << 20}.String())
	require.Equal(t, "auto", config.MemoryLimit{Auto: true}.String())
}

func TestLoadFSInvalid(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{"unknown top-level key", "store: memory\n", "store: memory\nstorage: redis\n",
			"capgate.yaml:23: storage: unknown field; known fields are agent, manifests, policy_dirs, auth, handlers, listen, router, store, store_password_file, store_password_env, store_sentinel_password_file, store_sentinel_password_env, cards, identity, audit, limits, push, services, decision_logs, tracing, quotas"},
		{"unknown nested key", "      algorithms: [RS256, ES256]\n", "      algorithms: [RS256, ES256]\n      jwks_ttl: 5m\n",
			"capgate.yaml:17: auth.issuers[0].jwks_ttl: unknown field; known fields are issuer, audiences, jwks_file, jwks_url, algorithms, tenants, scopes, token_url, discovery_url"},
		{"misspelt key", "  preview_scope:", "  previewScope:",
			"capgate.yaml:17: auth.previewScope: unknown field; did you mean preview_scope?"},
		{"duplicate key", "store: memory\n", "store: memory\nstore: redis://r:6379/0\n",
			"capgate.yaml:23: store: duplicate key (first defined at line 22)"},
		{"wrong type", "router: {threshold: 0.6}", "router: {threshold: high}",
			"capgate.yaml:21: router.threshold: want a number, got a string"},
		{"integer where a string is", "a2a: 127.0.0.1:8080", "a2a: 8080",
			"capgate.yaml:20: listen.a2a: want a string, got an integer"},
		{"list where a string is", "store: memory", "store: [memory]",
			"capgate.yaml:22: store: want a string, got a list"},
		{"syntax error", "listen: {a2a: 127.0.0.1:8080,", "listen: {a2a: [127.0.0.1:8080,",
			"capgate.yaml:19: syntax error: did not find expected ',' or ']'"},
		{"identity ttl over a minute", "store: memory\n", "store: memory\nidentity: {ttl: 5m}\n",
			"capgate.yaml:23: identity.ttl: 5m0s is outside (0s, 60s]: handler tokens are short-lived"},
		{"identity signing key missing", "store: memory\n", "store: memory\nidentity: {signing_key_file: ./keys/nope.pem}\n",
			"capgate.yaml:23: identity.signing_key_file: read keys/nope.pem: file does not exist"},
		{"jsonrpc_http_status not 200 or 401", "  preview_scope: a2a.preview\n", "  preview_scope: a2a.preview\n  jsonrpc_http_status: 403\n",
			"capgate.yaml:18: auth.jsonrpc_http_status: 403 is not one of 200 (always 200), 401 (401 or 403 with WWW-Authenticate for authentication and authorization failures)"},
		{"admin token file missing", "admin: 127.0.0.1:9090}", "admin: 127.0.0.1:9090, admin_token_file: ./keys/nope.token}",
			"capgate.yaml:20: listen.admin_token_file: read keys/nope.token: file does not exist"},
		{"card signing key missing", "store: memory\n", "store: memory\ncards: {signing_key_file: ./keys/nope.pem}\n",
			"capgate.yaml:23: cards.signing_key_file: read keys/nope.pem: file does not exist"},
		{"card kid without a key", "store: memory\n", "store: memory\ncards: {signing_kid: k1}\n",
			"capgate.yaml:23: cards.signing_key_file: required when cards.signing_kid or cards.signing_jku is set"},
		{"card jku not a URL", "store: memory\n", "store: memory\ncards: {signing_key_file: ./keys/nope.pem, signing_jku: jwks.json}\n",
			"capgate.yaml:23: cards.signing_jku: \"jwks.json\" is not an absolute http(s) URL\ncapgate.yaml:23: cards.signing_key_file: read keys/nope.pem: file does not exist"},
		{"token exchange incomplete", "store: memory\n", "store: memory\nidentity: {token_exchange: {token_endpoint: nowhere, handlers: [ghost]}}\n",
			"capgate.yaml:23: identity.token_exchange.client_id: required\ncapgate.yaml:23: identity.token_exchange.client_secret_file: required\ncapgate.yaml:23: identity.token_exchange.handlers[0]: \"ghost\" is not a configured handler\ncapgate.yaml:23: identity.token_exchange.token_endpoint: \"nowhere\" is not an absolute http(s) URL"},
		{"model router without model", "router: {threshold: 0.6}", "router: {threshold: 0.6, model: {url: http://llm.local/v1/chat/completions}}",
			"capgate.yaml:21: router.model.model: required"},
		{"body limit too small", "store: memory\n", "store: memory\nlimits: {max_body_bytes: 10}\n",
			"capgate.yaml:23: limits.max_body_bytes: 10 is outside [1024, 67108864]"},
		{"memory limit too small", "store: memory\n", "store: memory\nlimits: {memory: 1MiB}\n",
			"capgate.yaml:23: limits.memory: 1.0 MiB is below the minimum 16 MiB (0 leaves the runtime's setting)"},
		{"memory limit not a size", "store: memory\n", "store: memory\nlimits: {memory: lots}\n",
			`capgate.yaml:23: limits.memory: "lots": want "auto", a size such as "64MiB" or a number of bytes`},
		{"memory limit a word other than auto", "store: memory\n", "store: memory\nlimits: {memory: Auto}\n",
			`capgate.yaml:23: limits.memory: "Auto": want "auto", a size such as "64MiB" or a number of bytes`},
		{"memory limit a list", "store: memory\n", "store: memory\nlimits: {memory: [1]}\n",
			`capgate.yaml:23: limits.memory: want "auto", a size such as "64MiB" or a number of bytes, got a list`},
		{"memory limit negative", "store: memory\n", "store: memory\nlimits: {memory: -5}\n",
			"capgate.yaml:23: limits.memory: -5 is negative (0 leaves the runtime's setting)"},
		{"agent name missing", "  name: Finance Agent\n", "",
			"capgate.yaml:1: agent.name: required"},
		{"agent description missing", "  description: Invoices and purchase orders.\n", "",
			"capgate.yaml:1: agent.description: required"},
		{"agent version missing", "  version: 1.4.0\n", "",
			"capgate.yaml:1: agent.version: required"},
		{"agent url missing", "  url: http://127.0.0.1:8080\n", "",
			"capgate.yaml:1: agent.url: required"},
		{"agent url relative", "  url: http://127.0.0.1:8080", "  url: /a2a",
			`capgate.yaml:5: agent.url: "/a2a" is not an absolute http(s) URL`},
		{"agent url not http", "  url: http://127.0.0.1:8080", "  url: ftp://127.0.0.1",
			`capgate.yaml:5: agent.url: "ftp://127.0.0.1" is not an absolute http(s) URL`},
		{"version not semver", "  version: 1.4.0", `  version: "1.4"`,
			`capgate.yaml:4: agent.version: "1.4" is not a semantic version (want x.y.z, e.g. 1.4.0)`},
		{"provider url", "url: https://example.com}", "url: example.com}",
			`capgate.yaml:6: agent.provider.url: "example.com" is not an absolute http(s) URL`},
		{"extension uri relative", "uri: https://example.com/ext/trace/v1", "uri: /ext/trace/v1",
			`capgate.yaml:8: agent.extensions[0].uri: "/ext/trace/v1" is not an absolute URI`},
		{"manifests missing", "manifests: [./capabilities]\n", "",
			"capgate.yaml: manifests: required: at least one folder of capability manifests"},
		{"manifests folder absent", "manifests: [./capabilities]", "manifests: [./caps]",
			"capgate.yaml:9: manifests[0]: open caps: file does not exist"},
		{"issuer missing", "    - issuer: https://idp.example.com\n      audiences", "    - audiences",
			"capgate.yaml:13: auth.issuers[0].issuer: required"},
		{"audience missing", "      audiences: [finance-agent]\n", "",
			"capgate.yaml:13: auth.issuers[0].audiences: required: at least one audience"},
		{"no jwks", "      jwks_file: ./keys/demo.jwks.json\n", "",
			"capgate.yaml:13: auth.issuers[0]: one of jwks_file or jwks_url is required"},
		{"both jwks", "      jwks_file: ./keys/demo.jwks.json\n", "      jwks_file: ./keys/demo.jwks.json\n      jwks_url: https://idp.example.com/jwks\n",
			"capgate.yaml:13: auth.issuers[0]: jwks_file and jwks_url are both set; use exactly one"},
		{"jwks file absent", "./keys/demo.jwks.json", "./keys/other.json",
			`capgate.yaml:15: auth.issuers[0].jwks_file: "./keys/other.json" does not exist`},
		{"jwks url not http", "      jwks_file: ./keys/demo.jwks.json", "      jwks_url: file:///etc/jwks.json",
			`capgate.yaml:15: auth.issuers[0].jwks_url: "file:///etc/jwks.json" is not an absolute http(s) URL`},
		{"algorithms missing", "      algorithms: [RS256, ES256]\n", "",
			"capgate.yaml:13: auth.issuers[0].algorithms: required: one or more of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA"},
		{"algorithm none", "algorithms: [RS256, ES256]", "algorithms: [RS256, none]",
			`capgate.yaml:16: auth.issuers[0].algorithms[1]: "none" is refused: unsigned tokens are never accepted`},
		{"algorithm HMAC", "algorithms: [RS256, ES256]", "algorithms: [HS256]",
			`capgate.yaml:16: auth.issuers[0].algorithms[0]: "HS256" is refused: shared-secret (HMAC) algorithms are not supported; use an asymmetric algorithm such as RS256 or ES256`},
		{"algorithm unknown", "algorithms: [RS256, ES256]", "algorithms: [RS256, ES257]",
			`capgate.yaml:16: auth.issuers[0].algorithms[1]: "ES257" is not one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA; did you mean ES256?`},
		// One message per mistake: a misspelt required field is not also reported missing.
		{"audiences misspelt", "audiences: [finance-agent]", "audience: [finance-agent]",
			"capgate.yaml:14: auth.issuers[0].audience: unknown field; did you mean audiences?"},
		{"jwks_file misspelt", "jwks_file: ./keys", "jwks_fil: ./keys",
			"capgate.yaml:15: auth.issuers[0].jwks_fil: unknown field; did you mean jwks_file?"},
		{"algorithms misspelt", "algorithms: [RS256", "algoritms: [RS256",
			"capgate.yaml:16: auth.issuers[0].algoritms: unknown field; did you mean algorithms?"},
		{"manifests misspelt", "manifests: [./capabilities]", "manifest: [./capabilities]",
			"capgate.yaml:9: manifest: unknown field; did you mean manifests?"},
		{"extended card mode misspelt", "store: memory\n", "store: memory\ncards: {extended_card: aut}\n",
			`capgate.yaml:23: cards.extended_card: "aut" is not one of auto, on, off; did you mean auto?`},
		{"threshold above 1", "threshold: 0.6", "threshold: 1.5",
			"capgate.yaml:21: router.threshold: 1.5 is outside [0, 1]"},
		{"threshold negative", "threshold: 0.6", "threshold: -0.1",
			"capgate.yaml:21: router.threshold: -0.1 is outside [0, 1]"},
		{"listen not host:port", "a2a: 127.0.0.1:8080", "a2a: localhost",
			`capgate.yaml:20: listen.a2a: "localhost" is not host:port (e.g. 127.0.0.1:8080)`},
		{"listen bad port", "admin: 127.0.0.1:9090", "admin: 127.0.0.1:http",
			`capgate.yaml:20: listen.admin: "127.0.0.1:http" is not host:port (e.g. 127.0.0.1:8080)`},
		{"listen address used twice", "admin: 127.0.0.1:9090", "admin: 127.0.0.1:8080",
			`capgate.yaml:20: listen.admin: "127.0.0.1:8080" is also listen.a2a`},
		{"listen admin on a socket", "admin: 127.0.0.1:9090", "admin: 'unix:/run/capgate/admin.sock'",
			`capgate.yaml:20: listen.admin: "unix:/run/capgate/admin.sock": the admin listener must be host:port (the kubelet's probes and Prometheus reach it over TCP)`},
		{"listen socket path relative", "a2a: 127.0.0.1:8080", "a2a: 'unix:run/a2a.sock'",
			`capgate.yaml:20: listen.a2a: "unix:run/a2a.sock": a Unix socket needs a clean absolute path (e.g. unix:/var/run/capgate/a2a.sock)`},
		{"listen socket path not clean", "a2a: 127.0.0.1:8080", "a2a: 'unix:/run/../a2a.sock'",
			`capgate.yaml:20: listen.a2a: "unix:/run/../a2a.sock": a Unix socket needs a clean absolute path (e.g. unix:/var/run/capgate/a2a.sock)`},
		{"listen socket used twice", "a2a: 127.0.0.1:8080, extauthz: 127.0.0.1:9191", "a2a: 'unix:/run/c.sock', extauthz: 'unix:/run/c.sock'",
			`capgate.yaml:20: listen.extauthz: "unix:/run/c.sock" is also listen.a2a`},
		{"stream keepalive too short", "store: memory\n", "store: memory\nlimits: {stream_keepalive: 10ms}\n",
			"capgate.yaml:23: limits.stream_keepalive: 10ms is below 1s (0 turns keep-alives off)"},
		{"stream keepalive not below the idle timeout", "store: memory\n", "store: memory\nlimits: {stream_keepalive: 5m}\n",
			"capgate.yaml:23: limits.stream_keepalive: 5m0s is not shorter than limits.stream_idle_timeout (5m0s): proxies would see the stream idle first"},
		{"handler target", "invoices.lookup: builtin:echo", "invoices.lookup: invoices-svc:8080",
			`capgate.yaml:19: handlers.invoices.lookup: "invoices-svc:8080" is neither a builtin handler (builtin:echo) nor an absolute http(s) URL`},
		{"handler builtin unknown", "invoices.lookup: builtin:echo", "invoices.lookup: builtin:sleep",
			`capgate.yaml:19: handlers.invoices.lookup: "builtin:sleep" is not a builtin handler (known: builtin:echo)`},
		{"extended card mode", "store: memory\n", "store: memory\ncards: {extended_card: maybe}\n",
			`capgate.yaml:23: cards.extended_card: "maybe" is not one of auto, on, off`},
		{"card default version", "store: memory\n", "store: memory\ncards: {default_version: \"0.4\"}\n",
			`capgate.yaml:23: cards.default_version: "0.4" is not one of 1.0, 0.3`},
		{"duration not a string", "store: memory\n", "store: memory\ncards: {max_age: 300}\n",
			`capgate.yaml:23: cards.max_age: want a duration such as "30s", got an integer`},
		{"unknown key at the end", "store: memory\n", "store: memory\nauth2: 1\n",
			"capgate.yaml:23: auth2: unknown field; did you mean auth?"},
		{"duration unparsable", "  preview_scope: a2a.preview\n", "  preview_scope: a2a.preview\n  clock_skew: 30 seconds\n",
			`capgate.yaml:18: auth.clock_skew: "30 seconds" is not a duration (want e.g. "30s" or "5m")`},
		{"negative duration", "  preview_scope: a2a.preview\n", "  preview_scope: a2a.preview\n  clock_skew: -5s\n",
			"capgate.yaml:18: auth.clock_skew: -5s is negative"},
		{"quota plan budget misspelt", "store: memory\n", "store: memory\nquotas:\n  plans:\n    - id: free\n      budgt: {calls: 1, per: 1h}\n",
			"capgate.yaml:26: quotas.plans[0].budgt: unknown field; did you mean budget?"},
		{"quota plan both units", "store: memory\n", "store: memory\nquotas:\n  cost_classes: {low: 1}\n  plans:\n    - id: free\n      budget: {calls: 1, units: 2, per: 1h}\n",
			"capgate.yaml:27: quotas.plans[0].budget: give exactly one of calls and units (e.g. {calls: 100, per: 1h})"},
		{"quota plan key part", "store: memory\n", "store: memory\nquotas:\n  plans:\n    - id: free\n      budget: {calls: 1, per: 1h}\n      key: [caler]\n",
			`capgate.yaml:27: quotas.plans[0].key[0]: "caler" is not one of caller, tenant, capability, cost_class; did you mean caller?`},
		{"quota plan window", "store: memory\n", "store: memory\nquotas:\n  plans:\n    - id: free\n      budget: {calls: 1, per: 1500ms}\n",
			"capgate.yaml:26: quotas.plans[0].budget.per: 1.5s: want whole seconds, at least 1s"},
		{"quota store error mode", "store: memory\n", "store: memory\nquotas:\n  plans:\n    - id: free\n      budget: {calls: 1, per: 1h}\n      on_store_error: opn\n",
			`capgate.yaml:27: quotas.plans[0].on_store_error: "opn" is not one of closed, open; did you mean open?`},
		{"quota counter", "store: memory\n", "store: memory\nquotas:\n  counter: envy\n",
			`capgate.yaml:24: quotas.counter: "envy" is not one of capgate, envoy; did you mean envoy?`},
		{"quota cost class units", "store: memory\n", "store: memory\nquotas:\n  cost_classes: {low: 0}\n",
			"capgate.yaml:24: quotas.cost_classes.low: 0: want a positive number of units"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, base, tt.old)
			c, err := config.LoadFS(fsWith(strings.Replace(base, tt.old, tt.new, 1)), "capgate.yaml")
			require.Nil(t, c)
			require.EqualError(t, err, tt.want)
			var set *diag.Set
			require.True(t, errors.As(err, &set))
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := `agent:
  name: Finance Agent
  version: "1.4"
  url: 127.0.0.1:8080
  extensions:
    - {uri: "urn:example:trace"}
manifests: [./capabilities]
auth:
  issuers:
    - issuer: https://idp.example.com
      jwks_url: https://idp.example.com/jwks
      algorithms: [none, HS512, RS256]
  colour: blue
router: {threshold: 2}
store: memcached
`
	// A runtime check's problems are reported at their fields' lines, after the config's own.
	storeCheck := func(c *config.Config) []diag.Problem {
		return []diag.Problem{{Field: "store", Message: c.Store + ": not a store (a runtime check)"}}
	}
	_, err := config.LoadFS(fsWith(cfg), "capgate.yaml", storeCheck)
	require.EqualError(t, err, `capgate.yaml:1: agent.description: required
capgate.yaml:3: agent.version: "1.4" is not a semantic version (want x.y.z, e.g. 1.4.0)
capgate.yaml:4: agent.url: "127.0.0.1:8080" is not an absolute http(s) URL
capgate.yaml:10: auth.issuers[0].audiences: required: at least one audience
capgate.yaml:12: auth.issuers[0].algorithms[0]: "none" is refused: unsigned tokens are never accepted
capgate.yaml:12: auth.issuers[0].algorithms[1]: "HS512" is refused: shared-secret (HMAC) algorithms are not supported; use an asymmetric algorithm such as RS256 or ES256
capgate.yaml:13: auth.colour: unknown field; known fields are issuers, scopes_claim, tenant_claim, preview_scope, preview_tenants, anonymous_public, clock_skew, max_token_lifetime, jsonrpc_http_status, mtls_principals, known_scopes, trusted_proxy
capgate.yaml:14: router.threshold: 2 is outside [0, 1]
capgate.yaml:15: store: memcached: not a store (a runtime check)`)
}

func TestWarnings(t *testing.T) {
	cfg := strings.Replace(base, "- {uri: https://example.com/ext/trace/v1,", "- {uri: https://example.com/ext/trace,", 1)
	cfg = strings.Replace(cfg, "required: false}\n", "required: false}\n    - {uri: \"urn:example:audit:v2\"}\n    - {uri: https://example.com/ext/v1.2/cost}\n", 1)
	c, err := config.LoadFS(fsWith(cfg), "capgate.yaml")
	require.NoError(t, err)
	require.Equal(t, []string{
		`capgate.yaml:8: agent.extensions[0].uri: "https://example.com/ext/trace" has no version segment (e.g. /v1); a breaking change needs a new URI`,
	}, c.Warnings())
}

// Paths in a config on disk resolve against the config file's folder, not
// the working directory; absolute paths and ".." are allowed.
func TestLoadResolvesRelativePaths(t *testing.T) {
	root := t.TempDir()
	deploy := filepath.Join(root, "deploy")
	shared := filepath.Join(root, "shared")
	for _, d := range []string{filepath.Join(deploy, "capabilities"), filepath.Join(deploy, "keys"), filepath.Join(shared, "more")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(deploy, "capabilities", "lookup-invoice.yaml"), []byte(lookup), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(deploy, "keys", "demo.jwks.json"), demoJWKS, 0o644))
	cfg := strings.Replace(base, "manifests: [./capabilities]", "manifests: [./capabilities, ../shared/more, "+filepath.ToSlash(filepath.Join(shared, "more"))+"]", 1)
	require.NoError(t, os.WriteFile(filepath.Join(deploy, "capgate.yaml"), []byte(cfg), 0o644))

	c, err := config.Load(filepath.Join(deploy, "capgate.yaml"))
	require.NoError(t, err)
	require.Equal(t, deploy, c.Dir)

	fsys, name, err := c.Open("./capabilities")
	require.NoError(t, err)
	require.Equal(t, filepath.ToSlash(filepath.Join(deploy, "capabilities")), name)
	b, err := fsys.(interface {
		ReadFile(string) ([]byte, error)
	}).ReadFile("lookup-invoice.yaml")
	require.NoError(t, err)
	require.Equal(t, lookup, string(b))

	_, name, err = c.Open("../shared/more")
	require.NoError(t, err)
	require.Equal(t, filepath.ToSlash(filepath.Join(root, "shared/more")), name)

	jwks, err := c.ReadFile("./keys/demo.jwks.json")
	require.NoError(t, err)
	require.JSONEq(t, string(demoJWKS), string(jwks))

	reg, err := c.LoadRegistry()
	require.NoError(t, err)
	require.Equal(t, 1, reg.Len())

	// Run from another working directory: the result is the same.
	t.Chdir(shared)
	c2, err := config.Load(filepath.Join(deploy, "capgate.yaml"))
	require.NoError(t, err)
	_, err = c2.ReadFile("./keys/demo.jwks.json")
	require.NoError(t, err)

	// A relative config path gives relative display names.
	t.Chdir(root)
	c3, err := config.Load("deploy/capgate.yaml")
	require.NoError(t, err)
	_, name, err = c3.Open("./capabilities")
	require.NoError(t, err)
	require.Equal(t, "deploy/capabilities", name)
	_, err = c3.ReadFile("missing.json")
	require.EqualError(t, err, "read deploy/missing.json: no such file or directory")
}

func TestEmbeddedPathsStayInside(t *testing.T) {
	c, err := config.LoadFS(fsWith(base), "capgate.yaml")
	require.NoError(t, err)
	tests := map[string]string{
		"../outside": "open ../outside: outside the embedded filesystem",
		"/etc":       "open /etc: absolute paths cannot be used in an embedded config",
		"keys/x":     "open keys/x: file does not exist",
	}
	for rel, want := range tests {
		t.Run(rel, func(t *testing.T) {
			_, _, err := c.Open(rel)
			require.EqualError(t, err, want)
		})
	}
	_, _, err = c.Open("keys/demo.jwks.json")
	require.EqualError(t, err, "open keys/demo.jwks.json: not a directory")
}

func TestLoadMissingFile(t *testing.T) {
	_, err := config.Load(filepath.Join(t.TempDir(), "nope.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestByteSizeUnmarshalYAML(t *testing.T) {
	var v struct {
		A, B config.ByteSize
	}
	require.NoError(t, yaml.Unmarshal([]byte("a: 384MiB\nb: 1024\n"), &v))
	require.Equal(t, config.ByteSize(384<<20), v.A)
	require.Equal(t, config.ByteSize(1024), v.B)
	require.ErrorContains(t, yaml.Unmarshal([]byte("a: lots\n"), &v), `"lots": want a size`)
	require.ErrorContains(t, yaml.Unmarshal([]byte("a: [1]\n"), &v), "want a size")
}

func TestMemoryLimitUnmarshalYAML(t *testing.T) {
	var v struct {
		A, B, C config.MemoryLimit
	}
	require.NoError(t, yaml.Unmarshal([]byte("a: auto\nb: 384MiB\nc: 0\n"), &v))
	require.Equal(t, config.MemoryLimit{Auto: true}, v.A)
	require.Equal(t, config.MemoryLimit{Size: 384 << 20}, v.B)
	require.Equal(t, config.MemoryLimit{}, v.C)
	require.ErrorContains(t, yaml.Unmarshal([]byte("a: lots\n"), &v), `"lots": want "auto", a size`)
	require.ErrorContains(t, yaml.Unmarshal([]byte("a: [1]\n"), &v), `want "auto", a size`)
}

func TestTracing(t *testing.T) {
	c, err := config.LoadFS(fsWith(base), "capgate.yaml")
	require.NoError(t, err)
	require.False(t, c.Tracing.Enabled(), "off by default")
	require.Equal(t, config.TracingGRPC, c.Tracing.Protocol)
	require.Equal(t, 1.0, c.Tracing.SampleRatio)
	require.Equal(t, "capgate", c.Tracing.ServiceName)

	c, err = config.LoadFS(fsWith(base+"tracing: {otlp_endpoint: \"http://127.0.0.1:4318\", protocol: http, sample_ratio: 0.25}\n"), "capgate.yaml")
	require.NoError(t, err)
	require.True(t, c.Tracing.Enabled())
	require.Equal(t, 0.25, c.Tracing.SampleRatio)

	for in, want := range map[string]string{
		"tracing: {otlp_endpoint: \"collector:4317\"}\n":                    `tracing.otlp_endpoint: "collector:4317" is not an http(s)://host:port URL`,
		"tracing: {otlp_endpoint: \"http://c:4317/v1/traces\"}\n":           `tracing.otlp_endpoint: "http://c:4317/v1/traces" has a path: OTLP/gRPC takes host:port only`,
		"tracing: {otlp_endpoint: \"http://c:4317\", protocol: thrift}\n":   `tracing.protocol: "thrift" is neither grpc nor http`,
		"tracing: {otlp_endpoint: \"http://c:4317\", sample_ratio: 1.5}\n":  `tracing.sample_ratio: 1.5 is outside [0, 1]`,
		"tracing: {otlp_endpoint: \"http://u:p@c:4318\", protocol: http}\n": `tracing.otlp_endpoint: "http://u:xxxxx@c:4318" carries credentials in the URL`,
	} {
		_, err := config.LoadFS(fsWith(base+in), "capgate.yaml")
		require.ErrorContains(t, err, want, in)
	}
}

func TestAgentGRPC(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{{"", true}, {"  grpc: true\n", true}, {"  grpc: false\n", false}} {
		cfg := "agent:\n  name: A\n  description: B\n  version: 0.1.0\n  url: https://a.example.com\n" + tc.line + "manifests: [capabilities]\n"
		c, err := config.LoadFS(fsWith(cfg), "capgate.yaml")
		require.NoError(t, err, tc.line)
		require.Equal(t, tc.want, c.Agent.ServesGRPC(), tc.line)
	}
	_, err := config.LoadFS(fsWith("agent:\n  name: A\n  description: B\n  version: 0.1.0\n  url: https://a.example.com\n  grpc: maybe\nmanifests: [capabilities]\n"), "capgate.yaml")
	require.ErrorContains(t, err, "agent.grpc")
}

func TestHandlerBindings(t *testing.T) {
	const old = "invoices.lookup: builtin:echo\n"
	c, err := config.LoadFS(fsWith(strings.Replace(base, old, old+
		"  recon: {url: \"http://127.0.0.1:9001/a2a\", binding: HTTP+JSON}\n"+
		"  ledger:\n    url: http://127.0.0.1:9002\n    binding: GRPC\n"+
		"  plain: {url: \"https://plain.example.com/\"}\n"+
		"  frank: {url: \"https://frank.example.com/\", expose_errors: true}\n"+
		"  shy: {url: \"https://shy.example.com/\", expose_errors: false}\n", 1)), "capgate.yaml")
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"frank": true}, c.HandlerExposeErrors, "only a handler that says expose_errors: true exposes them")
	delete(c.Handlers, "frank")
	delete(c.Handlers, "shy")
	require.Equal(t, map[string]string{"invoices.lookup": "builtin:echo", "recon": "http://127.0.0.1:9001/a2a",
		"ledger": "http://127.0.0.1:9002", "plain": "https://plain.example.com/"}, c.Handlers)
	require.Equal(t, config.BindingHTTPJSON, c.HandlerBinding("recon"))
	require.Equal(t, config.BindingGRPC, c.HandlerBinding("ledger"))
	require.Equal(t, config.BindingJSONRPC, c.HandlerBinding("plain"))
	require.Equal(t, config.BindingJSONRPC, c.HandlerBinding("invoices.lookup"))
	require.True(t, c.HasHandler("recon"))

	tests := []struct {
		name, entry, want string
	}{
		{"unknown key", "  recon: {url: \"http://127.0.0.1:9001\", bindng: GRPC}\n",
			"capgate.yaml:20: handlers.recon.bindng: unknown field; did you mean binding?"},
		{"expose_errors not a boolean", "  recon: {url: \"http://127.0.0.1:9001\", expose_errors: sometimes}\n",
			"capgate.yaml:20: handlers.recon.expose_errors: want true or false, got a string"},
		{"bad binding", "  recon: {url: \"http://127.0.0.1:9001\", binding: REST}\n",
			`capgate.yaml:20: handlers.recon.binding: "REST" is not a binding (want JSONRPC, HTTP+JSON or GRPC)`},
		{"binding misspelt", "  recon: {url: \"http://127.0.0.1:9001\", binding: HTTPJSON}\n",
			`capgate.yaml:20: handlers.recon.binding: "HTTPJSON" is not a binding (want JSONRPC, HTTP+JSON or GRPC); did you mean HTTP+JSON?`},
		{"url misspelt", "  recon: {ur: \"http://127.0.0.1:9001\", binding: GRPC}\n",
			"capgate.yaml:20: handlers.recon.ur: unknown field; did you mean url?"},
		{"binding not a string", "  recon: {url: \"http://127.0.0.1:9001\", binding: [GRPC]}\n",
			"capgate.yaml:20: handlers.recon.binding: want a string, got a list"},
		{"no url", "  recon: {binding: GRPC}\n",
			"capgate.yaml:20: handlers.recon.url: required"},
		{"grpc with a path", "  recon: {url: \"http://127.0.0.1:9001/a2a\", binding: GRPC}\n",
			`capgate.yaml:20: handlers.recon.url: "http://127.0.0.1:9001/a2a": a GRPC handler is http://host:port (h2c) or https://host:port, with no path or query`},
		{"grpc without a port", "  recon: {url: \"https://ledger.example.com\", binding: GRPC}\n",
			`capgate.yaml:20: handlers.recon.url: "https://ledger.example.com": a GRPC handler is http://host:port (h2c) or https://host:port, with no path or query`},
		{"http+json with a query", "  recon: {url: \"http://127.0.0.1:9001/a2a?x=1\", binding: HTTP+JSON}\n",
			`capgate.yaml:20: handlers.recon.url: "http://127.0.0.1:9001/a2a?x=1": an HTTP+JSON handler's base URL has no query or fragment`},
		{"builtin over grpc", "  recon: {url: \"builtin:echo\", binding: GRPC}\n",
			"capgate.yaml:20: handlers.recon.binding: builtin handlers are called over JSONRPC only"},
		{"object url not a URL", "  recon: {url: \"ledger:9001\", binding: JSONRPC}\n",
			`capgate.yaml:20: handlers.recon.url: "ledger:9001" is neither a builtin handler (builtin:echo) nor an absolute http(s) URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.LoadFS(fsWith(strings.Replace(base, old, old+tt.entry, 1)), "capgate.yaml")
			require.Nil(t, c)
			require.EqualError(t, err, tt.want)
		})
	}
}

// TestCardInterfaceWarnings: cards.default_version "0.3" strands 1.0 clients that fetch the card
// without A2A-Version, and an agent.url with a path is not where gRPC is served; an override of
// the gRPC interface silences the second.
func TestCardInterfaceWarnings(t *testing.T) {
	cfg := strings.Replace(base, "url: http://127.0.0.1:8080\n", "url: https://agents.example.com/finance\n", 1) + "cards: {default_version: \"0.3\"}\n"
	c, err := config.LoadFS(fsWith(cfg), "capgate.yaml")
	require.NoError(t, err)
	require.Equal(t, []string{
		`capgate.yaml:23: cards.default_version: "0.3" serves the 0.3 card to every request for /.well-known/agent-card.json that names no A2A-Version, and A2A 1.0 clients that send none (a2a-go v2's resolver, the A2A TCK) cannot read it; 0.3 clients find the 0.3 card at /.well-known/agent.json with the default "1.0"`,
		`capgate.yaml:5: agent.url: "https://agents.example.com/finance" has a path, but gRPC methods are served at the host's root: the card advertises gRPC at dns:///agents.example.com:443; if a proxy routes only that path to capgate, set agent.interface_urls.grpc to where clients reach gRPC (setting it also silences this warning), or agent.grpc: false`,
	}, c.Warnings())

	cfg = strings.Replace(cfg, "url: https://agents.example.com/finance\n", "url: https://agents.example.com/finance\n  interface_urls: {grpc: \"dns:///grpc.example.com:443\"}\n", 1)
	cfg = strings.Replace(cfg, "cards: {default_version: \"0.3\"}\n", "", 1)
	c, err = config.LoadFS(fsWith(cfg), "capgate.yaml")
	require.NoError(t, err)
	require.Empty(t, c.Warnings())
	require.Equal(t, "dns:///grpc.example.com:443", c.Agent.InterfaceURL(config.BindingGRPC))
	require.Equal(t, "https://agents.example.com/finance", c.Agent.InterfaceURL(config.BindingJSONRPC))
}

func TestInterfaceURLsAndSecurityRequirements(t *testing.T) {
	c, err := config.LoadFS(fsWith(base), "capgate.yaml")
	require.NoError(t, err)
	require.Equal(t, config.SecurityRequirementsOmit, c.Cards.SecurityRequirements, "the default")
	require.Equal(t, "dns:///127.0.0.1:8080", c.Agent.InterfaceURL(config.BindingGRPC))
	require.Equal(t, "http://127.0.0.1:8080", c.Agent.InterfaceURL(config.BindingHTTPJSON))
	require.Empty(t, c.Agent.InterfaceURL("SOAP"))

	for _, form := range config.SecurityRequirementForms {
		c, err := config.LoadFS(fsWith(base+"cards: {security_requirements: "+form+"}\n"), "capgate.yaml")
		require.NoError(t, err, form)
		require.Equal(t, form, c.Cards.SecurityRequirements)
	}
	issuer := "      algorithms: [RS256, ES256]\n"
	for _, tt := range []struct{ old, new, want string }{
		{"store: memory\n", "store: memory\ncards: {security_requirements: a2a_go}\n",
			`capgate.yaml:23: cards.security_requirements: "a2a_go" is not one of omit, proto, a2a-go; did you mean a2a-go?`},
		{"url: http://127.0.0.1:8080\n", "url: http://127.0.0.1:8080\n  interface_urls: {grpc: \"http://127.0.0.1:8080\"}\n",
			`capgate.yaml:6: agent.interface_urls.grpc: "http://127.0.0.1:8080" is not a gRPC target dns:///host:port (an http(s) URL is no gRPC target for A2A clients)`},
		{"url: http://127.0.0.1:8080\n", "url: http://127.0.0.1:8080\n  interface_urls: {grpc: \"dns:///grpc.example.com\"}\n",
			`capgate.yaml:6: agent.interface_urls.grpc: "dns:///grpc.example.com" is not a gRPC target dns:///host:port: it names no host:port`},
		{"url: http://127.0.0.1:8080\n", "url: http://127.0.0.1:8080\n  interface_urls: {grpc: \"dns:///grpc.example.com:http\"}\n",
			`capgate.yaml:6: agent.interface_urls.grpc: "dns:///grpc.example.com:http" is not a gRPC target dns:///host:port: "http" is not a port`},
		{"url: http://127.0.0.1:8080\n", "url: http://127.0.0.1:8080\n  interface_urls: {jsonrpc: \"/a2a\"}\n",
			`capgate.yaml:6: agent.interface_urls.jsonrpc: "/a2a" is not an absolute http(s) URL`},
		{issuer, issuer + "      token_url: login.example.com/token\n",
			`capgate.yaml:17: auth.issuers[0].token_url: "login.example.com/token" is not an absolute http(s) URL`},
		{issuer, issuer + "      discovery_url: \"ftp://login.example.com/\"\n",
			`capgate.yaml:17: auth.issuers[0].discovery_url: "ftp://login.example.com/" is not an absolute http(s) URL`},
	} {
		_, err := config.LoadFS(fsWith(strings.Replace(base, tt.old, tt.new, 1)), "capgate.yaml")
		require.EqualError(t, err, tt.want)
	}
	require.Equal(t, "dns:///example.com:443", config.GRPCTarget("https://example.com/a2a"))
	require.Equal(t, "not a url", config.GRPCTarget("not a url"), "returned as it is")
}
