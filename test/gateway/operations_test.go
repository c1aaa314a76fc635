package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// TestAdmin covers the admin listener and metrics.
func TestAdmin(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	get := func(t *testing.T, path string) *testutil.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.Admin(path), nil)
		require.NoError(t, err)
		return srv.RoundTrip(t, req)
	}

	t.Run("healthz", func(t *testing.T) {
		r := get(t, "/healthz")
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "ok\n", string(r.Body))
	})
	t.Run("readyz", func(t *testing.T) {
		r := get(t, "/readyz")
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "ready\n", string(r.Body))
	})
	t.Run("metrics count decisions", func(t *testing.T) {
		tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
		for range 3 {
			jsonrpcResult(t, srv.JSONRPC(t, getCard, "A2A-Version", "1.0", "Authorization", "Bearer "+tok))
		}
		for range 2 {
			srv.JSONRPC(t, getCard, "A2A-Version", "1.0")
		}
		srv.JSONRPC(t, `{`, "A2A-Version", "1.0")
		r := get(t, "/metrics")
		require.Equal(t, http.StatusOK, r.Status)
		body := string(r.Body)
		for _, line := range []string{
			`capgate_decisions_total{code="ok",component="gateway",operation="GetExtendedAgentCard",result="allow"} 3`,
			`capgate_decisions_total{code="refused",component="gateway",operation="GetExtendedAgentCard",result="deny"} 2`,
			`capgate_decisions_total{code="invalid",component="gateway",operation="unknown",result="deny"} 1`,
			`capgate_decision_duration_seconds_count{component="gateway"} 6`,
			`capgate_policy_revision_info{revision="` + srv.Deployment.Snapshot.Revision + `"} 1`,
			// The build serving: testutil starts the server without a version or commit.
			`capgate_build_info{commit="",go="` + runtime.Version() + `",version=""} 1`,
		} {
			require.Contains(t, body, line+"\n")
		}
	})
	t.Run("decision events have a UUID id and requested_by", func(t *testing.T) {
		r := srv.JSONRPC(t, getCard, "A2A-Version", "1.0")
		id := r.Header.Get("X-Capgate-Decision-Id")
		require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, id)
		d := srv.WaitDecision(t, id)[0]
		require.Equal(t, "gateway", d["component"])
		require.Regexp(t, `^127\.0\.0\.1:[0-9]+$`, d["requested_by"])
	})
	t.Run("unknown admin path", func(t *testing.T) {
		require.Equal(t, http.StatusNotFound, get(t, "/debug/pprof/").Status)
	})
}

// TestDecisionLog sends requests of every outcome and checks that each one
// writes exactly one decision line, with the id the response carries and
// without the token.
func TestDecisionLog(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	tok := testutil.Token(t, testutil.TokenOptions{Subject: "partner-7", Tenant: "acme", Scopes: []string{"recon.run"}})
	expired := testutil.Token(t, testutil.TokenOptions{Subject: "partner-8", TTL: -time.Hour})
	revision := srv.Deployment.Snapshot.Revision
	require.NotEmpty(t, revision)

	cases := []struct {
		name      string
		do        func(t *testing.T) *testutil.Response
		want      map[string]any // fields that must be present with these values
		absent    []string       // fields that must not be present
		secrets   []string       // text that must not appear anywhere in the logs
		operation string
	}{
		{"allowed JSON-RPC", func(t *testing.T) *testutil.Response {
			return srv.JSONRPC(t, getCard, "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
		}, map[string]any{"principal": "partner-7", "tenant": "acme", "operation": "GetExtendedAgentCard", "result": "allow",
			"binding": "jsonrpc", "a2a_version": "1.0", "component": "gateway"}, []string{"code"}, []string{tok}, ""},
		{"allowed HTTP+JSON", func(t *testing.T) *testutil.Response {
			return srv.Do(t, http.MethodGet, "/extendedAgentCard", "", "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
		}, map[string]any{"principal": "partner-7", "operation": "GetExtendedAgentCard", "result": "allow", "binding": "http+json"}, []string{"code"}, []string{tok}, ""},
		{"allowed 0.3", func(t *testing.T) *testutil.Response {
			return srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"}`, "Authorization", "Bearer "+tok)
		}, map[string]any{"principal": "partner-7", "operation": "GetExtendedAgentCard", "result": "allow", "a2a_version": "0.3"}, nil, []string{tok}, ""},
		{"expired token", func(t *testing.T) *testutil.Response {
			return srv.JSONRPC(t, getCard, "A2A-Version", "1.0", "Authorization", "Bearer "+expired)
		}, map[string]any{"operation": "GetExtendedAgentCard", "result": "deny", "code": "UNAUTHENTICATED"}, []string{"principal"}, []string{expired}, ""},
		{"garbage token", func(t *testing.T) *testutil.Response {
			return srv.JSONRPC(t, getCard, "A2A-Version", "1.0", "Authorization", "Bearer secret-garbage-token-123")
		}, map[string]any{"result": "deny", "code": "UNAUTHENTICATED"}, []string{"principal"}, []string{"secret-garbage-token-123"}, ""},
		{"no token", func(t *testing.T) *testutil.Response {
			return srv.JSONRPC(t, getCard, "A2A-Version", "1.0")
		}, map[string]any{"operation": "GetExtendedAgentCard", "result": "deny", "code": "UNAUTHENTICATED", "reasons": []any{"UNAUTHENTICATED"}}, []string{"principal"}, nil, ""},
		{"parse error", func(t *testing.T) *testutil.Response {
			return srv.JSONRPC(t, `{"jsonrpc":`, "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
		}, map[string]any{"result": "deny", "code": "PARSE_ERROR"}, []string{"operation", "principal"}, []string{tok}, ""},
		{"unsupported version", func(t *testing.T) *testutil.Response {
			return srv.JSONRPC(t, getCard, "A2A-Version", "9", "Authorization", "Bearer "+tok)
		}, map[string]any{"result": "deny", "code": "VERSION_NOT_SUPPORTED"}, []string{"principal"}, []string{tok}, ""},
		{"unknown route", func(t *testing.T) *testutil.Response {
			return srv.Do(t, http.MethodGet, "/nope", "", "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
		}, map[string]any{"result": "deny", "code": "NOT_FOUND"}, []string{"principal"}, []string{tok}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.DecisionEntries())
			r := tc.do(t)
			id := r.Header.Get("X-Capgate-Decision-Id")
			require.NotEmpty(t, id, "the response names its decision")
			got := srv.WaitDecision(t, id)
			require.Len(t, got, 1, "one decision line per request")
			require.Len(t, srv.DecisionEntries(), before+1, "no other line was written")
			e := got[0]
			require.Equal(t, revision, e["policy_revision"])
			require.Contains(t, e, "latency_us")
			for k, v := range tc.want {
				require.Equal(t, v, e[k], k)
			}
			for _, k := range tc.absent {
				require.NotContains(t, e, k)
			}
			all := fmt.Sprint(srv.Decisions.All(), srv.Logs.All())
			for _, s := range tc.secrets {
				require.NotContains(t, all, s)
				// Not even a part of a JWT (header, claims or signature).
				for _, part := range strings.Split(s, ".") {
					require.NotContains(t, all, part)
				}
			}
		})
	}
	t.Run("decision ids are unique", func(t *testing.T) {
		seen := map[any]bool{}
		for _, e := range srv.DecisionEntries() {
			require.False(t, seen[e["decision_id"]], "duplicate id %v", e["decision_id"])
			seen[e["decision_id"]] = true
		}
		require.Len(t, seen, len(cases))
	})
}

// TestGracefulShutdown cancels the server's context while a request is in
// flight: the request completes, and new connections are refused.
func TestGracefulShutdown(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})

	conn, err := net.Dial("tcp", srv.Addrs.A2A)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	br := bufio.NewReader(conn)

	// Headers first, with Expect: 100-continue: the server answers 100
	// Continue when the gateway starts reading the body, so the request is
	// then in flight inside the handler.
	body := getCard
	_, err = fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"+
		"Authorization: Bearer %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", srv.Addrs.A2A, tok, len(body))
	require.NoError(t, err)
	cont, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusContinue, cont.StatusCode)

	srv.Cancel()
	<-srv.Draining()

	// The listener closes at once; the in-flight connection stays.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", srv.Addrs.A2A)
		if err != nil {
			break
		}
		_ = c.Close()
		require.True(t, time.Now().Before(deadline), "the gateway still accepts connections while draining")
	}
	select {
	case <-srv.Done():
		require.FailNow(t, "server.Run returned with a request in flight")
	default:
	}

	_, err = conn.Write([]byte(body))
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, resp.Close, "the drained connection is closed after the response")
	b := make([]byte, resp.ContentLength)
	_, err = io.ReadFull(resp.Body, b)
	require.NoError(t, err)
	r := &testutil.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	require.Contains(t, string(jsonrpcResult(t, r)), `"id":"reconcile-invoice"`)

	<-srv.Done()
	require.NoError(t, srv.Stop())
	for _, addr := range []string{srv.Addrs.A2A, srv.Addrs.Admin} {
		_, err = net.Dial("tcp", addr)
		require.Error(t, err, "%s still accepts connections after shutdown", addr)
	}
}
