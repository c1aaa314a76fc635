package access

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/quota"
)

// QuotaLine describes an applied quota for a reader: its id, budget, what
// its counter is kept per, what this call costs and what a store error
// does: "plan.free: 100 calls per 1h per caller, cost_class high; costs 1;
// store error: open".
func QuotaLine(a quota.Applied) string { return quotaLine(a, fmt.Sprint(a.Cost)) }

func quotaLine(a quota.Applied, cost string) string {
	var per []string
	for _, p := range a.Key {
		if p.Value == "" || p.Name == quota.PartCaller {
			per = append(per, p.Name)
		} else {
			per = append(per, p.Name+" "+p.Value)
		}
	}
	return fmt.Sprintf("%s: %d %s per %s per %s; costs %s; store error: %s",
		a.ID, a.Limit, a.Unit, window(a.Window), strings.Join(per, ", "), cost, a.OnStoreError)
}

// window prints a window the way plans are written: 1h, 24h, 1m, 30s.
func window(d time.Duration) string {
	switch {
	case d > 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// QuotaWhy says why a quota applies: the plan's grant and filter from plans,
// a capability's own rate, or a deny module's tightening.
func QuotaWhy(a quota.Applied, plans []compile.Plan) string {
	switch {
	case strings.HasPrefix(a.ID, "rate."):
		return "the capability's own rate (manifest quota.rate)"
	case strings.HasPrefix(a.ID, "deny."):
		return "added by a deny module (tightening)"
	}
	i := slices.IndexFunc(plans, func(p compile.Plan) bool { return p.ID == a.Plan })
	if i < 0 {
		return "plan " + a.Plan
	}
	p := plans[i]
	var who []string
	if len(p.Grant.Scopes) > 0 {
		who = append(who, "scopes ["+strings.Join(p.Grant.Scopes, " ")+"]")
	}
	if len(p.Grant.Tenants) > 0 {
		who = append(who, "tenant in ["+strings.Join(p.Grant.Tenants, " ")+"]")
	}
	if len(p.Grant.Issuers) > 0 {
		who = append(who, "issuer in ["+strings.Join(p.Grant.Issuers, " ")+"]")
	}
	if len(who) == 0 {
		if p.Grant.Authenticated {
			who = append(who, "every authenticated caller")
		} else {
			who = append(who, "every caller")
		}
	}
	s := "plan " + p.ID + " grants it to " + strings.Join(who, ", ")
	var on []string
	if len(p.Capabilities) > 0 {
		on = append(on, "capabilities ["+strings.Join(p.Capabilities, " ")+"]")
	}
	if len(p.CostClasses) > 0 {
		on = append(on, "cost_class in ["+strings.Join(p.CostClasses, " ")+"]")
	}
	if len(on) > 0 {
		s += "; on " + strings.Join(on, " or ")
	}
	return s
}

// QuotaJSON is an applied quota in the decision's own wire form, and why it
// applies: what explain and the access reports print.
type QuotaJSON struct {
	ID            string          `json:"id"`
	Plan          string          `json:"plan,omitempty"`
	Unit          string          `json:"unit"`
	Limit         int64           `json:"limit"`
	WindowSeconds int64           `json:"window_seconds"`
	Cost          int64           `json:"cost"`
	Key           []quota.KeyPart `json:"key"`
	OnStoreError  string          `json:"on_store_error"`
	Why           string          `json:"why"`
}

// QuotasJSON converts applied quotas for a report (nil when none).
func QuotasJSON(as []quota.Applied, plans []compile.Plan) []QuotaJSON {
	if len(as) == 0 {
		return nil
	}
	out := make([]QuotaJSON, 0, len(as))
	for _, a := range as {
		out = append(out, QuotaJSON{
			ID: a.ID, Plan: a.Plan, Unit: string(a.Unit), Limit: a.Limit, WindowSeconds: int64(a.Window / time.Second),
			Cost: a.Cost, Key: a.Key, OnStoreError: string(a.OnStoreError), Why: QuotaWhy(a, plans),
		})
	}
	return out
}

// ClassQuota is one quota a class is counted against, and the capabilities
// (entitled to the class) it counts.
type ClassQuota struct {
	Quota        quota.Applied // as applied to the first capability
	Capabilities []string
	// MinCost and MaxCost are what one call costs, over the capabilities.
	MinCost, MaxCost int64
}

// Line is QuotaLine with the cost over the capabilities ("1-5").
func (q ClassQuota) Line() string {
	cost := fmt.Sprint(q.MinCost)
	if q.MaxCost != q.MinCost {
		cost += "-" + fmt.Sprint(q.MaxCost)
	}
	return quotaLine(q.Quota, cost)
}

// ClassQuotas lists the quotas class i is counted against over the
// capabilities it may run, by quota id.
func (m *Matrix) ClassQuotas(i int) []ClassQuota {
	var out []ClassQuota
	for j, c := range m.Capabilities {
		cell := m.Cell(i, j)
		if !cell.Entitled {
			continue
		}
		for _, a := range cell.Quotas {
			k := slices.IndexFunc(out, func(q ClassQuota) bool { return q.Quota.ID == a.ID })
			if k < 0 {
				out = append(out, ClassQuota{Quota: a, MinCost: a.Cost, MaxCost: a.Cost})
				k = len(out) - 1
			}
			out[k].Capabilities = append(out[k].Capabilities, c.ID)
			out[k].MinCost, out[k].MaxCost = min(out[k].MinCost, a.Cost), max(out[k].MaxCost, a.Cost)
		}
	}
	slices.SortFunc(out, func(a, b ClassQuota) int { return strings.Compare(a.Quota.ID, b.Quota.ID) })
	return out
}

// HasQuotas reports whether any cell carries a quota.
func (m *Matrix) HasQuotas() bool {
	for _, row := range m.quotas {
		for _, qs := range row {
			if len(qs) > 0 {
				return true
			}
		}
	}
	return false
}

// explainer is the engine as the quotas of a matrix need it: every
// capability's whole decision for one caller.
type explainer interface {
	Explain(ctx context.Context, c engine.Caller) ([]engine.Decision, error)
}

// addQuotas fills the matrix's quotas: one Explain per class (the review
// does not carry them), kept for the capabilities the class may run.
func (m *Matrix) addQuotas(ctx context.Context, e explainer) error {
	m.quotas = make([][][]quota.Applied, len(m.Classes))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, c := range m.Classes {
		g.Go(func() error {
			ds, err := e.Explain(gctx, c.Caller)
			if err != nil {
				return fmt.Errorf("caller class %s: quotas: %w", c.Name, err)
			}
			row := make([][]quota.Applied, len(ds))
			for k, d := range ds {
				if d.Entitled {
					row[k] = d.Quotas
				}
			}
			m.quotas[i] = row
			return nil
		})
	}
	return g.Wait()
}

// quotaGuards are the quotas a head loosens on one capability for the
// classes entitled to it in both: gone, raised (more per window), cheaper,
// or open on a store error where it was closed.
func quotaGuards(id string, base, head *Matrix, col Column) []Guard {
	type key struct{ quota, effect string }
	byKey := map[key]*Guard{}
	var order []key
	for i, class := range head.Classes {
		b, h := cellAt(base, i, col.Base), cellAt(head, i, col.Head)
		if !b.Entitled || !h.Entitled {
			continue
		}
		for _, bq := range b.Quotas {
			k := slices.IndexFunc(h.Quotas, func(q quota.Applied) bool { return q.ID == bq.ID })
			var effects []string
			headLine := ""
			if k < 0 {
				effects = append(effects, "the quota no longer applies")
			} else {
				hq := h.Quotas[k]
				headLine = strings.TrimPrefix(QuotaLine(hq), hq.ID+": ")
				// More per window: hl/hw > bl/bw, compared without division.
				if float64(hq.Limit)*bq.Window.Seconds() > float64(bq.Limit)*hq.Window.Seconds() || hq.Unit != bq.Unit {
					effects = append(effects, "the quota was raised")
				}
				if hq.Unit == bq.Unit && hq.Cost < bq.Cost {
					effects = append(effects, "a call costs less")
				}
				if bq.OnStoreError == quota.FailClosed && hq.OnStoreError == quota.FailOpen {
					effects = append(effects, "a store outage now admits calls uncounted")
				}
			}
			for _, eff := range effects {
				kk := key{bq.ID, eff}
				g, ok := byKey[kk]
				if !ok {
					g = &Guard{Capability: id, Kind: GuardQuota, Effect: eff,
						Cause: FieldChange{Capability: id, Field: "quota " + bq.ID, Base: strings.TrimPrefix(QuotaLine(bq), bq.ID+": "), Head: headLine}}
					byKey[kk] = g
					order = append(order, kk)
				}
				g.Callers = append(g.Callers, class.Name)
				if r := riskOf(CellChange{Head: Cell{Entitled: true}}, class, visibilityOf(head, col)); len(g.Callers) == 1 || compareRisk(r, g.Risk) < 0 {
					g.Risk = r
				}
			}
		}
	}
	out := make([]Guard, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out
}

func visibilityOf(m *Matrix, col Column) string {
	if col.Head >= 0 {
		return m.Capabilities[col.Head].Visibility
	}
	return ""
}

// snapshotQuotas returns the deployment's plans, and whether it may apply
// any quota: a plan, a capability's own rate, or a deny module (which may
// add quotas).
func snapshotQuotas(s *compile.Snapshot) ([]compile.Plan, bool) {
	var plans []compile.Plan
	if q := s.Settings.Quotas; q != nil {
		plans = q.Plans
	}
	on := len(plans) > 0
	for path := range s.Modules {
		on = on || strings.HasPrefix(path, compile.ExtraDir)
	}
	for _, c := range s.Registry.All() {
		on = on || !c.Quota.Rate.IsZero()
	}
	return plans, on
}
