package envoy

import (
	"os"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// bootstrapFiles are every Envoy bootstrap in this folder; each must parse,
// validate and pass Check.
var bootstrapFiles = []string{"bootstrap.yaml", "bootstrap-tls.yaml"}

func TestBootstrapFiles(t *testing.T) {
	for _, name := range bootstrapFiles {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(name)
			require.NoError(t, err)
			b, err := Parse(data)
			require.NoError(t, err)
			require.NoError(t, Validate(b))
			require.NoError(t, Check(b))
		})
	}
}

func TestDefaultBootstrap(t *testing.T) {
	b, err := DefaultBootstrap()
	require.NoError(t, err)
	require.NoError(t, Check(b))

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
			old:     "port_value: 9901",
			new:     "port_value: 70000",
			wantErr: "PortValue",
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
			b, err := Parse([]byte(data))
			if tt.inParse {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.ErrorContains(t, Validate(b), tt.wantErr)
		})
	}
}

func TestCheckTLSSecrets(t *testing.T) {
	data, err := os.ReadFile("bootstrap-tls.yaml")
	require.NoError(t, err)
	b, err := Parse(data)
	require.NoError(t, err)
	b.StaticResources.Secrets = b.StaticResources.Secrets[1:]
	require.ErrorContains(t, Check(b), `SDS secret "capgate_server_cert" is not defined in static_resources.secrets`)
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
	b, err := Parse(bootstrapYAML)
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
		wantErr []string // each must appear; nil means Check passes
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
			wantErr: []string{`route "public-agent-card" (routes[0]): cluster "capgate_gateway" is not defined`, `route "a2a" (routes[1]): cluster "capgate_gateway" is not defined`},
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
			name: "catch-all route skips the check",
			mutate: func(t *testing.T, s *sidecar) {
				s.route("a2a").TypedPerFilterConfig = disabled(t)
			},
			wantErr: []string{`route "a2a" (routes[1]): disables ext_authz, but only the public card route`},
		},
		{
			name: "catch-all route skips the check through FilterConfig",
			mutate: func(t *testing.T, s *sidecar) {
				s.route("a2a").TypedPerFilterConfig = map[string]*anypb.Any{
					"envoy.filters.http.ext_authz": mustAny(t, &routev3.FilterConfig{Disabled: true}),
				}
			},
			wantErr: []string{`route "a2a" (routes[1]): disables ext_authz`},
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
			err := Check(s.pack(t))
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
