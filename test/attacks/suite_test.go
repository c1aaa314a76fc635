package attacks_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/capgate/capgate/sidecar/protocol"
)

func TestAttacks(t *testing.T) {
	tg := start(t)
	f := setup(t, tg)
	for _, a := range cases(t, f) {
		t.Run(a.name, func(t *testing.T) {
			t.Run("gateway", func(t *testing.T) {
				assertOutcome(t, tg.sendHTTP(t, a.req), a.gw)
			})
			if a.gatewayOnly {
				return
			}
			w := a.gw
			if a.az != nil {
				w = *a.az
			}
			t.Run("extauthz", func(t *testing.T) {
				r := tg.check(t, a.req)
				require.Equal(t, w.grpcCode, r.grpcCode, "the Check call's gRPC status")
				if w.grpcCode != codes.OK {
					return
				}
				assertOutcome(t, r, w)
			})
		})
	}
	stillServes(t, tg)
}

// assertOutcome checks one answer against its expected outcome.
func assertOutcome(t *testing.T, r response, w want) {
	t.Helper()
	if w.then != nil {
		defer w.then(t, r)
	}
	t.Logf("answer: allowed=%v status=%d grpc=%v body=%.300s", r.allowed, r.status, r.grpcCode, r.body)
	require.Less(t, r.status, 500, "capgate answered 5xx: %s", r.body)
	if w.status != 0 {
		require.Equal(t, w.status, r.status, "%s", r.body)
		return
	}
	switch {
	case w.allow:
		require.True(t, r.allowed, "want success, got %d %s", r.status, r.body)
		return
	case w.notReach != "":
		if r.allowed {
			require.NotContains(t, string(r.body), `"capability":"`+w.notReach+`"`, "BYPASS: the handler of %s ran", w.notReach)
		} else {
			_, ok := parseError(t, r.body)
			require.True(t, ok, "a refusal without an A2A error: %d %s", r.status, r.body)
		}
		return
	case w.mayAllow:
		if !r.allowed {
			_, ok := parseError(t, r.body)
			require.True(t, ok, "a refusal without an A2A error: %d %s", r.status, r.body)
		}
		return
	}
	require.False(t, r.allowed, "BYPASS: want %s, got success %d %s", w.code, r.status, r.body)
	we, ok := parseError(t, r.body)
	require.True(t, ok, "a refusal without an A2A error: %d %s", r.status, r.body)
	e := protocol.Errorf(w.code, "")
	assert.Equal(t, e.Reason(), we.reason, "reason; body %s", r.body)
	if we.httpCode != 0 { // HTTP+JSON: google.rpc.Status
		assert.Equal(t, e.HTTPStatus(), we.httpCode, "body code; body %s", r.body)
		assert.Equal(t, e.HTTPStatus(), r.status, "HTTP status; body %s", r.body)
	} else {
		assert.Equal(t, e.JSONRPCCode(), we.jsonrpcCode, "JSON-RPC code; body %s", r.body)
		assert.Contains(t, []int{http.StatusOK, e.HTTPStatus()}, r.status, "HTTP status; body %s", r.body)
	}
	for k, v := range w.meta {
		assert.Equal(t, v, we.metadata[k], "metadata %s; body %s", k, r.body)
	}
}

// stillServes: after the suite the process answers normally and never
// panicked or failed internally.
func stillServes(t *testing.T, tg *target) {
	t.Helper()
	for _, u := range []string{"http://" + tg.addrs.A2A + "/.well-known/agent-card.json", "http://" + tg.addrs.Admin + "/healthz", "http://" + tg.addrs.Admin + "/readyz"} {
		resp, err := http.Get(u)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, u)
	}
	for _, e := range tg.logs.All() {
		msg := e.Message + " " + fmt.Sprint(e.ContextMap())
		require.NotContains(t, strings.ToLower(msg), "panic", "log: %s", msg)
		require.NotEqual(t, "request failed", e.Message, "an internal error: %v", e.ContextMap())
	}
}
