package gateway_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/test/testutil"
)

// TestSeriesAtZeroFromStart: before the first request, /metrics already has
// every series an alert reads — each decision code of every operation at
// both doors (listed from the operation table and metrics.DecisionCodes, as
// the doors list them), both reload results, every store operation's
// errors — at 0, and the memory store reachable.
func TestSeriesAtZeroFromStart(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""), testutil.StartOptions{ExtAuthz: true})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.Admin("/metrics"), nil)
	require.NoError(t, err)
	r := srv.RoundTrip(t, req)
	require.Equal(t, http.StatusOK, r.Status)
	body := string(r.Body)

	var want []string
	decision := func(component, op string) {
		for _, c := range metrics.DecisionCodes() {
			want = append(want, `capgate_decisions_total{code="`+c.String()+`",component="`+component+`",operation="`+op+`",result="`+c.Result()+`"} 0`)
		}
	}
	decision("gateway", protocol.UnknownLabel)
	decision("extauthz", protocol.UnknownLabel)
	for _, op := range protocol.Operations() {
		decision("gateway", string(op))
		decision("extauthz", op.Label())
	}
	for _, op := range tasks.Operations() {
		want = append(want, `capgate_store_errors_total{operation="`+op+`"} 0`)
	}
	want = append(want, `capgate_reloads_total{result="ok"} 0`, `capgate_reloads_total{result="rejected"} 0`, `capgate_store_reachable 1`)
	for _, line := range want {
		require.Contains(t, body, line+"\n")
	}
	require.Len(t, metrics.DecisionCodes(), 5, "a fixed set of codes: the label's cardinality is bounded")
}
