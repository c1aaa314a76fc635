package deployment

import (
	"fmt"
	"slices"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/policy/quota"
)

// checkQuotas checks the config's plans against the registry: a plan restricted to a
// capability the registry does not hold is an error (a typo would leave the capability
// unbudgeted in silence).
func checkQuotas(cfg *config.Config, reg *manifest.Registry, problems *diag.Set) {
	for i, p := range cfg.Quotas.Plans {
		for j, id := range p.Capabilities {
			if _, ok := reg.Get(id); ok {
				continue
			}
			field := fmt.Sprintf("quotas.plans[%d].capabilities[%d]", i, j)
			ids := make([]string, 0, reg.Len())
			for _, c := range reg.All() {
				ids = append(ids, c.ID)
			}
			problems.Add(cfg.File(), cfg.Line(field), field, "%q is not a capability of the registry%s", id, diag.DidYouMean(id, ids))
		}
	}
}

// quotaWarnings names each capability whose cost_class the config's cost_classes does not
// price while a unit budget exists: without quota.units it costs nothing under unit budgets.
func quotaWarnings(cfg *config.Config, reg *manifest.Registry) []string {
	units := slices.ContainsFunc(cfg.Quotas.Plans, func(p quota.Plan) bool { return p.Budget.Unit() == quota.Units })
	if !units {
		return nil
	}
	var out []string
	for _, c := range reg.All() {
		class, _ := c.Limits[quota.CostClassLimit].(string)
		if _, priced := cfg.Quotas.CostClasses[class]; class == "" || priced || c.Quota.Units > 0 || c.State == manifest.StateRemoved {
			continue
		}
		out = append(out, diag.Problem{File: c.Source.File, Line: c.Source.Line, Field: "limits.cost_class",
			Message: fmt.Sprintf("%q is not in quotas.cost_classes of %s: calls of %s cost nothing under unit budgets (give it a price, or quota.units)", class, cfg.File(), c.ID)}.String())
	}
	return out
}
