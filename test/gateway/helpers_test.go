package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// requestID reads an upstream JSON-RPC request's body (at most 1 MiB) and returns its id as
// JSON, for a fake handler to echo in its answer.
func requestID(r *http.Request) string {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	_ = json.Unmarshal(body, &req)
	return string(req.ID)
}

// replaceOnce replaces the single occurrence of old in s, failing the test
// when there is not exactly one (so an edit to a fixture cannot silently
// do nothing).
func replaceOnce(t testing.TB, s, old, new string) string {
	t.Helper()
	require.Equal(t, 1, strings.Count(s, old), "want exactly one %q", old)
	return strings.Replace(s, old, new, 1)
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// jsonrpcResult checks a JSON-RPC success response and returns its result.
func jsonrpcResult(t testing.TB, r *testutil.Response) []byte {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status)
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &env))
	require.Equal(t, "2.0", env.JSONRPC)
	require.Nil(t, env.Error, "%s", r.Body)
	require.NotEmpty(t, env.Result)
	return env.Result
}
