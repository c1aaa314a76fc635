package card_test

import (
	"path/filepath"
	"testing"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/test/golden"
)

// requireGolden compares got with testdata/name (as JSON when asJSON), or
// rewrites the file under -update.
func requireGolden(t *testing.T, name string, got []byte, asJSON bool) {
	t.Helper()
	if asJSON {
		golden.JSONEq(t, filepath.Join("testdata", name), got)
		return
	}
	golden.Equal(t, filepath.Join("testdata", name), got)
}

func ptr[T any](v T) *T { return &v }

// fixtureConfig is the finance agent of the design brief.
func fixtureConfig() *config.Config {
	return &config.Config{
		Agent: config.Agent{
			Name:             "Finance Agent",
			Description:      "Answers questions about invoices and reconciles them against purchase orders.",
			Version:          "1.4.0",
			URL:              "https://finance.example.com/a2a",
			Provider:         &config.Provider{Organization: "Example Corp", URL: "https://example.com"},
			DocumentationURL: "https://finance.example.com/docs",
		},
		Auth: config.Auth{
			Issuers: []config.Issuer{
				{Issuer: "https://login.example.com", Audiences: []string{"finance-agent"}},
				{Issuer: "https://partners.example.net", Audiences: []string{"finance-agent"}},
			},
			AnonymousPublic: true,
		},
		Cards: config.Cards{ExtendedCard: "auto"},
	}
}

func lookupInvoice() manifest.Capability {
	return manifest.Capability{
		ID: "lookup-invoice", State: manifest.StateGA, Visibility: manifest.VisibilityPublic,
		Skill: manifest.Skill{
			Name:        "Look up an invoice",
			Description: "Finds an invoice by its number and returns its status, amounts and due date.",
			Tags:        []string{"finance", "invoices"},
			Examples:    []string{"What is the status of invoice INV-20931?"},
			OutputModes: []string{"application/json"},
		},
		Tenants: manifest.Tenants{All: true}, Handler: "invoices.lookup",
	}
}

func reconcileInvoice() manifest.Capability {
	return manifest.Capability{
		ID: "reconcile-invoice", State: manifest.StateGA, Visibility: manifest.VisibilityExtended,
		Skill: manifest.Skill{
			Name:        "Reconcile an invoice",
			Description: "Matches an invoice to its purchase order and lists line-level differences.",
			Tags:        []string{"finance", "invoices"},
			Examples:    []string{"Reconcile invoice INV-20931 against its PO."},
			InputModes:  []string{"text/plain", "application/pdf"},
			OutputModes: []string{"application/json"},
		},
		RequiresScopes: []string{"recon.run"}, Tenants: manifest.Tenants{All: true}, Handler: "recon.v3.reconcile",
	}
}

func reconcileInvoiceV2() manifest.Capability {
	return manifest.Capability{
		ID: "reconcile-invoice-v2", State: manifest.StateGA, Visibility: manifest.VisibilityExtended,
		Skill: manifest.Skill{
			Name:        "Reconcile an invoice (v2)",
			Description: "Matches an invoice to purchase orders and goods receipts, with tolerances per line",
			Tags:        []string{"finance", "invoices", "three-way-match"},
			InputModes:  []string{"text/plain", "application/pdf"},
			OutputModes: []string{"application/json"},
		},
		RequiresScopes: []string{"recon.run"}, Tenants: manifest.Tenants{All: true}, Handler: "recon.v4.reconcile",
	}
}

func forecastCashflow() manifest.Capability {
	return manifest.Capability{
		ID: "forecast-cashflow", State: manifest.StatePreview, Visibility: manifest.VisibilityExtended,
		Skill: manifest.Skill{
			Name:        "Forecast cash flow",
			Description: "Projects the next ninety days of incoming and outgoing payments from open invoices.",
			Tags:        []string{"finance", "forecast"},
		},
		Tenants: manifest.Tenants{All: true}, Handler: "forecast.run",
	}
}

func auditTrail() manifest.Capability {
	return manifest.Capability{
		ID: "audit-trail", State: manifest.StateGA, Visibility: manifest.VisibilityInternal,
		Skill: manifest.Skill{
			Name:        "Export the audit trail",
			Description: "Dumps every ledger change with the acting principal for the compliance archive.",
			Tags:        []string{"audit"},
		},
		Tenants: manifest.Tenants{All: true}, Handler: "audit.export",
	}
}

func oldExport() manifest.Capability {
	return manifest.Capability{
		ID: "export-invoices", State: manifest.StateRemoved, Visibility: manifest.VisibilityPublic,
		ReplacedBy: "lookup-invoice",
		Skill: manifest.Skill{
			Name: "Export invoices", Description: "Exports invoices as CSV.", Tags: []string{"finance"},
		},
		Tenants: manifest.Tenants{All: true}, Handler: "invoices.export",
	}
}

func deprecated(m manifest.Capability, replacedBy string) manifest.Capability {
	m.State = manifest.StateDeprecated
	m.ReplacedBy = replacedBy
	return m
}
