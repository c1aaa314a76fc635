package extauthz

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/quota"
	"github.com/capgate/capgate/policy/ratelimit"
	"github.com/capgate/capgate/sidecar/metering"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tasks"
)

// TestCheckPutsChargedQuotasIntoMetadata: an allowed call admission charged
// carries, in its dynamic metadata, one slot per quota as Envoy's rate
// limits read it (ratelimit.Metadata: id, hits, key values with the caller
// bound); a call charged nothing carries none; a call under more quotas
// than the slots is refused, never passed on half counted.
func TestCheckPutsChargedQuotasIntoMetadata(t *testing.T) {
	plans := func(n int) func(string) string {
		return func(c string) string {
			c = regexp.MustCompile(`(?ms)^quotas:\n(?:[ #].*\n|\n)*`).ReplaceAllString(c, "")
			c += "quotas:\n  cost_classes: {medium: 5}\n  plans:\n"
			for i := range n {
				key := "[caller]"
				if i == 0 {
					key = "[tenant, capability]"
				}
				unit := "calls: 100"
				if i == 1 {
					unit = "units: 1000"
				}
				c += "    - id: p" + string(rune('a'+i)) + "\n      grant: {scopes: [recon.run]}\n      budget: {" + unit + ", per: 1h}\n      key: " + key + "\n"
			}
			return c
		}
	}
	variance := rpcBody(`1`, "finance/explainVariance", `{"invoice":"INV-1"}`)
	tok := newTokens(t)
	check := func(t *testing.T, rev *revision.State, auth string) (allowed bool, md map[string]any) {
		t.Helper()
		s := New(revision.NewHolder(rev), tasks.NewMemory(0), WithQuotas(metering.NewEnforcer(metering.NewMemory(time.Now), nil, nil, 0)))
		resp, err := s.Check(t.Context(), jsonrpc(variance, map[string]string{"a2a-version": v1, "authorization": auth,
			"a2a-extensions": "https://example.com/ext/variance/v1"}))
		require.NoError(t, err)
		return resp.GetOkResponse() != nil, resp.GetDynamicMetadata().AsMap()
	}

	allowed, md := check(t, editedRevision(t, plans(2)), tok.bearer("alice", "acme", "recon.run"))
	require.True(t, allowed)
	require.Equal(t, map[string]any{"id": "plan.pa", "hits": "1", "tenant": "acme", "capability": "reconcile-invoice"}, md[ratelimit.SlotKey(0)])
	pb, _ := md[ratelimit.SlotKey(1)].(map[string]any)
	require.Regexp(t, `^[1-9][0-9]*$`, pb["hits"], "a unit budget's hits are the capability's units")
	delete(pb, "hits")
	require.Equal(t, map[string]any{"id": "plan.pb", "caller": quota.Caller("https://idp.example.com", "alice")}, pb)
	require.NotContains(t, md, ratelimit.SlotKey(2))
	require.Equal(t, "ExtensionMethod", md[MetadataOperation])

	// No quota applies to a caller the plans do not grant: no slot.
	allowed, md = check(t, editedRevision(t, func(c string) string {
		return strings.Replace(plans(1)(c), "scopes: [recon.run]", "scopes: [other.scope]", 1)
	}),
		tok.bearer("alice", "acme", "recon.run"))
	require.True(t, allowed)
	require.NotContains(t, md, ratelimit.SlotKey(0))

	allowed, _ = check(t, editedRevision(t, plans(ratelimit.Slots+1)), tok.bearer("alice", "acme", "recon.run"))
	require.False(t, allowed, "more quotas than Envoy's rate limits carry: refused")
}

// TestCounterEnvoyLeavesCountingToTheService: with quotas.counter "envoy",
// ext_authz counts nothing itself — a call over the plan's one call an
// hour is still allowed and still carries its slot for Envoy's rate-limit
// service — while with capgate counting (the default) the second call is
// refused RESOURCE_EXHAUSTED.
func TestCounterEnvoyLeavesCountingToTheService(t *testing.T) {
	variance := rpcBody(`1`, "finance/explainVariance", `{"invoice":"INV-1"}`)
	tok := newTokens(t)
	for _, counter := range []string{"", "capgate", "envoy"} {
		t.Run("counter="+counter, func(t *testing.T) {
			rev := editedRevision(t, func(c string) string {
				c = regexp.MustCompile(`(?ms)^quotas:\n(?:[ #].*\n|\n)*`).ReplaceAllString(c, "")
				c += "quotas:\n  plans:\n    - id: one\n      grant: {scopes: [recon.run]}\n      budget: {calls: 1, per: 1h}\n"
				if counter != "" {
					c += "  counter: " + counter + "\n"
				}
				return c
			})
			s := New(revision.NewHolder(rev), tasks.NewMemory(0), WithQuotas(metering.NewEnforcer(metering.NewMemory(time.Now), nil, nil, 0)))
			for i := range 2 {
				resp, err := s.Check(t.Context(), jsonrpc(variance, map[string]string{"a2a-version": v1,
					"authorization": tok.bearer("alice", "acme", "recon.run"), "a2a-extensions": "https://example.com/ext/variance/v1"}))
				require.NoError(t, err)
				if i == 1 && counter != "envoy" {
					require.Nil(t, resp.GetOkResponse(), "capgate counts: the second call is over the plan")
					require.Contains(t, resp.GetDeniedResponse().GetBody(), "RESOURCE_EXHAUSTED")
					continue
				}
				require.NotNil(t, resp.GetOkResponse(), "call %d", i)
				slot, _ := resp.GetDynamicMetadata().AsMap()[ratelimit.SlotKey(0)].(map[string]any)
				require.Equal(t, "plan.one", slot["id"], "call %d carries its quota for Envoy", i)
			}
		})
	}
}
