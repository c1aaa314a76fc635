package envoy

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"sort"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	downstreamconnsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/config"

	// Extensions the configs name in typed_config only: imported for their
	// registration in protoregistry.GlobalTypes, which protojson and
	// anypb.UnmarshalNew resolve "@type" against.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
)

// Names and limits the sidecar configuration is checked against.
const (
	// PublicCardPath is the public card's path, served without an ext_authz check (GET/HEAD
	// only), like PublicCardPathV03, where A2A 0.3 clients look for it.
	PublicCardPath    = "/.well-known/agent-card.json"
	PublicCardPathV03 = "/.well-known/agent.json"
	// MinRequestBodyBytes is the least body ext_authz must buffer for capgate:
	// capgate's own maximum request body (config.DefaultMaxBodyBytes).
	MinRequestBodyBytes = 1 << 20
	// MinStreamIdleTimeout is what a streaming route's idle timeout must
	// exceed: capgate's default limits.stream_idle_timeout, so that capgate's
	// own closing event reaches the client before Envoy resets the stream.
	MinStreamIdleTimeout = config.DefaultStreamIdleTimeout
	// DefaultHCMStreamIdleTimeout is Envoy's stream_idle_timeout when the
	// connection manager does not set one.
	DefaultHCMStreamIdleTimeout = 5 * time.Minute
	// StatsPath is Envoy's Prometheus metrics on its admin API: the one path
	// a listener without ext_authz (the stats listener) may send there.
	StatsPath = "/stats/prometheus"

	monitorFixedHeap        = "envoy.resource_monitors.fixed_heap"
	monitorDownstreamConns  = "envoy.resource_monitors.global_downstream_max_connections"
	actionStopAcceptingReqs = "envoy.overload_actions.stop_accepting_requests"
)

// parseBootstrap reads an Envoy v3 bootstrap from YAML (or JSON) strictly: unknown
// fields, unknown "@type"s and bad enum values are errors, as they are to Envoy.
func parseBootstrap(data []byte) (*bootstrapv3.Bootstrap, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse bootstrap yaml: %w", err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("convert bootstrap yaml to json: %w", err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(js, b); err != nil {
		return nil, fmt.Errorf("decode bootstrap: %w", err)
	}
	return b, nil
}

// validateBootstrap runs Envoy's proto constraints (protoc-gen-validate) over the whole
// bootstrap. ValidateAll does not look inside google.protobuf.Any, so every
// typed_config (and any Any nested in one, such as the HTTP filters inside the
// HTTP connection manager) is unpacked and validated too. An Any whose type is
// not linked in is an error: it could not be checked.
func validateBootstrap(b *bootstrapv3.Bootstrap) error {
	var errs []error
	if err := b.ValidateAll(); err != nil {
		errs = append(errs, fmt.Errorf("bootstrap: %w", err))
	}
	errs = append(errs, validateAnys(b.ProtoReflect(), "bootstrap")...)
	return errors.Join(errs...)
}

// validateAnys walks every populated message field of m and validates each Any
// it finds, recursively.
func validateAnys(m protoreflect.Message, path string) []error {
	var errs []error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			if fd.Message() == nil {
				return true
			}
			l := v.List()
			for i := range l.Len() {
				errs = append(errs, validateMessage(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))...)
			}
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				return true
			}
			mp := v.Map()
			keys := make([]string, 0, mp.Len())
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k.String())
				return true
			})
			sort.Strings(keys)
			for _, k := range keys {
				mv := mp.Get(protoreflect.ValueOfString(k).MapKey())
				errs = append(errs, validateMessage(mv.Message(), fmt.Sprintf("%s[%s]", p, k))...)
			}
		case fd.Message() != nil:
			errs = append(errs, validateMessage(v.Message(), p)...)
		}
		return true
	})
	return errs
}

func validateMessage(m protoreflect.Message, path string) []error {
	a, ok := m.Interface().(*anypb.Any)
	if !ok {
		return validateAnys(m, path)
	}
	inner, err := a.UnmarshalNew()
	if err != nil {
		return []error{fmt.Errorf("%s: unpack %s: %w", path, a.GetTypeUrl(), err)}
	}
	var errs []error
	if v, ok := inner.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", path, inner.ProtoReflect().Descriptor().FullName(), err))
		}
	}
	return append(errs, validateAnys(inner.ProtoReflect(), path)...)
}

// checkBootstrap enforces what capgate needs from an Envoy bootstrap, beyond proto
// validity, and returns every problem found (joined):
//
//   - every cluster a route or an ext_authz filter names is defined, and every
//     static SDS secret a listener's TLS context names;
//   - every HTTP connection manager runs ext_authz, enabled, before the router;
//   - ext_authz fails closed (failure_mode_allow false, no shadow mode, no
//     partial enablement), speaks transport API V3 over gRPC to an HTTP/2
//     cluster, and sends the whole body (at least 1 MiB, no partial messages,
//     as bytes);
//   - only the public card route (exact path, GET/HEAD only) disables
//     ext_authz, and no route or virtual host weakens its body settings;
//   - a streaming route (timeout 0s) stays open longer than capgate's
//     limits.stream_idle_timeout default when silent;
//   - the overload manager limits downstream connections and watches the
//     heap (fixed_heap) with a stop_accepting_requests action, and every
//     cluster a route names has circuit breakers at least as large as that
//     connection limit.
//
// checkBootstrap expects a bootstrap that passed validateBootstrap.
func checkBootstrap(b *bootstrapv3.Bootstrap) error {
	c := checker{clusters: map[string]*clusterv3.Cluster{}, admin: map[string]bool{}}
	c.maxConns = c.checkOverload(b)
	adminPipe := b.GetAdmin().GetAddress().GetPipe().GetPath()
	for _, cl := range b.GetStaticResources().GetClusters() {
		if _, dup := c.clusters[cl.GetName()]; dup {
			c.addf("cluster %q: defined twice", cl.GetName())
		}
		c.clusters[cl.GetName()] = cl
		for _, e := range cl.GetLoadAssignment().GetEndpoints() {
			for _, le := range e.GetLbEndpoints() {
				if p := le.GetEndpoint().GetAddress().GetPipe().GetPath(); p != "" && p == adminPipe {
					c.admin[cl.GetName()] = true
				}
			}
		}
	}
	secrets := map[string]bool{}
	for _, sec := range b.GetStaticResources().GetSecrets() {
		secrets[sec.GetName()] = true
	}
	hcms := 0
	for _, l := range b.GetStaticResources().GetListeners() {
		for i, fc := range l.GetFilterChains() {
			c.checkSecrets(fmt.Sprintf("listener %q filter_chains[%d]", l.GetName(), i), fc.GetTransportSocket(), secrets)
			for _, f := range fc.GetFilters() {
				m, err := f.GetTypedConfig().UnmarshalNew()
				if err != nil {
					c.addf("listener %q: filter %q: %v", l.GetName(), f.GetName(), err)
					continue
				}
				if hcm, ok := m.(*hcmv3.HttpConnectionManager); ok {
					where := fmt.Sprintf("listener %q filter_chains[%d]", l.GetName(), i)
					if hasExtAuthz(hcm) {
						hcms++
						c.checkHCM(where, hcm)
					} else {
						c.checkStatsHCM(where, hcm)
					}
				}
			}
		}
	}
	if hcms == 0 {
		c.addf("no listener has an http_connection_manager")
	}
	if b.GetDynamicResources() != nil {
		c.addf("dynamic_resources: set; capgate's sidecar config is static so that it can be checked here")
	}
	return errors.Join(c.errs...)
}

type checker struct {
	clusters map[string]*clusterv3.Cluster
	admin    map[string]bool // clusters whose endpoint is Envoy's admin socket
	maxConns uint64          // global_downstream_max_connections; 0 when not set
	errs     []error
}

// checkOverload requires the global connection limit and a heap monitor
// that stops new requests, and returns the connection limit.
func (c *checker) checkOverload(b *bootstrapv3.Bootstrap) uint64 {
	om := b.GetOverloadManager()
	var maxConns uint64
	heap := false
	for _, m := range om.GetResourceMonitors() {
		cfg, err := m.GetTypedConfig().UnmarshalNew()
		if err != nil {
			c.addf("overload_manager: resource monitor %q: %v", m.GetName(), err)
			continue
		}
		switch cfg := cfg.(type) {
		case *downstreamconnsv3.DownstreamConnectionsConfig:
			maxConns = uint64(cfg.GetMaxActiveDownstreamConnections())
		case *fixedheapv3.FixedHeapConfig:
			heap = m.GetName() == monitorFixedHeap && cfg.GetMaxHeapSizeBytes() > 0
		}
	}
	if maxConns == 0 {
		c.addf("overload_manager: no %s monitor: downstream connections are unbounded", monitorDownstreamConns)
	}
	stops := false
	for _, a := range om.GetActions() {
		if a.GetName() != actionStopAcceptingReqs {
			continue
		}
		for _, t := range a.GetTriggers() {
			stops = stops || t.GetName() == monitorFixedHeap
		}
	}
	if !heap || !stops {
		c.addf("overload_manager: no %s monitor (max_heap_size_bytes) triggering %s: buffered bodies could exhaust memory and get Envoy OOM-killed", monitorFixedHeap, actionStopAcceptingReqs)
	}
	return maxConns
}

// checkCircuitBreakers: a cluster routes send streams to, or ext_authz its
// checks, must admit as many concurrent connections and requests as the
// listener admits connections. Envoy's default is 1,024 of each.
func (c *checker) checkCircuitBreakers(where, name string) {
	cl, ok := c.clusters[name]
	if !ok || c.maxConns == 0 {
		return
	}
	const envoyDefault = 1024
	var th *clusterv3.CircuitBreakers_Thresholds
	for _, t := range cl.GetCircuitBreakers().GetThresholds() {
		if t.GetPriority() == corev3.RoutingPriority_DEFAULT {
			th = t
		}
	}
	limit := func(v *wrapperspb.UInt32Value) uint64 {
		if v == nil {
			return envoyDefault
		}
		return uint64(v.GetValue())
	}
	for _, l := range []struct {
		field string
		value uint64
	}{
		{"max_connections", limit(th.GetMaxConnections())},
		{"max_pending_requests", limit(th.GetMaxPendingRequests())},
		{"max_requests", limit(th.GetMaxRequests())},
	} {
		if l.value < c.maxConns {
			c.addf("%s: cluster %q: circuit_breakers (DEFAULT priority) %s is %d, below the %d downstream connections the listener admits: long streams would overflow it (503)",
				where, name, l.field, l.value, c.maxConns)
		}
	}
}

func (c *checker) addf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// checkSecrets: every SDS secret a downstream TLS context names without an
// sds_config must be a static secret, or Envoy refuses the listener.
func (c *checker) checkSecrets(where string, ts *corev3.TransportSocket, secrets map[string]bool) {
	if ts == nil {
		return
	}
	m, err := ts.GetTypedConfig().UnmarshalNew()
	if err != nil {
		c.addf("%s: transport_socket: %v", where, err)
		return
	}
	tlsCtx, ok := m.(*tlsv3.DownstreamTlsContext)
	if !ok {
		return
	}
	refs := slices.Clone(tlsCtx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs())
	if v := tlsCtx.GetCommonTlsContext().GetValidationContextSdsSecretConfig(); v != nil {
		refs = append(refs, v)
	}
	for _, r := range refs {
		if r.GetSdsConfig() == nil && !secrets[r.GetName()] {
			c.addf("%s: transport_socket: SDS secret %q is not defined in static_resources.secrets", where, r.GetName())
		}
	}
}

func (c *checker) checkHCM(where string, hcm *hcmv3.HttpConnectionManager) {
	authzName, authzAt, routerAt := "", -1, -1
	rlName, rlAt := "", -1
	for i, f := range hcm.GetHttpFilters() {
		m, err := f.GetTypedConfig().UnmarshalNew()
		if err != nil {
			c.addf("%s: http filter %q: %v", where, f.GetName(), err)
			continue
		}
		switch cfg := m.(type) {
		case *extauthzv3.ExtAuthz:
			if authzAt >= 0 {
				c.addf("%s: http filter %q: a second ext_authz filter", where, f.GetName())
				continue
			}
			authzName, authzAt = f.GetName(), i
			if f.GetDisabled() {
				c.addf("%s: http filter %q: disabled: true turns the check off unless a route enables it", where, f.GetName())
			}
			if f.GetIsOptional() {
				c.addf("%s: http filter %q: is_optional: true lets Envoy run without the check", where, f.GetName())
			}
			c.checkExtAuthz(fmt.Sprintf("%s: http filter %q", where, f.GetName()), cfg)
		case *ratelimitv3.RateLimit:
			rlName, rlAt = f.GetName(), i
			c.checkRateLimitFilter(fmt.Sprintf("%s: http filter %q", where, f.GetName()), cfg)
		case *routerv3.Router:
			routerAt = i
		}
	}
	switch {
	case rlAt < 0:
	case rlAt < authzAt:
		c.addf("%s: the ratelimit filter (http_filters[%d]) comes before ext_authz (http_filters[%d]): the quota descriptors it reads are not set yet", where, rlAt, authzAt)
	case routerAt >= 0 && rlAt > routerAt:
		c.addf("%s: the ratelimit filter (http_filters[%d]) comes after the router (http_filters[%d]): it would never run", where, rlAt, routerAt)
	}
	switch {
	case authzAt < 0:
		c.addf("%s: no envoy.extensions.filters.http.ext_authz.v3.ExtAuthz http filter: requests would reach capgate unchecked", where)
	case routerAt < 0:
		c.addf("%s: no router http filter", where)
	case authzAt > routerAt:
		c.addf("%s: ext_authz (http_filters[%d]) comes after the router (http_filters[%d]): it would never run", where, authzAt, routerAt)
	}
	rc := hcm.GetRouteConfig()
	if rc == nil {
		c.addf("%s: no inline route_config (RDS and scoped routes cannot be checked)", where)
		return
	}
	cardRoutes := map[string]bool{}
	for _, vh := range rc.GetVirtualHosts() {
		vwhere := fmt.Sprintf("%s: virtual host %q", where, vh.GetName())
		if authzName != "" {
			if disabled, problem := perRouteAuthz(vh.GetTypedPerFilterConfig()[authzName]); disabled {
				c.addf("%s: disables ext_authz for the whole virtual host", vwhere)
			} else if problem != "" {
				c.addf("%s: %s", vwhere, problem)
			}
		}
		for i, r := range vh.GetRoutes() {
			rwhere := fmt.Sprintf("%s: route %q (routes[%d])", vwhere, r.GetName(), i)
			c.checkRouteClusters(rwhere, r)
			c.checkStreamIdle(rwhere, r, hcm)
			if authzName == "" {
				continue
			}
			disabled, problem := perRouteAuthz(r.GetTypedPerFilterConfig()[authzName])
			if problem != "" {
				c.addf("%s: %s", rwhere, problem)
			}
			isCard := isPublicCardRoute(r)
			if rlName != "" && !isCard && r.GetRoute() != nil {
				c.checkRouteRateLimits(rwhere, r.GetTypedPerFilterConfig()[rlName])
			}
			switch {
			case disabled && !isCard:
				c.addf("%s: disables ext_authz, but only the public card routes (exact path %s or %s, GET/HEAD only) may", rwhere, PublicCardPath, PublicCardPathV03)
			case isCard && !disabled:
				c.addf("%s: the public card route does not disable ext_authz (typed_per_filter_config %q: ExtAuthzPerRoute{disabled: true})", rwhere, authzName)
			case isCard:
				cardRoutes[r.GetMatch().GetPath()] = true
			}
			for _, wc := range r.GetRoute().GetWeightedClusters().GetClusters() {
				if disabled, problem := perRouteAuthz(wc.GetTypedPerFilterConfig()[authzName]); disabled || problem != "" {
					c.addf("%s: weighted cluster %q: overrides ext_authz", rwhere, wc.GetName())
				}
			}
		}
	}
	for _, p := range []string{PublicCardPath, PublicCardPathV03} {
		if authzName != "" && !cardRoutes[p] {
			c.addf("%s: no route serves %s (GET/HEAD) without the ext_authz check: the public card would need a credential", where, p)
		}
	}
}

func (c *checker) checkExtAuthz(where string, cfg *extauthzv3.ExtAuthz) {
	if cfg.GetFailureModeAllow() {
		c.addf("%s: failure_mode_allow is true: a capgate outage would let every request through unchecked", where)
	}
	if cfg.GetShadowMode() {
		c.addf("%s: shadow_mode is true: denials would be logged, not enforced", where)
	}
	if cfg.GetFilterEnabled() != nil || cfg.GetFilterEnabledMetadata() != nil {
		c.addf("%s: filter_enabled / filter_enabled_metadata set: some requests would skip the check", where)
	}
	if cfg.GetTransportApiVersion() != corev3.ApiVersion_V3 {
		c.addf("%s: transport_api_version is %s, want V3 (capgate serves envoy.service.auth.v3.Authorization)", where, cfg.GetTransportApiVersion())
	}
	c.checkBody(where, cfg.GetWithRequestBody())
	gs := cfg.GetGrpcService()
	if gs == nil {
		c.addf("%s: no grpc_service: capgate serves ext_authz over gRPC only", where)
		return
	}
	name := gs.GetEnvoyGrpc().GetClusterName()
	if name == "" {
		c.addf("%s: grpc_service has no envoy_grpc.cluster_name", where)
		return
	}
	cl, ok := c.clusters[name]
	if !ok {
		c.addf("%s: grpc_service cluster %q is not defined in static_resources.clusters", where, name)
		return
	}
	if !isHTTP2(cl) {
		c.addf("%s: grpc_service cluster %q is not HTTP/2 (typed_extension_protocol_options %q explicit_http_config.http2_protocol_options): gRPC needs it",
			where, name, "envoy.extensions.upstreams.http.v3.HttpProtocolOptions")
	}
	c.checkCircuitBreakers(where, name)
}

func (c *checker) checkBody(where string, body *extauthzv3.BufferSettings) {
	switch body {
	case nil:
		c.addf("%s: with_request_body is not set: JSON-RPC methods are in the body, capgate would refuse every JSON-RPC call", where)
	default:
		if body.GetMaxRequestBytes() < MinRequestBodyBytes {
			c.addf("%s: with_request_body.max_request_bytes is %d, want at least %d (capgate's maximum body)", where, body.GetMaxRequestBytes(), MinRequestBodyBytes)
		}
		if body.GetAllowPartialMessage() {
			c.addf("%s: with_request_body.allow_partial_message is true: capgate would decide on a truncated body", where)
		}
		if !body.GetPackAsBytes() {
			c.addf("%s: with_request_body.pack_as_bytes is false: capgate reads the body from raw_body", where)
		}
	}
}

// checkStreamIdle: a route without an overall timeout carries capgate's
// streams; its idle timeout (the route's, else the connection manager's)
// must outlast capgate's own stream idle timeout, or be off.
func (c *checker) checkStreamIdle(where string, r *routev3.Route, hcm *hcmv3.HttpConnectionManager) {
	ra := r.GetRoute()
	if ra == nil || ra.GetTimeout() == nil || ra.GetTimeout().AsDuration() != 0 {
		return
	}
	idle, from := DefaultHCMStreamIdleTimeout, "the connection manager's default stream_idle_timeout"
	switch {
	case ra.GetIdleTimeout() != nil:
		idle, from = ra.GetIdleTimeout().AsDuration(), "idle_timeout"
	case hcm.GetStreamIdleTimeout() != nil:
		idle, from = hcm.GetStreamIdleTimeout().AsDuration(), "the connection manager's stream_idle_timeout"
	}
	if idle != 0 && idle <= MinStreamIdleTimeout {
		c.addf("%s: streams (timeout 0s) are cut after %s of silence (%s), not more than capgate's limits.stream_idle_timeout (%s): Envoy would reset the stream before capgate ends it",
			where, idle, from, MinStreamIdleTimeout)
	}
}

// hasExtAuthz reports whether a connection manager has an ext_authz http filter.
func hasExtAuthz(hcm *hcmv3.HttpConnectionManager) bool {
	for _, f := range hcm.GetHttpFilters() {
		if m, err := f.GetTypedConfig().UnmarshalNew(); err == nil {
			if _, ok := m.(*extauthzv3.ExtAuthz); ok {
				return true
			}
		}
	}
	return false
}

// checkStatsHCM: a connection manager without ext_authz reaches neither
// capgate nor the agent, so it may only serve Envoy's own metrics: each of
// its routes answers directly, or sends exactly GET StatsPath, unrewritten,
// to a cluster of Envoy's admin socket. Anything else would be a way around
// the check (or to the admin API's /quitquitquit).
func (c *checker) checkStatsHCM(where string, hcm *hcmv3.HttpConnectionManager) {
	unchecked := where + ": no envoy.extensions.filters.http.ext_authz.v3.ExtAuthz http filter: requests would reach capgate unchecked"
	rc := hcm.GetRouteConfig()
	if rc == nil {
		c.addf("%s (and no inline route_config to show it serves only %s)", unchecked, StatsPath)
		return
	}
	for _, vh := range rc.GetVirtualHosts() {
		for i, r := range vh.GetRoutes() {
			rwhere := fmt.Sprintf("virtual host %q: route %q (routes[%d])", vh.GetName(), r.GetName(), i)
			if r.GetDirectResponse() != nil {
				continue
			}
			ra := r.GetRoute()
			if ra == nil || !c.admin[ra.GetCluster()] {
				c.addf("%s (%s forwards; without ext_authz a listener may only send GET %s to Envoy's admin socket and answer the rest directly)", unchecked, rwhere, StatsPath)
				continue
			}
			getOnly := false
			for _, h := range r.GetMatch().GetHeaders() {
				getOnly = getOnly || (h.GetName() == ":method" && h.GetStringMatch().GetExact() == "GET" && !h.GetInvertMatch())
			}
			switch {
			case r.GetMatch().GetPath() != StatsPath:
				c.addf("%s: %s: Envoy's admin API is reached by the exact path %s only", where, rwhere, StatsPath)
			case !getOnly:
				c.addf("%s: %s: Envoy's admin API is reached by GET only (:method exact GET)", where, rwhere)
			case ra.GetPrefixRewrite() != "" || ra.GetRegexRewrite() != nil || ra.GetPathRewritePolicy() != nil:
				c.addf("%s: %s: rewrites the path to Envoy's admin API", where, rwhere)
			case len(ra.GetRequestMirrorPolicies()) > 0:
				c.addf("%s: %s: mirrors requests", where, rwhere)
			}
		}
	}
}

func (c *checker) checkRouteClusters(where string, r *routev3.Route) {
	ra := r.GetRoute()
	if ra == nil {
		return
	}
	var names []string
	switch {
	case ra.GetCluster() != "":
		names = append(names, ra.GetCluster())
	case ra.GetWeightedClusters() != nil:
		for _, wc := range ra.GetWeightedClusters().GetClusters() {
			names = append(names, wc.GetName())
		}
	default:
		c.addf("%s: the upstream cluster is chosen at request time (cluster_header / specifier plugin); only named clusters can be checked", where)
	}
	for _, m := range ra.GetRequestMirrorPolicies() {
		names = append(names, m.GetCluster())
	}
	for _, n := range names {
		if _, ok := c.clusters[n]; !ok {
			c.addf("%s: cluster %q is not defined in static_resources.clusters", where, n)
		}
		if c.admin[n] {
			c.addf("%s: cluster %q is Envoy's admin API, reached by the stats listener's GET %s only", where, n, StatsPath)
		}
		c.checkCircuitBreakers(where, n)
	}
}

// perRouteAuthz reads a per-route ext_authz override: whether it disables the
// check, and what else it does that weakens the check.
func perRouteAuthz(a *anypb.Any) (disabled bool, problem string) {
	if a == nil {
		return false, ""
	}
	m, err := a.UnmarshalNew()
	if err != nil {
		return false, err.Error()
	}
	if fc, ok := m.(*routev3.FilterConfig); ok {
		if fc.GetDisabled() {
			return true, ""
		}
		if fc.GetConfig() == nil {
			return false, ""
		}
		if m, err = fc.GetConfig().UnmarshalNew(); err != nil {
			return false, err.Error()
		}
	}
	pr, ok := m.(*extauthzv3.ExtAuthzPerRoute)
	if !ok {
		return false, fmt.Sprintf("ext_authz override is a %s, want ExtAuthzPerRoute", m.ProtoReflect().Descriptor().FullName())
	}
	if pr.GetDisabled() {
		return true, ""
	}
	if _, ok := pr.GetOverride().(*extauthzv3.ExtAuthzPerRoute_Disabled); ok {
		// Envoy's rule is bool {const: true}; the Go validators do not enforce it.
		return false, "ExtAuthzPerRoute disabled: false is rejected by Envoy (only true is allowed)"
	}
	cs := pr.GetCheckSettings()
	switch {
	case cs.GetDisableRequestBodyBuffering():
		return false, "check_settings.disable_request_body_buffering: capgate would be asked without the body"
	case cs.GetWithRequestBody() != nil && (cs.GetWithRequestBody().GetAllowPartialMessage() ||
		cs.GetWithRequestBody().GetMaxRequestBytes() < MinRequestBodyBytes || !cs.GetWithRequestBody().GetPackAsBytes()):
		return false, "check_settings.with_request_body weakens the body settings (partial, < 1 MiB or not as bytes)"
	case cs.GetGrpcService() != nil || cs.GetHttpService() != nil:
		return false, "check_settings overrides the authorization service"
	}
	return false, ""
}

// isPublicCardRoute reports whether r matches exactly a public card path,
// case-sensitively, and only the methods GET and HEAD: one of its :method
// matchers (headers are ANDed) is an exact GET or HEAD, or a regular
// expression whose every match is GET or HEAD.
func isPublicCardRoute(r *routev3.Route) bool {
	m := r.GetMatch()
	if (m.GetPath() != PublicCardPath && m.GetPath() != PublicCardPathV03) || (m.GetCaseSensitive() != nil && !m.GetCaseSensitive().GetValue()) {
		return false
	}
	for _, h := range m.GetHeaders() {
		if h.GetName() != ":method" || h.GetInvertMatch() || h.GetTreatMissingHeaderAsEmpty() {
			continue
		}
		sm := h.GetStringMatch()
		if sm == nil || sm.GetIgnoreCase() {
			continue
		}
		var methods []string
		switch {
		case sm.GetExact() != "":
			methods = []string{sm.GetExact()}
		case sm.GetSafeRegex() != nil:
			var ok bool
			if methods, ok = regexLanguage(sm.GetSafeRegex().GetRegex(), 16); !ok {
				continue
			}
		}
		if len(methods) > 0 && !slices.ContainsFunc(methods, func(m string) bool { return m != "GET" && m != "HEAD" }) {
			return true
		}
	}
	return false
}

// regexLanguage lists every string an RE2 expression matches in full, as
// Envoy's safe_regex does, when they are finitely many (at most limit);
// ok is false for anything else (repetition, any-char, large classes,
// anchors it cannot place).
func regexLanguage(expr string, limit int) (_ []string, ok bool) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, false
	}
	var lang func(re *syntax.Regexp) ([]string, bool)
	lang = func(re *syntax.Regexp) ([]string, bool) {
		switch re.Op {
		case syntax.OpEmptyMatch, syntax.OpBeginText, syntax.OpEndText, syntax.OpBeginLine, syntax.OpEndLine:
			return []string{""}, true
		case syntax.OpLiteral:
			if re.Flags&syntax.FoldCase != 0 {
				return nil, false
			}
			return []string{string(re.Rune)}, true
		case syntax.OpCharClass:
			var out []string
			for i := 0; i < len(re.Rune); i += 2 {
				for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
					if len(out) >= limit {
						return nil, false
					}
					out = append(out, string(r))
				}
			}
			return out, true
		case syntax.OpCapture:
			return lang(re.Sub[0])
		case syntax.OpQuest:
			sub, ok := lang(re.Sub[0])
			return append([]string{""}, sub...), ok
		case syntax.OpAlternate:
			var out []string
			for _, s := range re.Sub {
				l, ok := lang(s)
				if !ok || len(out)+len(l) > limit {
					return nil, false
				}
				out = append(out, l...)
			}
			return out, true
		case syntax.OpConcat:
			out := []string{""}
			for _, s := range re.Sub {
				l, ok := lang(s)
				if !ok || len(out)*len(l) > limit {
					return nil, false
				}
				next := make([]string, 0, len(out)*len(l))
				for _, a := range out {
					for _, b := range l {
						next = append(next, a+b)
					}
				}
				out = next
			}
			return out, true
		}
		return nil, false // repetition, any character, word boundaries, ...
	}
	return lang(re)
}

func isHTTP2(cl *clusterv3.Cluster) bool {
	a := cl.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	if a == nil {
		return false
	}
	var opts upstreamhttpv3.HttpProtocolOptions
	if err := a.UnmarshalTo(&opts); err != nil {
		return false
	}
	return opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}
