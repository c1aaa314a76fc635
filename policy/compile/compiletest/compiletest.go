// Package compiletest provides fixture registries and settings for tests and benchmarks of the policy compiler and engine.
package compiletest

import (
	"fmt"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

// PreviewScope and PreviewTenant are the opt-in settings of Auth.
const (
	PreviewScope  = "capgate.preview"
	PreviewTenant = "beta-corp"
)

// Auth returns the fixture's policy settings: a preview scope, one preview
// tenant and anonymous use of public capabilities.
func Auth() config.Auth {
	return config.Auth{PreviewScope: PreviewScope, PreviewTenants: []string{PreviewTenant}, AnonymousPublic: true}
}

// Capabilities returns the finance agent of the design brief, widened to
// exercise every state, visibility, scope and tenant rule.
func Capabilities() []manifest.Capability {
	skill := func(name string, tags ...string) manifest.Skill {
		return manifest.Skill{
			Name: name, Description: name + ".", Tags: tags,
			InputModes: []string{"text/plain", "application/pdf"}, OutputModes: []string{"application/json"},
		}
	}
	return []manifest.Capability{
		{
			ID: "lookup-invoice", State: manifest.StateGA, Visibility: manifest.VisibilityPublic,
			Skill: skill("Look up an invoice", "finance", "invoices"), Tenants: manifest.Tenants{All: true},
			Handler: "invoices.lookup", Owner: "finance-agents-team",
		},
		{
			ID: "reconcile-invoice", State: manifest.StateDeprecated, Visibility: manifest.VisibilityExtended,
			ReplacedBy: "reconcile-invoice-v2", Skill: skill("Reconcile an invoice", "finance"),
			RequiresScopes: []string{"recon.run"}, Tenants: manifest.Tenants{All: true}, Handler: "recon.v3.reconcile",
			Limits: map[string]any{"max_pdf_pages": 200, "cost_class": "medium"},
		},
		{
			ID: "reconcile-invoice-v2", State: manifest.StateGA, Visibility: manifest.VisibilityExtended,
			Skill: skill("Reconcile an invoice (v2)", "finance"), RequiresScopes: []string{"recon.run"},
			Tenants: manifest.Tenants{List: []string{"acme", "globex"}}, Handler: "recon.v4.reconcile",
		},
		{
			ID: "reconcile-invoice-v0", State: manifest.StateRemoved, Visibility: manifest.VisibilityPublic,
			ReplacedBy: "reconcile-invoice-v2", Skill: skill("Reconcile (old)"), Tenants: manifest.Tenants{All: true},
			Handler: "recon.v1.reconcile",
		},
		{
			ID: "forecast-cashflow", State: manifest.StatePreview, Visibility: manifest.VisibilityExtended,
			Skill: skill("Forecast cash flow", "finance", "preview"), RequiresScopes: []string{"finance.read"},
			Tenants: manifest.Tenants{All: true}, Handler: "forecast.v1",
		},
		{
			ID: "audit-ledger", State: manifest.StateGA, Visibility: manifest.VisibilityInternal,
			Skill: skill("Audit the ledger"), RequiresScopes: []string{"audit.read"},
			Tenants: manifest.Tenants{All: true}, Handler: "audit.v1",
		},
		{
			ID: "export-ledger", State: manifest.StateGA, Visibility: manifest.VisibilityPublic,
			Skill: skill("Export the ledger"), RequiresScopes: []string{"export.run", "finance.read"},
			Tenants: manifest.Tenants{All: true}, Handler: "export.v1",
		},
	}
}

// Registry returns Capabilities as a registry.
func Registry() *manifest.Registry { return manifest.NewRegistry(Capabilities()) }

// Synthetic returns a registry of n generated capabilities ("cap-00000",
// ...) cycling through states, visibilities, ten scopes and tenant lists,
// with every replaced_by resolving.
func Synthetic(n int) *manifest.Registry {
	states := []manifest.State{manifest.StateGA, manifest.StateGA, manifest.StateDeprecated, manifest.StatePreview, manifest.StateRemoved}
	vis := []manifest.Visibility{manifest.VisibilityPublic, manifest.VisibilityExtended, manifest.VisibilityExtended, manifest.VisibilityInternal}
	caps := make([]manifest.Capability, n)
	for i := range caps {
		c := manifest.Capability{
			ID:         fmt.Sprintf("cap-%05d", i),
			State:      states[i%len(states)],
			Visibility: vis[i%len(vis)],
			Skill: manifest.Skill{
				Name:        fmt.Sprintf("Capability %d", i),
				Description: fmt.Sprintf("Synthetic capability number %d for scale tests.", i),
				Tags:        []string{"synthetic", fmt.Sprintf("group-%d", i%17)},
				InputModes:  []string{"text/plain"},
			},
			Tenants: manifest.Tenants{All: true},
			Handler: fmt.Sprintf("h%d", i%8),
		}
		if i%3 != 0 {
			c.RequiresScopes = []string{Scope(i % 10)}
		}
		if i%7 == 0 {
			c.Tenants = manifest.Tenants{List: []string{Tenant(i % 5), Tenant((i + 1) % 5)}}
		}
		if (c.State == manifest.StateDeprecated || c.State == manifest.StateRemoved) && i > 0 {
			c.ReplacedBy = fmt.Sprintf("cap-%05d", i-1)
		}
		caps[i] = c
	}
	return manifest.NewRegistry(caps)
}

// Scope returns the synthetic scope number i.
func Scope(i int) string { return fmt.Sprintf("scope.%d", i) }

// Tenant returns the synthetic tenant number i.
func Tenant(i int) string { return fmt.Sprintf("tenant-%d", i) }
