package quota

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/policy/diag"
)

// MaxWindow bounds a budget's window.
const MaxWindow = 366 * 24 * time.Hour

// PlanIDPattern is the form of a plan id.
const PlanIDPattern = `^[a-z0-9][a-z0-9._-]{0,62}$`

var planIDRE = regexp.MustCompile(PlanIDPattern)

// Check reports every problem of the config through add, with the field
// path under prefix ("quotas"): add places it at its line.
func (c Config) Check(prefix string, add func(field, format string, args ...any)) {
	if c.Counter != "" && !slices.Contains(Counters, c.Counter) {
		add(prefix+".counter", "%q is not one of capgate, envoy%s", c.Counter, diag.DidYouMean(string(c.Counter), []string{string(CounterCapgate), string(CounterEnvoy)}))
	}
	for class, units := range c.CostClasses {
		if strings.TrimSpace(class) == "" {
			add(prefix+".cost_classes", "empty cost class")
		}
		if units < 1 {
			add(prefix+".cost_classes."+class, "%d: want a positive number of units", units)
		}
	}
	seen := map[string]int{}
	for i, p := range c.Plans {
		at := fmt.Sprintf("%s.plans[%d]", prefix, i)
		switch j, dup := seen[p.ID]; {
		case p.ID == "":
			add(at+".id", "required")
		case !planIDRE.MatchString(p.ID):
			add(at+".id", "%q does not match %s", p.ID, PlanIDPattern)
		case dup:
			add(at+".id", "%q is already the id of %s.plans[%d]", p.ID, prefix, j)
		default:
			seen[p.ID] = i
		}
		if p.Budget == (Budget{}) {
			add(at+".budget", "required: calls or units per window, e.g. {calls: 100, per: 1h}")
		} else {
			p.Budget.check(at+".budget", add)
		}
		if p.Budget.Unit() == Units && len(c.CostClasses) == 0 {
			add(at+".budget.units", "a unit budget needs quotas.cost_classes (or manifests' quota.units) to price calls; without cost_classes only capabilities with quota.units are counted")
		}
		for j, part := range p.Key {
			if !slices.Contains(KeyParts, part) {
				add(fmt.Sprintf("%s.key[%d]", at, j), "%q is not one of %s%s", part, strings.Join(KeyParts, ", "), diag.DidYouMean(part, KeyParts))
			} else if slices.Index(p.Key, part) != j {
				add(fmt.Sprintf("%s.key[%d]", at, j), "%q is repeated", part)
			}
		}
		if m := p.OnStoreError; m != "" && !slices.Contains(StoreErrorModes, m) {
			add(at+".on_store_error", "%q is not one of closed, open%s", m, diag.DidYouMean(string(m), []string{string(FailClosed), string(FailOpen)}))
		}
		for j, class := range p.CostClasses {
			if len(c.CostClasses) > 0 {
				if _, ok := c.CostClasses[class]; !ok {
					add(fmt.Sprintf("%s.cost_classes[%d]", at, j), "%q is not in %s.cost_classes", class, prefix)
				}
			}
		}
		for field, list := range map[string][]string{"grant.scopes": p.Grant.Scopes, "grant.tenants": p.Grant.Tenants, "grant.issuers": p.Grant.Issuers, "capabilities": p.Capabilities} {
			for j, s := range list {
				if strings.TrimSpace(s) == "" {
					add(fmt.Sprintf("%s.%s[%d]", at, field, j), "empty")
				}
			}
		}
	}
}

func (b Budget) check(at string, add func(field, format string, args ...any)) {
	switch {
	case b.Calls < 0 || b.Units < 0:
		add(at, "calls and units must be positive")
	case b.Unit() == "":
		add(at, "give exactly one of calls and units (e.g. {calls: 100, per: 1h})")
	}
	switch per := b.Per; {
	case per == 0:
		add(at+".per", `required: the window, e.g. "1h"`)
	case per < time.Second || per%time.Second != 0:
		add(at+".per", "%s: want whole seconds, at least 1s", per)
	case per > MaxWindow:
		add(at+".per", "%s: longer than %s", per, MaxWindow)
	}
}
