package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/test/testutil"
)

// TestRoutingPolicyShown: `capgate route` shows a confirm capability's pick
// as a question, and `capgate explain` prints the policy.
func TestRoutingPolicyShown(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capabilities/reconcile-invoice.yaml", func(s string) string {
		return s + "routing: {mode: confirm, min_confidence: 0.5}\n"
	})
	claims := writeClaims(t, `{"sub":"p1","scope":"recon.run"}`)

	r := run(t, "route", "--config", cfg, "--claims", claims, "--media", "application/pdf", "reconcile invoice INV-20931 against its PO")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "layer: confirm\n")
	require.NotContains(t, r.stdout, "capability: ")
	require.Contains(t, r.stdout, "(threshold 0.50)")
	require.Contains(t, r.stdout, "confirm: reconcile-invoice (routing mode confirm: the caller is asked before it runs)")
	require.Contains(t, r.stdout, "[routing: confirm]")

	r = run(t, "route", "--config", cfg, "--claims", claims, "--hint", "reconcile-invoice", "--media", "application/pdf", "reconcile it")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Equal(t, "layer: hint\ncapability: reconcile-invoice\n", r.stdout)

	r = run(t, "explain", "--config", cfg, "--claims", claims, "--capability", "reconcile-invoice")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "  routing:  confirm (min_confidence 0.5)\n")
	r = run(t, "explain", "--config", cfg, "--claims", claims, "--capability", "lookup-invoice")
	require.NotContains(t, r.stdout, "routing:")
	r = run(t, "explain", "--config", cfg, "--claims", claims, "--capability", "reconcile-invoice", "--json")
	require.Contains(t, r.stdout, `"routing": {`)
	require.Contains(t, r.stdout, `"mode": "confirm"`)

	// Never in a card.
	r = run(t, "card", "--config", cfg, "--claims", claims)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "reconcile-invoice")
	require.NotContains(t, r.stdout, "routing")
	require.NotContains(t, r.stdout, "min_confidence")
}
