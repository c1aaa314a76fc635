package routing_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/capgate/capgate/test/testutil"
)

// anyOfFinance is the finance example with the any-of example manifest
// (test/testdata/any-of): admins or shift leads may decommission.
func anyOfFinance(t *testing.T) string {
	t.Helper()
	cfg := financeCopy(t, "  payments.remittance: builtin:echo\n", "  payments.remittance: builtin:echo\n  fleet.decommission: builtin:echo\n")
	b, err := os.ReadFile(filepath.Join("..", "testdata", "any-of", "decommission-vehicle.yaml"))
	require.NoError(t, err)
	testutil.WriteFile(t, cfg, "capabilities/decommission-vehicle.yaml", string(b))
	return cfg
}

// TestAnyOfEndToEnd: an admin and a shift lead (dispatch + shift lead)
// both see decommission-vehicle in their extended card, reach it by a
// hint and run it with a handler token carrying the alternative that
// granted it; a dispatcher who is no shift lead sees nothing, and its
// hint is ignored. The decision log names the alternative.
func TestAnyOfEndToEnd(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, anyOfFinance(t)))
	const id = "decommission-vehicle"
	callers := []struct {
		name     string
		scopes   []string
		entitled bool
		granted  []string // the handler token's scopes
	}{
		{"admin", []string{"fleet.admin"}, true, []string{"fleet.admin"}},
		{"shift lead", []string{"fleet.shift_lead", "fleet.dispatch", "recon.run"}, true, []string{"fleet.dispatch", "fleet.shift_lead"}},
		{"admin and shift lead", []string{"fleet.admin", "fleet.dispatch", "fleet.shift_lead"}, true, []string{"fleet.admin", "fleet.dispatch", "fleet.shift_lead"}},
		{"dispatcher only", []string{"fleet.dispatch"}, false, nil},
		{"shift lead without dispatch", []string{"fleet.shift_lead"}, false, nil},
	}
	require.NotContains(t, skillIDsOf(srv.PublicCard(t)), id)
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			client := jsonrpc(t, srv, testutil.TokenOptions{Subject: "driver-" + c.name, Scopes: c.scopes})
			card, err := client.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
			require.NoError(t, err)
			msg := func() *a2a.Message { return hinted(text("Decommission vehicle V-17"), id) }
			if !c.entitled {
				require.NotContains(t, skillIDsOf(card), id)
				ignored := func() int {
					return srv.Logs.FilterMessage("skill hint ignored").FilterField(zap.String("hint", id)).Len()
				}
				before := ignored()
				task := sendTask(t, client, msg())
				if task.Status.State == a2a.TaskStateCompleted {
					require.NotEqual(t, id, reportOf(t, task).Capability)
				}
				require.Equal(t, before+1, ignored(), "the hint of a caller holding no alternative is ignored, and logged")
				return
			}
			require.Contains(t, skillIDsOf(card), id)
			r := reportOf(t, sendTask(t, client, msg()))
			require.Equal(t, id, r.Capability)
			require.Equal(t, c.granted, r.Scopes, "the token carries requires_scopes and the alternatives held, nothing else")
			var rules []any
			for _, e := range srv.DecisionEntries() {
				if e["capability"] == id {
					rs, _ := e["rules"].([]any)
					rules = append(rules, rs...)
				}
			}
			require.Contains(t, fmt.Sprint(rules), "scope.any_of_held", "the decision log names the any-of rule: %v", rules)
		})
	}
}

func skillIDsOf(c *a2a.AgentCard) []string {
	ids := make([]string, 0, len(c.Skills))
	for _, s := range c.Skills {
		ids = append(ids, s.ID)
	}
	return ids
}
