package httpjsonwire

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

// concretePath fills a route template's variables: {taskId} (or {id} alone) with task, the
// {id} beside {taskId} with config.
func concretePath(template, task, config string) string {
	if strings.Contains(template, "{taskId}") {
		return strings.ReplaceAll(strings.ReplaceAll(template, "{taskId}", task), "{id}", config)
	}
	return strings.ReplaceAll(template, "{id}", task)
}

// requireRoute checks that path, under v, matches a route serving op with method, and binds
// the ids and tenant given.
func requireRoute(t *testing.T, v protocol.Version, op protocol.Operation, method, path, tenant, task, config string) {
	t.Helper()
	rt, gotTenant, perr := matchRoute(v, path)
	require.Nil(t, perr, "%s %s", v, path)
	i := slices.Index(rt.methods, method)
	require.GreaterOrEqual(t, i, 0, "%s %s %s: methods %v", v, method, path, rt.methods)
	require.Equal(t, op, rt.ops[i], "%s %s %s", v, method, path)
	require.Equal(t, tenant, gotTenant, path)
	require.Equal(t, task, rt.taskID, path)
	require.Equal(t, config, rt.configID, path)
}

// TestOperationNamesRoundTrip: every operation is found by every HTTP+JSON route the table
// gives it, in every version, and a handler call builds that route back (the JSON-RPC methods:
// jsonrpcwire.TestMethodNamesRoundTrip; the gRPC methods: grpcwire.TestServiceNamesRoundTrip).
func TestOperationNamesRoundTrip(t *testing.T) {
	for _, o := range protocol.Operations() {
		s := o.Spec()
		op := s.Op
		t.Run(string(op), func(t *testing.T) {
			require.True(t, op.Known())
			for _, r := range s.REST {
				task, config := "", ""
				if strings.Contains(r.Path, "{") {
					task = "t-1"
				}
				if strings.Contains(r.Path, "{taskId}") && strings.Contains(r.Path, "{id}") {
					config = "c-1"
				}
				path := concretePath(r.Path, "t-1", "c-1")
				for _, v := range []protocol.Version{protocol.V1, protocol.V03} {
					requireRoute(t, v, op, r.Method, path, "", task, config)
					requireRoute(t, v, op, r.Method, "/acme"+path, "acme", task, config)
				}
				requireRoute(t, protocol.V03, op, r.Method, "/v1"+path, "", task, config)
				if r.Call {
					method, got, ok := HTTPCall(op, "", task, config)
					require.True(t, ok)
					require.Equal(t, r.Method, method)
					require.Equal(t, path, got)
				}
			}
			for _, r := range s.REST03 {
				requireRoute(t, protocol.V03, op, r.Method, "/v1"+r.Path, "", "", "")
				_, _, perr := matchRoute(protocol.V1, "/v1"+r.Path)
				require.NotNil(t, perr, "a 0.3-only route is not 1.0's")
			}
			for _, r := range s.Fixed {
				for _, v := range []protocol.Version{protocol.V1, protocol.V03} {
					requireRoute(t, v, op, r.Method, r.Path, "", "", "")
				}
			}
			calls := 0
			for _, r := range s.REST {
				if r.Call {
					calls++
				}
			}
			require.LessOrEqual(t, calls, 1, "one route to call a handler with")
		})
	}
}
