package ratelimit

import (
	"testing"
	"time"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/policy/quota"
)

func TestConfigRendersAndParses(t *testing.T) {
	cfg, err := Config([]Limit{
		{Quota: "paid.units", Parts: []string{quota.PartTenant}, Window: 24 * time.Hour, Limit: 10000},
		{Quota: "free.calls", Parts: []string{quota.PartCostClass, quota.PartCaller}, Window: time.Hour, Limit: 100},
	})
	require.NoError(t, err)
	// Sorted by id; parts in descriptor order whatever order they were named in.
	require.Equal(t, "free.calls", cfg.GetDescriptors()[0].GetValue())
	free := cfg.GetDescriptors()[0]
	require.Equal(t, KeyQuota, free.GetKey())
	require.Equal(t, quota.PartCaller, free.GetDescriptors()[0].GetKey())
	leaf := free.GetDescriptors()[0].GetDescriptors()[0]
	require.Equal(t, quota.PartCostClass, leaf.GetKey())
	require.Empty(t, leaf.GetValue(), "a value-less key: one counter per distinct value")
	require.Equal(t, rlsconfv3.RateLimitUnit_HOUR, leaf.GetRateLimit().GetUnit())
	require.EqualValues(t, 100, leaf.GetRateLimit().GetRequestsPerUnit())

	data, err := Render(cfg)
	require.NoError(t, err)
	require.Contains(t, string(data), "domain: capgate")
	back, err := Parse(data)
	require.NoError(t, err)
	require.True(t, proto.Equal(cfg, back), "%s", data)
}

func TestConfigRefuses(t *testing.T) {
	tests := []struct {
		name  string
		limit Limit
		want  string
	}{
		{"window", Limit{Quota: "q", Window: 10 * time.Minute, Limit: 1}, "window 10m0s"},
		{"zero limit", Limit{Quota: "q", Window: time.Minute}, "limit 0"},
		{"huge limit", Limit{Quota: "q", Window: time.Minute, Limit: 1 << 40}, "limit 1099511627776"},
		{"unknown part", Limit{Quota: "q", Parts: []string{"issuer"}, Window: time.Minute, Limit: 1}, `key part "issuer"`},
		{"repeated part", Limit{Quota: "q", Parts: []string{quota.PartCaller, quota.PartCaller}, Window: time.Minute, Limit: 1}, "named twice"},
		{"no id", Limit{Window: time.Minute, Limit: 1}, "no id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Config([]Limit{tt.limit})
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err := Config([]Limit{{Quota: "q", Window: time.Minute, Limit: 1}, {Quota: "q", Window: time.Hour, Limit: 1}})
	require.ErrorContains(t, err, "defined twice")
}

// TestParseIsTheServiceLoader: what envoyproxy/ratelimit's loader refuses,
// Parse refuses; what it accepts (lower-case units), Parse accepts.
func TestParseIsTheServiceLoader(t *testing.T) {
	ok := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
	cfg, err := Parse([]byte(ok))
	require.NoError(t, err)
	require.Equal(t, rlsconfv3.RateLimitUnit_MINUTE, cfg.GetDescriptors()[0].GetRateLimit().GetUnit())
	for name, bad := range map[string]string{
		"no domain":      "descriptors:\n  - key: k\n",
		"unknown field":  "domain: d\ndescriptors:\n  - key: k\n    limit: 5\n",
		"unknown unit":   "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 5}\n",
		"no unit":        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 5}\n",
		"unlimited unit": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n",
		"empty key":      "domain: d\ndescriptors:\n  - value: v\n",
		"duplicate":      "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
		"self replaces":  "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: a, unit: second, requests_per_unit: 1, replaces: [{name: a}]}\n",
		"negative":       "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(bad))
			require.Error(t, err)
		})
	}
}
