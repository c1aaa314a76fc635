package replicas_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/replicas/redisproc"
	"github.com/capgate/capgate/test/testutil"
)

// resourceExhausted is capgate's JSON-RPC code for a call over a quota.
const resourceExhausted = -32029

// quotaLimit is the calls per hour the test plan grants one caller.
const quotaLimit = 20

// withPlan writes a finance example whose recon.run callers have one plan
// on reconcile-invoice, quotaLimit calls an hour per caller, failing as
// mode says on a store error; any quotas the example has are replaced.
func withPlan(t *testing.T, mode string) string {
	t.Helper()
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		s = regexp.MustCompile(`(?ms)^quotas:\n(?:[ #].*\n|\n)*`).ReplaceAllString(s, "")
		return s + fmt.Sprintf(`quotas:
  plans:
    - id: replicas
      grant: {scopes: [recon.run]}
      budget: {calls: %d, per: 1h}
      capabilities: [reconcile-invoice]
      on_store_error: %s
`, quotaLimit, mode)
	})
	return cfg
}

// quotaCluster is two replicas of cfg on store, sharing the upstream.
func quotaCluster(t *testing.T, cfg, store string) *cluster {
	t.Helper()
	c := &cluster{upstream: testutil.NewUpstream(t, testutil.LoadDeployment(t, cfg))}
	start := func() *testutil.Server {
		d := testutil.LoadDeployment(t, cfg)
		d.Config.Store = store
		c.upstream.Use(d)
		return testutil.Start(t, d)
	}
	c.a, c.b = start(), start()
	return c
}

// burst sends n new messages (each its own messageId) as tok, spread over
// both replicas by workers goroutines, and counts the answers: admitted (a
// task), throttled (-32029 naming the plan, with a retry delay) and any
// other (returned for the test to report).
func burst(t *testing.T, c *cluster, tok string, n, workers int) (admitted, throttled int64, other []string, elapsed time.Duration) {
	t.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv := c.a
			if w%2 == 1 {
				srv = c.b
			}
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				r, err := call(srv, tok, "SendMessage", reconcile(fmt.Sprintf("q-%d-%d", time.Now().UnixNano(), i), ""))
				switch {
				case err != nil:
					mu.Lock()
					other = append(other, err.Error())
					mu.Unlock()
				case r.Error == nil && r.task().ID != "":
					atomic.AddInt64(&admitted, 1)
				case r.Error != nil && r.Error.Code == resourceExhausted && strings.Contains(r.Raw, "plan.replicas") && strings.Contains(r.Raw, "RetryInfo"):
					atomic.AddInt64(&throttled, 1)
				default:
					mu.Lock()
					other = append(other, r.Raw)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return admitted, throttled, other, time.Since(start)
}

// slack is how many calls beyond the limit may be admitted in elapsed:
// the counter is GCRA (a burst of the limit, refilled continuously at
// limit per window), so while the test runs the budget refills by
// limit × elapsed / window calls, rounded up. Nothing else: each charge
// is one atomic script on the server, so two replicas cannot both take
// the last call.
func slack(elapsed time.Duration) int64 {
	return int64(math.Ceil(float64(quotaLimit) * elapsed.Seconds() / time.Hour.Seconds()))
}

// TestQuotaAcrossReplicas: one caller sends three times its budget at
// once through two replicas sharing the store; the total admitted is the
// limit plus the stated slack (see slack), every other call is refused
// over the plan in the binding's shape, and none fails otherwise. On a
// single Redis and on a Redis Cluster (three masters, one replica each).
func TestQuotaAcrossReplicas(t *testing.T) {
	stores := map[string]func(t *testing.T) string{
		"redis": func(t *testing.T) string { return redisproc.Start(t).URL(0) },
		"cluster": func(t *testing.T) string {
			nodes := redisproc.StartCluster(t, 3, 1)
			addrs := make([]string, 0, 3)
			for _, n := range nodes[:3] {
				addrs = append(addrs, n.Addr)
			}
			return "redis-cluster://" + strings.Join(addrs, ",")
		},
	}
	for _, name := range []string{"redis", "cluster"} {
		t.Run(name, func(t *testing.T) {
			c := quotaCluster(t, withPlan(t, "closed"), stores[name](t))
			owner := testutil.Token(t, partner)
			admitted, throttled, other, elapsed := burst(t, c, owner, 3*quotaLimit, 8)
			require.Empty(t, other, "every call is admitted or throttled")
			s := slack(elapsed)
			t.Logf("%s: %d admitted, %d throttled in %s (limit %d, slack %d)", name, admitted, throttled, elapsed, quotaLimit, s)
			require.LessOrEqual(t, admitted, int64(quotaLimit)+s, "two replicas admit no more than the limit plus the refill while the test ran")
			require.GreaterOrEqual(t, admitted, int64(quotaLimit), "the whole budget is usable: no call is charged twice")
			require.Equal(t, int64(3*quotaLimit), admitted+throttled)

			// Another caller of the same plan has a budget of its own.
			r, err := call(c.b, testutil.Token(t, intruder), "SendMessage", reconcile("q-other", ""))
			require.NoError(t, err)
			require.Nil(t, r.Error, "another caller's counter is its own: %s", r.Raw)
		})
	}
}

// TestQuotaStoreOutage: with Redis down, a plan with on_store_error closed
// refuses the call before its handler (UNAVAILABLE, the decision naming
// quota.store_error); one with open lets it through uncounted (the handler
// answers), and the metrics say which. The call is the finance example's
// extension method finance/explainVariance (served by reconcile-invoice):
// admission charges it, and it needs no task binding, so the task store's
// own outage does not answer first, as it would for a message.
func TestQuotaStoreOutage(t *testing.T) {
	for _, mode := range []string{"closed", "open"} {
		t.Run(mode, func(t *testing.T) {
			rds := redisproc.Start(t)
			c := quotaCluster(t, withPlan(t, mode), rds.URL(0))
			owner := testutil.Token(t, partner)
			status, body, id := variance(t, c.a, owner)
			require.Equal(t, http.StatusOK, status)
			require.NotContains(t, body, `"error"`, "counted while Redis is up: %s", body)
			c.a.WaitDecision(t, id)
			rds.Kill()

			status, body, id = variance(t, c.a, owner)
			dec := c.a.WaitDecision(t, id)
			metrics := scrape(t, c.a)
			switch mode {
			case "closed":
				require.Contains(t, body, `"error"`, "refused: %s", body)
				require.Equal(t, "quota.store_error", dec[0]["rule"], "refused by the quota, before the handler: %v", dec[0])
				require.Equal(t, "UNAVAILABLE", dec[0]["code"])
				require.Regexp(t, `capgate_quota_calls_total\{capability="reconcile-invoice",quota="plan.replicas",result="store_error_closed"\} 1`, metrics)
			case "open":
				require.Equal(t, http.StatusOK, status)
				require.NotContains(t, body, `"error"`, "let through uncounted, the handler answered: %s", body)
				require.Regexp(t, `capgate_quota_calls_total\{capability="reconcile-invoice",quota="plan.replicas",result="store_error_open"\} 1`, metrics)
			}
		})
	}
}

// variance calls finance/explainVariance through srv as tok and returns
// the status, the body and the decision id.
func variance(t *testing.T, srv *testutil.Server, tok string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.Endpoint("/"), strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"finance/explainVariance","params":{"invoice":"INV-1"}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("A2A-Extensions", "https://example.com/ext/variance/v1")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := srv.HTTP.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header.Get("X-Capgate-Decision-Id")
}

func scrape(t *testing.T, srv *testutil.Server) string {
	t.Helper()
	resp, err := srv.HTTP.Get(srv.Admin("/metrics"))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
