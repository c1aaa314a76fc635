package envoy

import (
	"os"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// bootstrapFiles are every Envoy bootstrap in this folder; each must parse,
// validate and pass Check.
var bootstrapFiles = []string{"bootstrap.yaml", "bootstrap-tls.yaml", "bootstrap-ratelimit.yaml"}

func TestBootstrapFiles(t *testing.T) {
	for _, name := range bootstrapFiles {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(name)
			require.NoError(t, err)
			b, err := parseBootstrap(data)
			require.NoError(t, err)
			require.NoError(t, validateBootstrap(b))
			require.NoError(t, checkBootstrap(b))
		})
	}
}

func TestDefaultBootstrap(t *testing.T) {
	b, err := DefaultBootstrap()
	require.NoError(t, err)
	require.NoError(t, checkBootstrap(b))

	onDisk, err := os.ReadFile("bootstrap.yaml")
	require.NoError(t, err)
	require.Equal(t, string(onDisk), string(BootstrapYAML()))
}

// TestParseAndValidateRejects edits the YAML text, so that the failure comes
// from Envoy's protos: unknown fields, unknown types, and PGV rules inside
// typed_config, which Bootstrap.ValidateAll alone does not reach.
func TestParseAndValidateRejects(t *testing.T) {
	tests := []struct {
		name    string
		old     string
		new     string
		wantErr string
		inParse bool
	}{
		{
			name:    "unknown top-level field",
			old:     "static_resources:\n",
			new:     "static_resource_limits: {}\nstatic_resources:\n",
			wantErr: "unknown field \"static_resource_limits\"",
			inParse: true,
		},
		{
			name:    "unknown field inside ext_authz typed_config",
			old:     "failure_mode_allow: false",
			new:     "failure_mode_allow: false\n                      fail_open: false",
			wantErr: "unknown field \"fail_open\"",
			inParse: true,
		},
		{
			name:    "unknown typed_config type",
			old:     "envoy.extensions.filters.http.router.v3.Router",
			new:     "envoy.extensions.filters.http.router.v3.Routerr",
			wantErr: "envoy.extensions.filters.http.router.v3.Routerr",
			inParse: true,
		},
		{
			name:    "bad enum value",
			old:     "transport_api_version: V3",
			new:     "transport_api_version: V4",
			wantErr: "V4",
			inParse: true,
		},
		{
			name:    "duplicate yaml key",
			old:     "failure_mode_allow: false",
			new:     "failure_mode_allow: false\n                      failure_mode_allow: true",
			wantErr: "already defined",
			inParse: true,
		},
		{
			name:    "PGV rule in ext_authz inside the connection manager",
			old:     "cluster_name: capgate_extauthz",
			new:     `cluster_name: ""`,
			wantErr: "ClusterName",
		},
		{
			name:    "PGV rule in a per-route typed config",
			old:     "                              disabled: true\n",
			new:     "",
			wantErr: "ExtAuthzPerRoute",
		},
		{
			name:    "PGV rule in the bootstrap itself",
			old:     "port_value: 8000",
			new:     "port_value: 70000",
			wantErr: "PortValue",
		},
		{
			name:    "PGV rule on the admin socket's mode",
			old:     "mode: 384",
			new:     "mode: 1000",
			wantErr: "Mode",
		},
		{
			name:    "PGV rule in an overload action's trigger",
			old:     "threshold: {value: 0.98}",
			new:     "threshold: {value: 1.5}",
			wantErr: "Value",
		},
		{
			name:    "PGV rule in a cluster's protocol options",
			old:     "http2_protocol_options: {}",
			new:     "http2_protocol_options: {max_concurrent_streams: 0}",
			wantErr: "MaxConcurrentStreams",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, string(bootstrapYAML), tt.old)
			data := strings.Replace(string(bootstrapYAML), tt.old, tt.new, 1)
			b, err := parseBootstrap([]byte(data))
			if tt.inParse {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.ErrorContains(t, validateBootstrap(b), tt.wantErr)
		})
	}
}

// TestTLSVariantMatches: bootstrap-tls.yaml differs from bootstrap.yaml
// only in its listener (and its secrets), so a change to admin, clusters or
// the overload manager must be made in both.
func TestTLSVariantMatches(t *testing.T) {
	plain, err := parseBootstrap(bootstrapYAML)
	require.NoError(t, err)
	data, err := os.ReadFile("bootstrap-tls.yaml")
	require.NoError(t, err)
	tls, err := parseBootstrap(data)
	require.NoError(t, err)
	require.True(t, proto.Equal(plain.GetAdmin(), tls.GetAdmin()), "admin")
	require.True(t, proto.Equal(plain.GetOverloadManager(), tls.GetOverloadManager()), "overload_manager")
	require.Len(t, tls.GetStaticResources().GetClusters(), len(plain.GetStaticResources().GetClusters()))
	for i, c := range plain.GetStaticResources().GetClusters() {
		require.True(t, proto.Equal(c, tls.GetStaticResources().GetClusters()[i]), "cluster %q", c.GetName())
	}
}

// TestAdminIsAUnixSocket: the admin API (which can stop Envoy) is not on
// the loopback interface the pod's containers share.
func TestAdminIsAUnixSocket(t *testing.T) {
	for _, name := range bootstrapFiles {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		b, err := parseBootstrap(data)
		require.NoError(t, err)
		pipe := b.GetAdmin().GetAddress().GetPipe()
		require.NotNil(t, pipe, "%s: admin.address must be a pipe", name)
		require.True(t, strings.HasPrefix(pipe.GetPath(), "/"), "%s: an abstract socket (@...) is shared by the whole pod's network namespace", name)
		require.Equal(t, uint32(0o600), pipe.GetMode(), name)
		for _, c := range b.GetStaticResources().GetClusters() {
			if c.GetName() == "ratelimit" {
				continue // the shared rate-limit service: another pod, not capgate
			}
			for _, e := range c.GetLoadAssignment().GetEndpoints() {
				for _, lb := range e.GetLbEndpoints() {
					require.NotNil(t, lb.GetEndpoint().GetAddress().GetPipe(), "%s: cluster %q: capgate is reached over a Unix socket", name, c.GetName())
				}
			}
		}
	}
}

func TestRegexLanguage(t *testing.T) {
	tests := []struct {
		expr string
		want []string // nil: not a small finite language
	}{
		{"GET|HEAD", []string{"GET", "HEAD"}},
		{"^(GET|HEAD)$", []string{"GET", "HEAD"}},
		{"(?:GET)|HEAD", []string{"GET", "HEAD"}},
		{"HEAD?", []string{"HEA", "HEAD"}},
		{"[GH]ET", []string{"GET", "HET"}},
		{"GET|HEAD|PATCH", []string{"GET", "HEAD", "PATCH"}},
		{".*", nil},
		{"GET|.+", nil},
		{"GE+T", nil},
		{"(?i)get", nil},
		{"[A-Z]{3}", nil},
		{"(", nil},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, ok := regexLanguage(tt.expr, 16)
			if tt.want == nil {
				require.False(t, ok, "%v", got)
				return
			}
			require.True(t, ok)
			require.ElementsMatch(t, tt.want, got)
		})
	}
}

func TestCheckTLSSecrets(t *testing.T) {
	data, err := os.ReadFile("bootstrap-tls.yaml")
	require.NoError(t, err)
	b, err := parseBootstrap(data)
	require.NoError(t, err)
	b.StaticResources.Secrets = b.StaticResources.Secrets[1:]
	require.ErrorContains(t, checkBootstrap(b), `SDS secret "capgate_server_cert" is not defined in static_resources.secrets`)
}

// sidecar is the parsed bootstrap with its connection manager and ext_authz
// config unpacked, so tests can edit them and pack them back.
type sidecar struct {
	b     *bootstrapv3.Bootstrap
	hcm   *hcmv3.HttpConnectionManager
	authz *extauthzv3.ExtAuthz
}

func loadSidecar(t *testing.T) *sidecar {
	t.Helper()
	b, err := parseBootstrap(bootstrapYAML)
	require.NoError(t, err)
	s := &sidecar{b: b, hcm: &hcmv3.HttpConnectionManager{}, authz: &extauthzv3.ExtAuthz{}}
	require.NoError(t, s.hcmFilter().GetTypedConfig().UnmarshalTo(s.hcm))
	require.NoError(t, s.authzFilter().GetTypedConfig().UnmarshalTo(s.authz))
	return s
}

func (s *sidecar) hcmFilter() *listenerv3.Filter {
	return s.b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0]
}

func (s *sidecar) authzFilter() *hcmv3.HttpFilter {
	for _, f := range s.hcm.GetHttpFilters() {
		if f.GetName() == "envoy.filters.http.ext_authz" {
			return f
		}
	}
	return nil
}

func (s *sidecar) route(name string) *routev3.Route {
	for _, r := range s.hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
		if r.GetName() == name {
			return r
		}
	}
	return nil
}

// pack writes the edited ext_authz and connection manager configs back.
func (s *sidecar) pack(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	if f := s.authzFilter(); f != nil {
		f.ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, s.authz)}
	}
	s.hcmFilter().ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, s.hcm)}
	return s.b
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	require.NoError(t, err)
	return a
}

func TestCheck(t *testing.T) {
	disabled := func(t *testing.T) map[string]*anypb.Any {
		return map[string]*anypb.Any{"envoy.filters.http.ext_authz": mustAny(t, &extauthzv3.ExtAuthzPerRoute{
			Override: &extauthzv3.ExtAuthzPerRoute_Disabled{Disabled: true},
		})}
	}
	tests := []struct {
		name    string
		mutate  func(t *testing.T, s *sidecar)
		wantErr []string // each must appear; nil means checkBootstrap passes
	}{
		{
			name:   "as shipped",
			mutate: func(*testing.T, *sidecar) {},
		},
		{
			name:    "fail open",
			mutate:  func(_ *testing.T, s *sidecar) { s.authz.FailureModeAllow = true },
			wantErr: []string{"failure_mode_allow is true"},
		},
		{
			name:    "shadow mode",
			mutate:  func(_ *testing.T, s *sidecar) { s.authz.ShadowMode = true },
			wantErr: []string{"shadow_mode is true"},
		},
		{
			name:    "no request body",
			mutate:  func(_ *testing.T, s *sidecar) { s.authz.WithRequestBody = nil },
			wantErr: []string{"with_request_body is not set"},
		},
		{
			name: "partial, small, not as bytes body",
			mutate: func(_ *testing.T, s *sidecar) {
				s.authz.WithRequestBody = &extauthzv3.BufferSettings{MaxRequestBytes: 8192, AllowPartialMessage: true}
			},
			wantErr: []string{"max_request_bytes is 8192", "allow_partial_message is true", "pack_as_bytes is false"},
		},
		{
			name:    "transport api not V3",
			mutate:  func(_ *testing.T, s *sidecar) { s.authz.TransportApiVersion = corev3.ApiVersion_AUTO },
			wantErr: []string{"transport_api_version is AUTO"},
		},
		{
			name: "ext_authz cluster missing",
			mutate: func(_ *testing.T, s *sidecar) {
				s.b.StaticResources.Clusters = s.b.StaticResources.Clusters[1:]
			},
			wantErr: []string{`grpc_service cluster "capgate_extauthz" is not defined`},
		},
		{
			name: "gateway cluster missing",
			mutate: func(_ *testing.T, s *sidecar) {
				s.b.StaticResources.Clusters = s.b.StaticResources.Clusters[:1]
			},
			wantErr: []string{`route "public-agent-card" (routes[0]): cluster "capgate_gateway" is not defined`, `route "a2a" (routes[2]): cluster "capgate_gateway" is not defined`},
		},
		{
			name: "ext_authz cluster speaks HTTP/1.1",
			mutate: func(_ *testing.T, s *sidecar) {
				s.b.StaticResources.Clusters[0].TypedExtensionProtocolOptions = nil
			},
			wantErr: []string{`cluster "capgate_extauthz" is not HTTP/2`},
		},
		{
			name: "ext_authz after the router",
			mutate: func(_ *testing.T, s *sidecar) {
				f := s.hcm.HttpFilters
				f[0], f[1] = f[1], f[0]
			},
			wantErr: []string{"ext_authz (http_filters[1]) comes after the router (http_filters[0])"},
		},
		{
			name: "no ext_authz filter",
			mutate: func(_ *testing.T, s *sidecar) {
				s.hcm.HttpFilters = s.hcm.HttpFilters[1:]
			},
			wantErr: []string{"no envoy.extensions.filters.http.ext_authz.v3.ExtAuthz http filter"},
		},
		{
			name:    "ext_authz filter disabled by default",
			mutate:  func(_ *testing.T, s *sidecar) { s.authzFilter().Disabled = true },
			wantErr: []string{"disabled: true turns the check off"},
		},
		{
			name: "public card route checked",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("public-agent-card").TypedPerFilterConfig = nil
			},
			wantErr: []string{"the public card route does not disable ext_authz", "no route serves /.well-known/agent-card.json"},
		},
		{
			name: "0.3 card route checked",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("public-agent-card-v03").TypedPerFilterConfig = nil
			},
			wantErr: []string{"the public card route does not disable ext_authz", "no route serves /.well-known/agent.json"},
		},
		{
			name: "catch-all route skips the check",
			mutate: func(t *testing.T, s *sidecar) {
				s.route("a2a").TypedPerFilterConfig = disabled(t)
			},
			wantErr: []string{`route "a2a" (routes[2]): disables ext_authz, but only the public card route`},
		},
		{
			name: "catch-all route skips the check through FilterConfig",
			mutate: func(t *testing.T, s *sidecar) {
				s.route("a2a").TypedPerFilterConfig = map[string]*anypb.Any{
					"envoy.filters.http.ext_authz": mustAny(t, &routev3.FilterConfig{Disabled: true}),
				}
			},
			wantErr: []string{`route "a2a" (routes[2]): disables ext_authz`},
		},
		{
			name: "virtual host skips the check",
			mutate: func(t *testing.T, s *sidecar) {
				s.hcm.GetRouteConfig().GetVirtualHosts()[0].TypedPerFilterConfig = disabled(t)
			},
			wantErr: []string{"disables ext_authz for the whole virtual host"},
		},
		{
			name: "card route for every method",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("public-agent-card").GetMatch().Headers = nil
			},
			wantErr: []string{`route "public-agent-card" (routes[0]): disables ext_authz, but only the public card route`},
		},
		{
			name: "card route also for PATCH",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("public-agent-card").GetMatch().GetHeaders()[0].GetStringMatch().MatchPattern = &matcherv3.StringMatcher_SafeRegex{
					SafeRegex: &matcherv3.RegexMatcher{Regex: "GET|HEAD|PATCH"},
				}
			},
			wantErr: []string{`route "public-agent-card" (routes[0]): disables ext_authz, but only the public card route`},
		},
		{
			name: "card route for any method by regex",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("public-agent-card").GetMatch().GetHeaders()[0].GetStringMatch().MatchPattern = &matcherv3.StringMatcher_SafeRegex{
					SafeRegex: &matcherv3.RegexMatcher{Regex: "GET|HEAD|.*"},
				}
			},
			wantErr: []string{`route "public-agent-card" (routes[0]): disables ext_authz, but only the public card route`},
		},
		{
			name: "card route for exactly GET",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("public-agent-card").GetMatch().GetHeaders()[0].GetStringMatch().MatchPattern = &matcherv3.StringMatcher_Exact{Exact: "GET"}
			},
		},
		{
			name: "card route for methods of any case",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("public-agent-card").GetMatch().GetHeaders()[0].GetStringMatch().IgnoreCase = true
			},
			wantErr: []string{`route "public-agent-card" (routes[0]): disables ext_authz, but only the public card route`},
		},
		{
			name: "card route matched case-insensitively",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("public-agent-card").GetMatch().CaseSensitive = wrapperspb.Bool(false)
			},
			wantErr: []string{`route "public-agent-card" (routes[0]): disables ext_authz, but only the public card route`},
		},
		{
			name: "streams cut at capgate's own idle timeout",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("a2a").GetRoute().IdleTimeout = durationpb.New(300 * time.Second)
			},
			wantErr: []string{`route "a2a" (routes[2]): streams (timeout 0s) are cut after 5m0s of silence (idle_timeout)`},
		},
		{
			name: "streams cut by the connection manager's idle timeout",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("a2a").GetRoute().IdleTimeout = nil
			},
			wantErr: []string{`route "a2a" (routes[2]): streams (timeout 0s) are cut after 5m0s of silence (the connection manager's stream_idle_timeout)`},
		},
		{
			name: "streams without an idle timeout",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("a2a").GetRoute().IdleTimeout = durationpb.New(0)
			},
		},
		{
			name: "gateway cluster with Envoy's default circuit breakers",
			mutate: func(_ *testing.T, s *sidecar) {
				s.b.StaticResources.Clusters[1].CircuitBreakers = nil
			},
			wantErr: []string{
				`route "a2a" (routes[2]): cluster "capgate_gateway": circuit_breakers (DEFAULT priority) max_connections is 1024, below the 10000 downstream connections`,
				`max_pending_requests is 1024`, `max_requests is 1024`,
			},
		},
		{
			name: "ext_authz cluster with Envoy's default circuit breakers",
			mutate: func(_ *testing.T, s *sidecar) {
				s.b.StaticResources.Clusters[0].CircuitBreakers = nil
			},
			wantErr: []string{`http filter "envoy.filters.http.ext_authz": cluster "capgate_extauthz": circuit_breakers (DEFAULT priority) max_requests is 1024`},
		},
		{
			name: "gateway cluster breakers for the HIGH priority only",
			mutate: func(_ *testing.T, s *sidecar) {
				s.b.StaticResources.Clusters[1].GetCircuitBreakers().GetThresholds()[0].Priority = corev3.RoutingPriority_HIGH
			},
			wantErr: []string{`cluster "capgate_gateway": circuit_breakers (DEFAULT priority) max_connections is 1024`},
		},
		{
			name: "gateway cluster with a small max_requests",
			mutate: func(_ *testing.T, s *sidecar) {
				s.b.StaticResources.Clusters[1].GetCircuitBreakers().GetThresholds()[0].MaxRequests = wrapperspb.UInt32(2000)
			},
			wantErr: []string{`cluster "capgate_gateway": circuit_breakers (DEFAULT priority) max_requests is 2000`},
		},
		{
			name: "no heap monitor",
			mutate: func(_ *testing.T, s *sidecar) {
				om := s.b.GetOverloadManager()
				om.ResourceMonitors = om.ResourceMonitors[:1]
			},
			wantErr: []string{"overload_manager: no envoy.resource_monitors.fixed_heap monitor (max_heap_size_bytes) triggering envoy.overload_actions.stop_accepting_requests"},
		},
		{
			name: "heap monitor that only shrinks the heap",
			mutate: func(_ *testing.T, s *sidecar) {
				om := s.b.GetOverloadManager()
				om.Actions = om.Actions[:1]
			},
			wantErr: []string{"overload_manager: no envoy.resource_monitors.fixed_heap monitor"},
		},
		{
			name: "no connection limit",
			mutate: func(_ *testing.T, s *sidecar) {
				om := s.b.GetOverloadManager()
				om.ResourceMonitors = om.ResourceMonitors[1:]
			},
			wantErr: []string{"overload_manager: no envoy.resource_monitors.global_downstream_max_connections monitor"},
		},
		{
			name: "card route by prefix",
			mutate: func(_ *testing.T, s *sidecar) {
				s.route("public-agent-card").GetMatch().PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: PublicCardPath}
			},
			wantErr: []string{`route "public-agent-card" (routes[0]): disables ext_authz, but only the public card route`},
		},
		{
			name: "per-route disabled: false (Envoy rejects it; Go PGV does not)",
			mutate: func(t *testing.T, s *sidecar) {
				s.route("a2a").TypedPerFilterConfig = map[string]*anypb.Any{
					"envoy.filters.http.ext_authz": mustAny(t, &extauthzv3.ExtAuthzPerRoute{
						Override: &extauthzv3.ExtAuthzPerRoute_Disabled{Disabled: false},
					}),
				}
			},
			wantErr: []string{"disabled: false"},
		},
		{
			name: "route sends the check without the body",
			mutate: func(t *testing.T, s *sidecar) {
				s.route("a2a").TypedPerFilterConfig = map[string]*anypb.Any{
					"envoy.filters.http.ext_authz": mustAny(t, &extauthzv3.ExtAuthzPerRoute{
						Override: &extauthzv3.ExtAuthzPerRoute_CheckSettings{CheckSettings: &extauthzv3.CheckSettings{DisableRequestBodyBuffering: true}},
					}),
				}
			},
			wantErr: []string{"check_settings.disable_request_body_buffering"},
		},
		{
			name: "several problems are all reported",
			mutate: func(_ *testing.T, s *sidecar) {
				s.authz.FailureModeAllow = true
				s.authz.WithRequestBody.AllowPartialMessage = true
				s.b.StaticResources.Clusters = s.b.StaticResources.Clusters[:1]
			},
			wantErr: []string{"failure_mode_allow is true", "allow_partial_message is true", `cluster "capgate_gateway" is not defined`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := loadSidecar(t)
			tt.mutate(t, s)
			err := checkBootstrap(s.pack(t))
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tt.wantErr {
				require.ErrorContains(t, err, want)
			}
		})
	}
}

// TestTLSVariantForwardsThePeer: the mTLS listener replaces any client-sent
// x-forwarded-client-cert with the verified certificate's URI and proves
// itself to the gateway with the proxy secret on the checked route, as
// auth.trusted_proxy expects (docs/envoy.md "mTLS peers at the gateway").
func TestTLSVariantForwardsThePeer(t *testing.T) {
	data, err := os.ReadFile("bootstrap-tls.yaml")
	require.NoError(t, err)
	b, err := parseBootstrap(data)
	require.NoError(t, err)
	s := &sidecar{b: b, hcm: &hcmv3.HttpConnectionManager{}}
	require.NoError(t, s.hcmFilter().GetTypedConfig().UnmarshalTo(s.hcm))
	require.Equal(t, hcmv3.HttpConnectionManager_SANITIZE_SET, s.hcm.GetForwardClientCertDetails())
	require.True(t, s.hcm.GetSetCurrentClientCertDetails().GetUri())
	var secret *corev3.HeaderValueOption
	for _, h := range s.route("a2a").GetRequestHeadersToAdd() {
		if h.GetHeader().GetKey() == "x-capgate-proxy-secret" {
			secret = h
		}
	}
	require.NotNil(t, secret, "the checked route sends the proxy secret")
	require.Equal(t, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, secret.GetAppendAction(), "a client-sent value is overwritten")
}

// TestGatewayClusterCarriesGRPC: the gateway's cluster forwards HTTP/2 requests (every gRPC call
// of the A2A gRPC binding) over HTTP/2 and HTTP/1.1 ones over HTTP/1.1, in both bootstraps.
func TestGatewayClusterCarriesGRPC(t *testing.T) {
	for _, name := range bootstrapFiles {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		b, err := parseBootstrap(data)
		require.NoError(t, err)
		var found bool
		for _, c := range b.GetStaticResources().GetClusters() {
			if c.GetName() != "capgate_gateway" {
				continue
			}
			found = true
			var opts upstreamhttpv3.HttpProtocolOptions
			require.NoError(t, c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(&opts))
			d := opts.GetUseDownstreamProtocolConfig()
			require.NotNil(t, d.GetHttp2ProtocolOptions(), "%s: HTTP/2 requests go on over HTTP/2", name)
			require.NotNil(t, d.GetHttpProtocolOptions(), "%s: HTTP/1.1 requests go on over HTTP/1.1", name)
		}
		require.True(t, found, name)
	}
}

// TestCheckStatsListener: the one listener without ext_authz may send
// exactly GET /stats/prometheus, unrewritten, to Envoy's admin socket and
// answer everything else itself; no other route reaches the admin API.
func TestCheckStatsListener(t *testing.T) {
	stats := func(t *testing.T, b *bootstrapv3.Bootstrap) (*hcmv3.HttpConnectionManager, func()) {
		t.Helper()
		for _, l := range b.GetStaticResources().GetListeners() {
			if l.GetName() == "stats" {
				f := l.GetFilterChains()[0].GetFilters()[0]
				hcm := &hcmv3.HttpConnectionManager{}
				require.NoError(t, f.GetTypedConfig().UnmarshalTo(hcm))
				return hcm, func() { f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm)} }
			}
		}
		require.FailNow(t, "no stats listener")
		return nil, nil
	}
	prometheus := func(hcm *hcmv3.HttpConnectionManager) *routev3.Route {
		return hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0]
	}
	for _, tc := range []struct {
		name   string
		mutate func(*hcmv3.HttpConnectionManager)
		want   string
	}{
		{"any path to the admin API", func(h *hcmv3.HttpConnectionManager) {
			prometheus(h).Match.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/"}
		}, "Envoy's admin API is reached by the exact path /stats/prometheus only"},
		{"POST too", func(h *hcmv3.HttpConnectionManager) { prometheus(h).Match.Headers = nil }, "reached by GET only"},
		{"rewritten", func(h *hcmv3.HttpConnectionManager) {
			prometheus(h).GetRoute().PrefixRewrite = "/quitquitquit"
		}, "rewrites the path to Envoy's admin API"},
		{"to the gateway, unchecked", func(h *hcmv3.HttpConnectionManager) {
			prometheus(h).GetRoute().ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: "capgate_gateway"}
		}, "no envoy.extensions.filters.http.ext_authz.v3.ExtAuthz http filter: requests would reach capgate unchecked"},
		{"the rest forwarded", func(h *hcmv3.HttpConnectionManager) {
			h.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[1].Action = &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "envoy_admin"}}}
		}, "Envoy's admin API is reached by the exact path /stats/prometheus only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := parseBootstrap(bootstrapYAML)
			require.NoError(t, err)
			require.NoError(t, checkBootstrap(b))
			hcm, pack := stats(t, b)
			tc.mutate(hcm)
			pack()
			require.ErrorContains(t, checkBootstrap(b), tc.want)
		})
	}
	t.Run("the a2a listener to the admin API", func(t *testing.T) {
		s := loadSidecar(t)
		s.route("a2a").GetRoute().ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: "envoy_admin"}
		require.ErrorContains(t, checkBootstrap(s.pack(t)), `cluster "envoy_admin" is Envoy's admin API, reached by the stats listener's GET /stats/prometheus only`)
	})
}
