package envoy

import (
	"os"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/policy/ratelimit"
)

func readRateLimitVariant(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("bootstrap-ratelimit.yaml")
	require.NoError(t, err)
	return string(data)
}

// TestRateLimitVariantMatches: bootstrap-ratelimit.yaml is bootstrap.yaml
// plus the ratelimit filter, the checked route's rate limits (exactly
// RateLimits()) and the ratelimit cluster; everything else is the same.
func TestRateLimitVariantMatches(t *testing.T) {
	plain, err := parseBootstrap(bootstrapYAML)
	require.NoError(t, err)
	rl, err := parseBootstrap([]byte(readRateLimitVariant(t)))
	require.NoError(t, err)
	require.NoError(t, validateBootstrap(rl))
	require.NoError(t, checkBootstrap(rl))

	require.True(t, proto.Equal(plain.GetAdmin(), rl.GetAdmin()), "admin")
	require.True(t, proto.Equal(plain.GetOverloadManager(), rl.GetOverloadManager()), "overload_manager")
	var extra []string
	for _, c := range rl.GetStaticResources().GetClusters() {
		found := false
		for _, p := range plain.GetStaticResources().GetClusters() {
			found = found || proto.Equal(c, p)
		}
		if !found {
			extra = append(extra, c.GetName())
		}
	}
	require.Equal(t, []string{"ratelimit"}, extra, "the clusters but the rate-limit service's are bootstrap.yaml's")

	// Without the filter and the per-route config, the listener is bootstrap.yaml's.
	a2a := rl.GetStaticResources().GetListeners()[0]
	hcm := hcmOf(t, a2a)
	var perRoute *ratelimitv3.RateLimitPerRoute
	filters := hcm.GetHttpFilters()[:0]
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() != "envoy.filters.http.ratelimit" {
			filters = append(filters, f)
		}
	}
	hcm.HttpFilters = filters
	for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if a := r.GetTypedPerFilterConfig()["envoy.filters.http.ratelimit"]; a != nil {
				perRoute = &ratelimitv3.RateLimitPerRoute{}
				require.NoError(t, a.UnmarshalTo(perRoute))
				delete(r.TypedPerFilterConfig, "envoy.filters.http.ratelimit")
				if len(r.TypedPerFilterConfig) == 0 {
					r.TypedPerFilterConfig = nil
				}
			}
		}
	}
	require.NotNil(t, perRoute)
	require.Len(t, perRoute.GetRateLimits(), ratelimit.Slots)
	for i, want := range RateLimits() {
		require.True(t, proto.Equal(want, perRoute.GetRateLimits()[i]), "slot %d", i)
	}
	require.True(t, proto.Equal(hcmOf(t, plain.GetStaticResources().GetListeners()[0]), hcm), "the a2a listener, less the rate limiting, is bootstrap.yaml's")
}

// TestCheckRateLimit: what would leave quotas uncounted, or count them
// open, fails the check.
func TestCheckRateLimit(t *testing.T) {
	y := readRateLimitVariant(t)
	filterStart := strings.Index(y, "                  - name: envoy.filters.http.ratelimit\n")
	routerStart := strings.Index(y, "                  # 3. router")
	require.Positive(t, filterStart)
	require.Greater(t, routerStart, filterStart)
	filter := y[filterStart:routerStart]
	authzStart := strings.Index(y, "                  # 1. ext_authz")
	require.Positive(t, authzStart)
	slot3 := strings.Index(y, `                              - hits_addend: {format: "%DYNAMIC_METADATA(envoy.filters.http.ext_authz:quota_3:hits)%"}`)
	require.Positive(t, slot3)
	slot3End := strings.Index(y[slot3:], "\n\n")
	require.Positive(t, slot3End)

	tests := []struct {
		name string
		edit func(string) string
		want string
	}{
		{"fails open", func(s string) string {
			return strings.Replace(s, "failure_mode_deny: true", "failure_mode_deny: false", 1)
		}, "failure_mode_deny is false"},
		{"another domain", func(s string) string {
			return strings.Replace(s, "domain: capgate", "domain: other", 1)
		}, `domain is "other"`},
		{"no cluster", func(s string) string {
			return strings.Replace(s, "cluster_name: ratelimit", "cluster_name: nowhere", 1)
		}, `cluster "nowhere" is not defined`},
		{"before ext_authz", func(s string) string {
			s = strings.Replace(s, filter, "", 1)
			return s[:authzStart] + filter + s[authzStart:]
		}, "comes before ext_authz"},
		{"a slot missing", func(s string) string {
			return s[:slot3] + s[slot3+slot3End+1:]
		}, "lack quota slot 3"},
		{"a part read from elsewhere", func(s string) string {
			return strings.Replace(s, "path: [{key: quota_1}, {key: tenant}]", "path: [{key: quota_1}, {key: caller}]", 1)
		}, "lack quota slot 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := tt.edit(y)
			require.NotEqual(t, y, edited)
			b, err := parseBootstrap([]byte(edited))
			require.NoError(t, err)
			require.ErrorContains(t, checkBootstrap(b), tt.want)
		})
	}
}

func hcmOf(t *testing.T, l *listenerv3.Listener) *hcmv3.HttpConnectionManager {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{}
	require.NoError(t, l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm))
	return hcm
}
