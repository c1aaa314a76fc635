package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/replicas/redisproc"
	"github.com/capgate/capgate/test/testutil"
)

// outageWait bounds each wait for the outage or its end to show (the
// server's probe runs every redisstore.DefaultProbeInterval).
const outageWait = 30 * time.Second

// TestServeStoreOutageIsVisible runs `capgate serve` on a real redis-server,
// kills Redis and restarts it. /metrics shows the outage — the reachability
// gauge at 0, the store's error counter rising, the refused task lookups
// counted as unavailable rather than as refusals — and its end (the gauge
// at 1 again, with no request needed: the probe sees it). /readyz stays
// ready throughout (docs/operations.md: a store outage must not empty the
// Service). The log stream is JSON only, go-redis's own lines included, and
// names the store at start.
func TestServeStoreOutageIsVisible(t *testing.T) {
	srv := redisproc.Start(t)
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return strings.Replace(s, "store: memory", "store: "+srv.URL(0), 1)
	})
	ctx := t.Context()
	sv := serveConfig(t, cfg)
	admin := sv.AdminURL
	get := func(path string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	metric := func(series string) float64 {
		t.Helper()
		_, body := get("/metrics")
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
		require.NotNil(t, m, "no series %s", series)
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		return v
	}
	const (
		reachable   = `capgate_store_reachable`
		lookupErrs  = `capgate_store_errors_total{operation="lookup"}`
		unavailable = `capgate_decisions_total{code="unavailable",component="gateway",operation="GetTask",result="deny"}`
		refused     = `capgate_decisions_total{code="refused",component="gateway",operation="GetTask",result="deny"}`
	)
	tok := testutil.Token(t, testutil.Partner())
	getTask := func() string {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, sv.URL+"/",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"no-such-task"}}`))
		require.NoError(t, err)
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}

	require.Equal(t, 1.0, metric(reachable))
	require.Equal(t, 0.0, metric(lookupErrs))
	require.Contains(t, getTask(), "-32001", "Redis up: a task that does not exist is not found")
	require.Equal(t, 1.0, metric(refused))
	require.Equal(t, 0.0, metric(unavailable))

	srv.Kill()
	require.Contains(t, getTask(), "-32603", "Redis down: unavailable, never not found")
	require.Equal(t, 0.0, metric(reachable))
	require.Equal(t, 1.0, metric(lookupErrs))
	require.Contains(t, getTask(), "-32603")
	require.Equal(t, 2.0, metric(lookupErrs), "the error counter rises with each failed lookup")
	require.Equal(t, 2.0, metric(unavailable))
	require.Equal(t, 1.0, metric(refused), "an outage is not counted as refusals")
	code, body := get("/readyz")
	require.Equal(t, http.StatusOK, code, "a store outage does not take the replica out of its Service")
	require.Equal(t, "ready\n", body)
	require.Eventually(t, func() bool { return metric(`capgate_store_errors_total{operation="ping"}`) >= 1 }, outageWait, 50*time.Millisecond,
		"without traffic the probe keeps seeing the outage")

	srv.Restart()
	require.Eventually(t, func() bool { return metric(reachable) == 1 }, outageWait, 50*time.Millisecond, "the probe sees Redis back")
	require.Contains(t, getTask(), "-32001")
	require.Equal(t, 2.0, metric(refused))

	sv.stop()
	var redisLines, startLines int
	for _, line := range sv.out.Lines() {
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &e), "not JSON: %s", line)
		if e["logger"] == "redis" {
			redisLines++
			require.Equal(t, "redis client", e["msg"])
		}
		if e["msg"] == "task store" {
			startLines++
			require.Equal(t, "single", e["mode"])
			require.Equal(t, "redis://"+srv.Addr+"/0", e["store"])
		}
	}
	require.Positive(t, redisLines, "go-redis's own lines (failed dials) are in the JSON stream")
	require.Equal(t, 1, startLines)
}
