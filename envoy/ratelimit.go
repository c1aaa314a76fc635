package envoy

import (
	"fmt"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/capgate/capgate/policy/ratelimit"
)

// RateLimits returns the rate_limits of the checked route when Envoy's
// global rate-limit service counts capgate's quotas (bootstrap-ratelimit.yaml
// carries them in the ratelimit filter's per-route config): one per metadata
// slot ext_authz fills. A slot ext_authz left empty has no quota id, so
// Envoy sends no descriptor for it; a key part the quota does not name is
// absent and skipped (skip_if_absent), so the descriptor holds exactly the
// quota's parts, in ratelimit.Parts order; the hits are the call's cost.
func RateLimits() []*routev3.RateLimit {
	out := make([]*routev3.RateLimit, 0, ratelimit.Slots)
	for i := range ratelimit.Slots {
		slot := ratelimit.SlotKey(i)
		entry := func(descriptorKey, field string, skipIfAbsent bool) *routev3.RateLimit_Action {
			return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_Metadata{
				Metadata: &routev3.RateLimit_Action_MetaData{
					DescriptorKey: descriptorKey,
					MetadataKey: &metadatav3.MetadataKey{
						Key: ratelimit.MetadataNamespace,
						Path: []*metadatav3.MetadataKey_PathSegment{
							{Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: slot}},
							{Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: field}},
						},
					},
					Source:       routev3.RateLimit_Action_MetaData_DYNAMIC,
					SkipIfAbsent: skipIfAbsent,
				},
			}}
		}
		rl := &routev3.RateLimit{
			Actions: []*routev3.RateLimit_Action{entry(ratelimit.KeyQuota, ratelimit.FieldID, false)},
			HitsAddend: &routev3.RateLimit_HitsAddend{
				Format: fmt.Sprintf("%%DYNAMIC_METADATA(%s:%s:%s)%%", ratelimit.MetadataNamespace, slot, ratelimit.FieldHits),
			},
		}
		for _, p := range ratelimit.Parts() {
			rl.Actions = append(rl.Actions, entry(p, p, true))
		}
		out = append(out, rl)
	}
	return out
}

// checkRateLimitFilter: the ratelimit filter counts capgate's quotas in
// capgate's domain, fails closed, and reaches the service over gRPC (HTTP/2)
// on a defined cluster.
func (c *checker) checkRateLimitFilter(where string, cfg *ratelimitv3.RateLimit) {
	if cfg.GetDomain() != ratelimit.Domain {
		c.addf("%s: domain is %q, want %q (the domain `capgate ratelimit-config` generates)", where, cfg.GetDomain(), ratelimit.Domain)
	}
	if !cfg.GetFailureModeDeny() {
		c.addf("%s: failure_mode_deny is false: a rate-limit service outage would admit every call unbudgeted (capgate's in-process quotas choose per quota)", where)
	}
	if cfg.GetFilterEnabled() != nil || cfg.GetFilterEnforced() != nil {
		c.addf("%s: filter_enabled / filter_enforced set: some calls would not be counted or not refused", where)
	}
	rls := cfg.GetRateLimitService()
	if rls.GetTransportApiVersion() != corev3.ApiVersion_V3 {
		c.addf("%s: rate_limit_service.transport_api_version is %s, want V3", where, rls.GetTransportApiVersion())
	}
	name := rls.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	cl, ok := c.clusters[name]
	switch {
	case name == "":
		c.addf("%s: rate_limit_service has no grpc_service.envoy_grpc.cluster_name", where)
	case !ok:
		c.addf("%s: rate_limit_service cluster %q is not defined in static_resources.clusters", where, name)
	case !isHTTP2(cl):
		c.addf("%s: rate_limit_service cluster %q is not HTTP/2: gRPC needs it", where, name)
	default:
		c.checkCircuitBreakers(where, name)
	}
}

// checkRouteRateLimits: a checked route carries, in the ratelimit filter's
// per-route config, every slot's rate limit exactly as RateLimits builds
// it, so that no quota ext_authz names goes uncounted.
func (c *checker) checkRouteRateLimits(where string, a *anypb.Any) {
	if a == nil {
		c.addf("%s: no ratelimit per-route config (RateLimitPerRoute with envoy.RateLimits): quotas would not be counted on it", where)
		return
	}
	var pr ratelimitv3.RateLimitPerRoute
	if err := a.UnmarshalTo(&pr); err != nil {
		c.addf("%s: ratelimit per-route config: %v", where, err)
		return
	}
	if d := pr.GetDomain(); d != "" && d != ratelimit.Domain {
		c.addf("%s: ratelimit per-route domain is %q, want %q", where, d, ratelimit.Domain)
	}
	for i, want := range RateLimits() {
		if !slices.ContainsFunc(pr.GetRateLimits(), func(got *routev3.RateLimit) bool { return proto.Equal(got, want) }) {
			c.addf("%s: ratelimit per-route rate_limits lack quota slot %d (%s) as envoy.RateLimits builds it", where, i, ratelimit.SlotKey(i))
		}
	}
}
