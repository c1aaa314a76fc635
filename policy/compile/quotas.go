package compile

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/capgate/capgate/policy/quota"
)

// Quotas are the deployment's quota plans as the policy reads them
// (data.capgate.settings.quotas): every default resolved, windows in whole
// seconds, lists never null.
type Quotas struct {
	CostClasses map[string]int64 `json:"cost_classes"`
	Plans       []Plan           `json:"plans"`
}

// Plan is one plan as the policy reads it.
type Plan struct {
	ID            string   `json:"id"`
	Grant         Grant    `json:"grant"`
	Unit          string   `json:"unit"`
	Limit         int64    `json:"limit"`
	WindowSeconds int64    `json:"window_seconds"`
	Capabilities  []string `json:"capabilities"`
	CostClasses   []string `json:"cost_classes"`
	Key           []string `json:"key"`
	OnStoreError  string   `json:"on_store_error"`
}

// Grant is a plan's grant as the policy reads it.
type Grant struct {
	Scopes        []string `json:"scopes"`
	Tenants       []string `json:"tenants"`
	Issuers       []string `json:"issuers"`
	Authenticated bool     `json:"authenticated"`
}

// QuotaSettings renders a validated quota config for the policy; nil when
// it declares nothing (the data, and so the revision, are then what they
// were before quotas existed).
func QuotaSettings(c quota.Config) *Quotas {
	if len(c.Plans) == 0 && len(c.CostClasses) == 0 {
		return nil
	}
	q := &Quotas{CostClasses: map[string]int64{}, Plans: make([]Plan, 0, len(c.Plans))}
	for k, v := range c.CostClasses {
		q.CostClasses[k] = v
	}
	for _, p := range c.Plans {
		unit := p.Budget.Unit()
		mode := p.OnStoreError
		if mode == "" {
			mode = quota.DefaultOnStoreError(unit)
		}
		key := p.Key
		if len(key) == 0 {
			key = []string{quota.PartCaller}
		}
		// Key parts in documentation order: the same parts give the same counter.
		ordered := make([]string, 0, len(key))
		for _, part := range quota.KeyParts {
			if slices.Contains(key, part) {
				ordered = append(ordered, part)
			}
		}
		q.Plans = append(q.Plans, Plan{
			ID: p.ID,
			Grant: Grant{
				Scopes: nonNil(p.Grant.Scopes), Tenants: nonNil(p.Grant.Tenants), Issuers: nonNil(p.Grant.Issuers),
				Authenticated: p.Grant.Authenticated,
			},
			Unit: string(unit), Limit: p.Budget.Limit(), WindowSeconds: int64(p.Budget.Per / time.Second),
			Capabilities: nonNil(p.Capabilities), CostClasses: nonNil(p.CostClasses),
			Key: ordered, OnStoreError: string(mode),
		})
	}
	return q
}

// quotaFact is a capability's quota as the policy reads it
// (data.capgate.capabilities[id].quota); nil when it has none.
func quotaFact(q quota.Capability) map[string]any {
	if q == (quota.Capability{}) {
		return nil
	}
	f := map[string]any{}
	if q.Units > 0 {
		f["units"] = q.Units
	}
	if !q.Rate.IsZero() {
		mode := q.OnStoreError
		if mode == "" {
			mode = quota.DefaultOnStoreError(quota.Calls)
		}
		f["rate"] = map[string]any{
			"calls":          q.Rate.Calls,
			"window_seconds": int64(q.Rate.Per / time.Second),
			"on_store_error": string(mode),
		}
	}
	return f
}

// decodeQuotas reads settings.quotas of a bundle (absent: none). The
// bundle's data is compared with what its registry and settings compile
// to afterwards, so a lossy reading here is refused there.
func decodeQuotas(v any) (*Quotas, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("settings.quotas: %w", err)
	}
	var q Quotas
	if err := json.Unmarshal(b, &q); err != nil {
		return nil, fmt.Errorf("settings.quotas: %w", err)
	}
	return &q, nil
}
