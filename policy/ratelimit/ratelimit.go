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
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/quota"
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
)

// Parts returns the counter key's parts (quota.KeyParts) in the order their
// descriptor entries follow the quota entry.
func Parts() []string { return slices.Clone(quota.KeyParts) }

// SlotKey is the metadata key of slot i.
func SlotKey(i int) string { return "quota_" + strconv.Itoa(i) }

// Metadata returns the slots ext_authz adds to its dynamic metadata for the
// quotas applied to one admitted call by caller (quota.Caller's value): slot
// i holds applied[i]'s id, its hits (the call's cost) and the value of each
// key part it names. A quota this call costs nothing under takes no slot
// (the service would count a zero as one). More quotas than Slots is an
// error: the call could not be counted whole, and ext_authz refuses it.
func Metadata(applied []quota.Applied, caller string) (map[string]*structpb.Value, error) {
	out := make(map[string]*structpb.Value, len(applied))
	i := 0
	for _, a := range applied {
		if a.Cost <= 0 {
			continue
		}
		if i == Slots {
			return nil, fmt.Errorf("%d quotas apply to the call; Envoy's rate limits carry %d", len(applied), Slots)
		}
		f := map[string]*structpb.Value{
			FieldID:   structpb.NewStringValue(a.ID),
			FieldHits: structpb.NewStringValue(strconv.FormatInt(a.Cost, 10)),
		}
		for _, p := range a.Key {
			v := p.Value
			if p.Name == quota.PartCaller {
				v = caller
			}
			f[p.Name] = structpb.NewStringValue(v)
		}
		out[SlotKey(i)] = structpb.NewStructValue(&structpb.Struct{Fields: f})
		i++
	}
	return out, nil
}

// Capability is one capability's own rate (its manifest quota.rate), for
// Limits.
type Capability struct {
	ID   string
	Rate quota.Rate
}

// CapabilityRateKey are the key parts of a capability's own rate quota.
func CapabilityRateKey() []string { return []string{quota.PartCaller, quota.PartCapability} }

// Limits lists what the service must count: every plan (quota id
// "plan.<id>", its key) and every capability's own rate ("rate.<id>", per
// caller and capability), from a snapshot's resolved plans (so a bundle
// serves as well as a config). A budget of units counts the call's cost as
// hits; one of calls counts 1.
func Limits(plans []compile.Plan, caps []Capability) ([]Limit, error) {
	var errs []error
	out := make([]Limit, 0, len(plans)+len(caps))
	for _, p := range plans {
		if p.Limit < 1 || p.WindowSeconds < 1 || len(p.Key) == 0 {
			errs = append(errs, fmt.Errorf("plan %q: no budget or key", p.ID))
			continue
		}
		out = append(out, Limit{Quota: "plan." + p.ID, Parts: p.Key, Window: time.Duration(p.WindowSeconds) * time.Second, Limit: uint64(p.Limit)})
	}
	for _, c := range caps {
		if c.Rate.IsZero() {
			continue
		}
		if c.Rate.Calls < 1 || c.Rate.Per < time.Second {
			errs = append(errs, fmt.Errorf("capability %q: rate %d per %s", c.ID, c.Rate.Calls, c.Rate.Per))
			continue
		}
		out = append(out, Limit{Quota: "rate." + c.ID, Parts: CapabilityRateKey(), Window: c.Rate.Per, Limit: uint64(c.Rate.Calls)})
	}
	return out, errors.Join(errs...)
}
