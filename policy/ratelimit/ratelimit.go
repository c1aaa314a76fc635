// Package ratelimit is capgate's path to Envoy's global rate-limit service (envoyproxy/ratelimit): the descriptor entries ext_authz puts into dynamic metadata, the rate_limits Envoy builds from them, and the service's configuration generated from the quota plans.
//
// One call may be under several quotas. Each applied quota fills one slot of
// ext_authz's dynamic metadata (namespace envoy.filters.http.ext_authz, key
// "quota_<i>"): its id, the values of its counter key's parts and the hits it
// costs. Envoy's route has one rate_limits entry per slot (EnvoyRateLimits):
// an empty slot sends no descriptor, and a filled one sends
//
//	(capgate_quota, <id>) (caller, …) (tenant, …) (capability, …) (cost_class, …)
//
// with only the parts the quota's key names, in that fixed order, and
// hits_addend = the call's cost. The service's configuration (Config) has
// one descriptor tree per quota id, the same parts as value-less keys (one
// counter per distinct value) and the limit at the leaf.
package ratelimit

import (
	"strconv"
)

// Names shared by ext_authz (which writes the metadata), Envoy's rate_limits
// (which read it) and the service's configuration (which matches it).
const (
	// Domain is the rate-limit service domain capgate's descriptors use.
	Domain = "capgate"
	// MetadataNamespace is where ext_authz's dynamic metadata lands in Envoy.
	MetadataNamespace = "envoy.filters.http.ext_authz"
	// Slots is how many quotas one call can carry to the service. A call
	// under more quotas is refused by ext_authz (it could not be counted
	// whole).
	Slots = 4
	// KeyQuota is the first descriptor entry: the quota's id.
	KeyQuota = "capgate_quota"
	// FieldID and FieldHits are a slot's id and hits (the call's cost, a
	// decimal string, as Envoy's hits_addend format reads it).
	FieldID   = "id"
	FieldHits = "hits"

	// The counter key's parts, in descriptor order.
	PartCaller     = "caller"
	PartTenant     = "tenant"
	PartCapability = "capability"
	PartCostClass  = "cost_class"
)

// Parts returns the counter key's parts in the order their descriptor
// entries follow the quota entry.
func Parts() []string {
	return []string{PartCaller, PartTenant, PartCapability, PartCostClass}
}

// SlotKey is the metadata key of slot i.
func SlotKey(i int) string { return "quota_" + strconv.Itoa(i) }
