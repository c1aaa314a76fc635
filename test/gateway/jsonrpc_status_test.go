package gateway_test

import (
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// TestJSONRPCAuthStatusA2AGo records what the a2a-go v2 JSON-RPC client
// makes of each auth.jsonrpc_http_status (docs/interop.md): with 200 it
// gets the typed A2A error; with 401 it gets an HTTP error and loses the
// type — the reason 200 is the default.
func TestJSONRPCAuthStatusA2AGo(t *testing.T) {
	for _, tc := range []struct {
		setting string
		typed   bool
	}{{"200", true}, {"401", false}} {
		t.Run(tc.setting, func(t *testing.T) {
			cfg := testutil.CopyFinance(t)
			testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
				return replaceOnce(t, s, "auth:\n", "auth:\n  jsonrpc_http_status: "+tc.setting+"\n")
			})
			srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
			c := srv.Client(t, a2a.TransportProtocolJSONRPC)
			_, err := c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
			require.Error(t, err)
			t.Logf("a2a-go JSON-RPC client, jsonrpc_http_status %s: %v", tc.setting, err)
			require.Equal(t, tc.typed, errors.Is(err, a2a.ErrUnauthenticated))
		})
	}
}
