// Package quota holds capgate's quotas: the plans of the deployment config,
// the quota a capability declares in its manifest, and the quotas the policy
// decides apply to one call.
//
// The contract, shared by the policy, both doors and the Envoy rate-limit
// path:
//
//   - The config's `quotas:` (Config) declares a cost_class → units table
//     and plans: each a budget of calls or units per window, granted by
//     scopes, tenants and issuers (like entitlement), optionally only for
//     some capabilities or cost classes, counted per the key parts it names
//     (caller, tenant, capability, cost_class), failing closed or open when
//     the store cannot count (default: closed for unit budgets and open
//     for call budgets).
//   - A manifest capability's `quota:` (Capability) declares a rate per
//     caller and/or its cost in units, overriding the cost_class table.
//   - The one policy (rego capgate.authz) decides, with entitlement, which
//     quotas apply to a call: the decision's `quotas`, read strictly into
//     engine.Decision.Quotas as Applied values (a malformed entry is an
//     error, never a grant). Deny modules may add quotas (tighten), never
//     remove one. Rego never sees a counter.
//   - Admission charges each admitted call Cost against every Applied quota,
//     on the counter named by CounterKey, before the handler runs; a call
//     over any quota is refused with the time until it would fit.
package quota

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Unit is what a budget counts.
type Unit string

// Units.
const (
	// Calls counts admitted calls: each costs 1.
	Calls Unit = "calls"
	// Units counts cost units: a call costs its capability's units (the
	// manifest's quota.units, else the config's cost_classes entry for its
	// cost_class).
	Units Unit = "units"
)

// StoreErrorMode is what a quota does when the store cannot count.
type StoreErrorMode string

// Store error modes.
const (
	// FailClosed refuses the call (Unavailable, outcome not_run).
	FailClosed StoreErrorMode = "closed"
	// FailOpen admits the call uncounted (logged and counted in metrics).
	FailOpen StoreErrorMode = "open"
)

// StoreErrorModes are the modes, in documentation order.
var StoreErrorModes = []StoreErrorMode{FailClosed, FailOpen}

// Key part names: what a counter is kept per.
const (
	PartCaller     = "caller"     // issuer and subject of the caller
	PartTenant     = "tenant"     // the caller's tenant
	PartCapability = "capability" // the capability called
	PartCostClass  = "cost_class" // the capability's limits.cost_class
)

// KeyParts are the key part names, in documentation (and key) order.
var KeyParts = []string{PartCaller, PartTenant, PartCapability, PartCostClass}

// CostClassLimit is the manifest limit naming a capability's cost class.
const CostClassLimit = "cost_class"

// Config is the deployment config's `quotas:` section.
type Config struct {
	// CostClasses maps a cost_class (manifest limits.cost_class) to the
	// units one call costs.
	CostClasses map[string]int64 `yaml:"cost_classes" json:"cost_classes,omitempty"`
	// Plans are the budgets; every plan that applies to a call counts it.
	Plans []Plan `yaml:"plans" json:"plans,omitempty"`
	// Charge says which calls are counted beyond messages (see Charge).
	Charge Charge `yaml:"charge" json:"charge,omitzero"`
	// Counter is who counts the calls whose capability is known before
	// routing (admission's ChargedHere): "capgate" ("" too: capgate's own
	// store) or "envoy" (Envoy's global rate-limit service, from the
	// quotas ext_authz puts into its dynamic metadata; capgate then counts
	// only what the proxy cannot: new messages, routed at the gateway).
	Counter Counter `yaml:"counter" json:"counter,omitempty"`
}

// Counter is who counts the calls admission charges (Config.Counter).
type Counter string

// The counters.
const (
	CounterCapgate Counter = "capgate"
	CounterEnvoy   Counter = "envoy"
)

// Counters are the counters, in documentation order.
var Counters = []Counter{CounterCapgate, CounterEnvoy}

// Charge widens what is counted. By default only calls that run a
// capability are charged: a new message, a message continuing a task, and
// a method an extension adds. Cancellations and reads of one's own tasks
// (GetTask, ListTasks, SubscribeToTask, push-config operations) are free
// unless switched on here.
type Charge struct {
	Cancel bool `yaml:"cancel" json:"cancel,omitempty"`
	Reads  bool `yaml:"reads" json:"reads,omitempty"`
}

// Plan is one budget granted to callers.
type Plan struct {
	ID string `yaml:"id" json:"id"`
	// Grant says to whom the plan applies; empty: to every caller.
	Grant Grant `yaml:"grant" json:"grant,omitzero"`
	// Budget is how much per window.
	Budget Budget `yaml:"budget" json:"budget"`
	// Capabilities and CostClasses restrict the plan to calls of these
	// capabilities or cost classes (empty: any). Both given: either.
	Capabilities []string `yaml:"capabilities" json:"capabilities,omitempty"`
	CostClasses  []string `yaml:"cost_classes" json:"cost_classes,omitempty"`
	// Key are the parts a counter is kept per (KeyParts); default [caller].
	Key []string `yaml:"key" json:"key,omitempty"`
	// OnStoreError is "closed" or "open"; "" takes DefaultOnStoreError.
	OnStoreError StoreErrorMode `yaml:"on_store_error" json:"on_store_error,omitempty"`
}

// Grant is who a plan applies to: a caller holding every scope of Scopes,
// whose tenant is in Tenants and whose token's issuer is in Issuers (each
// test skipped when its list is empty). Authenticated requires a
// credential; a plan with an empty grant applies to anonymous callers too.
type Grant struct {
	Scopes        []string `yaml:"scopes" json:"scopes,omitempty"`
	Tenants       []string `yaml:"tenants" json:"tenants,omitempty"`
	Issuers       []string `yaml:"issuers" json:"issuers,omitempty"`
	Authenticated bool     `yaml:"authenticated" json:"authenticated,omitempty"`
}

// Budget is a number of calls or units per window; exactly one of Calls
// and Units is set.
type Budget struct {
	Calls int64         `yaml:"calls" json:"calls,omitempty"`
	Units int64         `yaml:"units" json:"units,omitempty"`
	Per   time.Duration `yaml:"per" json:"per"`
}

// Unit is the budget's unit ("" when neither or both are set).
func (b Budget) Unit() Unit {
	switch {
	case b.Calls > 0 && b.Units == 0:
		return Calls
	case b.Units > 0 && b.Calls == 0:
		return Units
	}
	return ""
}

// Limit is the budget's number of calls or units.
func (b Budget) Limit() int64 { return max(b.Calls, b.Units) }

// DefaultOnStoreError is the store error mode of a quota that names none:
// closed for a cost budget (units), open for a call rate.
func DefaultOnStoreError(u Unit) StoreErrorMode {
	if u == Units {
		return FailClosed
	}
	return FailOpen
}

// Capability is a manifest capability's `quota:` field. Its JSON is the
// manifest format's (fields in JSON-name order, so that it is canonical:
// see manifest.Capability).
type Capability struct {
	// OnStoreError is the rate's store error mode; "" takes the default.
	OnStoreError StoreErrorMode `json:"on_store_error,omitempty"`
	// Rate bounds calls per window per caller (a quota of its own, id
	// "rate.<capability id>"); zero when not given.
	Rate Rate `json:"rate,omitzero"`
	// Units is what one call costs in units, overriding the config's
	// cost_classes entry for the capability's cost_class; 0 when not given.
	Units int64 `json:"units,omitempty"`
}

// Rate is a number of calls per window. In JSON the window is a duration
// string, as in a manifest ({"calls": 30, "per": "1m0s"}).
type Rate struct {
	Calls int64         `json:"calls"`
	Per   time.Duration `json:"per"`
}

// MarshalJSON writes the window as a duration string.
func (r Rate) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Calls int64  `json:"calls"`
		Per   string `json:"per"`
	}{r.Calls, r.Per.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Rate) UnmarshalJSON(b []byte) error {
	var w struct {
		Calls int64  `json:"calls"`
		Per   string `json:"per"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	per, err := time.ParseDuration(w.Per)
	if err != nil {
		return fmt.Errorf("quota.rate.per: %w", err)
	}
	r.Calls, r.Per = w.Calls, per
	return nil
}

// IsZero reports whether no rate is given.
func (r Rate) IsZero() bool { return r.Calls == 0 && r.Per == 0 }

// KeyPart is one part of a counter's key: its name (KeyParts) and value.
// In a decision the caller part's value is empty: the caller is bound at
// admission (CounterKey), so decisions stay shared by an entitlement class.
type KeyPart struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Applied is one quota the policy decided applies to a call.
type Applied struct {
	// ID names the quota: "plan.<plan id>" for a plan, "rate.<capability
	// id>" for a capability's own rate, "deny.<module>.<id>" for one a deny
	// module adds. It is the rule a refusal names.
	ID string `json:"id"`
	// Plan is the plan's id ("" for a capability's rate or a deny module's).
	Plan         string         `json:"plan,omitempty"`
	Unit         Unit           `json:"unit"`
	Limit        int64          `json:"limit"`
	Window       time.Duration  `json:"window"`
	Cost         int64          `json:"cost"` // what this call costs, in Unit
	Key          []KeyPart      `json:"key"`
	OnStoreError StoreErrorMode `json:"on_store_error"`
}

// Caller is the value of the caller key part for a token's issuer and
// subject.
func Caller(issuer, subject string) string { return issuer + " " + subject }

// CounterKey is the store key of the quota's counter for caller (Caller's
// value; it fills the caller part): "q{<tag>}" then the quota id, limit,
// window and each part, each length-prefixed so no two quotas or callers
// share a counter. A change of limit or window starts a new counter. The
// hash tag is the caller (else the tenant, else the quota id), so on Redis
// Cluster every counter of one caller lives in one slot; it is hex, so it
// never holds a brace.
func (a Applied) CounterKey(caller string) string {
	var b strings.Builder
	tag := a.ID
	if a.has(PartTenant) {
		tag = "t" + a.value(PartTenant, caller)
	}
	if a.has(PartCaller) {
		tag = "c" + caller
	}
	b.WriteString("q{")
	b.WriteString(hexTag(tag))
	b.WriteString("}")
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	field(a.ID)
	field(strconv.FormatInt(a.Limit, 10) + "/" + a.Window.String())
	for _, p := range a.Key {
		field(p.Name)
		field(a.value(p.Name, caller))
	}
	return b.String()
}

func (a Applied) has(name string) bool {
	return slices.ContainsFunc(a.Key, func(p KeyPart) bool { return p.Name == name })
}

func (a Applied) value(name, caller string) string {
	if name == PartCaller {
		return caller
	}
	for _, p := range a.Key {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// hexTag is a short, brace-free digest of s (FNV-1a, 64 bits).
func hexTag(s string) string {
	h := uint64(14695981039346656037)
	for i := range len(s) {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return fmt.Sprintf("%016x", h)
}

// Validate checks an Applied as the decision carries it.
func (a Applied) Validate() error {
	switch {
	case a.ID == "":
		return fmt.Errorf("quota: id: required")
	case a.Unit != Calls && a.Unit != Units:
		return fmt.Errorf("quota %s: unit %q: want calls or units", a.ID, a.Unit)
	case a.Limit < 1:
		return fmt.Errorf("quota %s: limit %d: must be positive", a.ID, a.Limit)
	case a.Window < time.Second:
		return fmt.Errorf("quota %s: window %s: must be at least 1s", a.ID, a.Window)
	case a.Cost < 0:
		return fmt.Errorf("quota %s: cost %d: must not be negative", a.ID, a.Cost)
	case a.OnStoreError != FailClosed && a.OnStoreError != FailOpen:
		return fmt.Errorf("quota %s: on_store_error %q: want closed or open", a.ID, a.OnStoreError)
	case len(a.Key) == 0:
		return fmt.Errorf("quota %s: key: want at least one part", a.ID)
	}
	seen := map[string]bool{}
	for _, p := range a.Key {
		if !slices.Contains(KeyParts, p.Name) {
			return fmt.Errorf("quota %s: key part %q: want one of %s", a.ID, p.Name, strings.Join(KeyParts, ", "))
		}
		if seen[p.Name] {
			return fmt.Errorf("quota %s: key part %q: repeated", a.ID, p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// MarkKey is the store key recording that a caller's message (messageId)
// has been charged, so that the second door a message passes (ext_authz,
// then the gateway behind it) and a retry of it are not charged again. It
// shares the hash tag of the caller's counters.
func MarkKey(caller, messageID string) string {
	var b strings.Builder
	b.WriteString("qm{")
	b.WriteString(hexTag("c" + caller))
	b.WriteString("}")
	b.WriteString(strconv.Itoa(len(caller)))
	b.WriteByte(':')
	b.WriteString(caller)
	b.WriteString(messageID)
	return b.String()
}

// State is what is left of one quota after a call was charged: for the
// RateLimit response headers and the decision log.
type State struct {
	ID        string `json:"quota"`
	Limit     int64  `json:"limit"`
	Window    int64  `json:"window_seconds"`
	Remaining int64  `json:"remaining"`
	Reset     int64  `json:"reset_seconds"` // until the budget is full again
}
