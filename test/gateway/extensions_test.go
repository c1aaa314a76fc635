package gateway_test

import (
	"net/http"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

const unknownExt = "https://unknown.example/x"

// TestExtensions covers A2A-Extensions negotiation with the finance
// example's optional trace extension.
func TestExtensions(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})

	t.Run("declared in the public card", func(t *testing.T) {
		c := srv.PublicCard(t)
		require.Len(t, c.Capabilities.Extensions, 2, "trace ids, and the variance method extension")
		require.Equal(t, testutil.TraceExtension, c.Capabilities.Extensions[0].URI)
		require.False(t, c.Capabilities.Extensions[0].Required)
	})

	cases := []struct {
		name    string
		request []string // A2A-Extensions header lines
		echo    string   // "" means no A2A-Extensions response header
	}{
		{"declared and unknown", []string{testutil.TraceExtension + ", " + unknownExt}, testutil.TraceExtension},
		{"only unknown", []string{unknownExt}, ""},
		{"none", nil, ""},
		{"repeated header lines", []string{unknownExt, testutil.TraceExtension}, testutil.TraceExtension},
		{"requested twice", []string{testutil.TraceExtension + "," + testutil.TraceExtension}, testutil.TraceExtension},
		{"no prefix match", []string{testutil.TraceExtension + "/more"}, ""},
	}
	for _, binding := range bindings {
		for _, tc := range cases {
			t.Run(string(binding)+"/"+tc.name, func(t *testing.T) {
				var rec testutil.Responses
				opts := []testutil.ClientOption{testutil.Bearer(tok), testutil.RecordResponses(&rec)}
				for _, h := range tc.request {
					opts = append(opts, testutil.Header("A2A-Extensions", h))
				}
				c := srv.Client(t, binding, opts...)
				card, err := c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
				require.NoError(t, err)
				require.Contains(t, skillIDs(card), "reconcile-invoice")
				require.Equal(t, tc.echo, rec.Last().Header.Get("A2A-Extensions"))
			})
		}
	}
}

// TestRequiredExtension makes the trace extension required in a copy of the
// finance example.
func TestRequiredExtension(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "description: Trace ids, required: false}", "description: Trace ids, required: true}")
	})
	srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	auth := "Bearer " + tok
	msg := "the agent requires extensions the request did not activate: " + testutil.TraceExtension + "; send them in A2A-Extensions"

	t.Run("card says required", func(t *testing.T) {
		require.True(t, srv.PublicCard(t).Capabilities.Extensions[0].Required)
	})
	t.Run("JSON-RPC without it is -32008 naming it", func(t *testing.T) {
		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":3,"method":"GetExtendedAgentCard"}`, "A2A-Version", "1.0", "Authorization", auth,
			"A2A-Extensions", unknownExt)
		require.JSONEq(t, rpcErr("3", -32008, "EXTENSION_SUPPORT_REQUIRED", msg, "extensions", testutil.TraceExtension), string(r.Body))
		require.Empty(t, r.Header.Get("A2A-Extensions"))
	})
	t.Run("HTTP+JSON without it is 400", func(t *testing.T) {
		r := srv.Do(t, http.MethodGet, "/extendedAgentCard", "", "A2A-Version", "1.0", "Authorization", auth)
		require.Equal(t, http.StatusBadRequest, r.Status)
		require.JSONEq(t, statusErr(400, "FAILED_PRECONDITION", "EXTENSION_SUPPORT_REQUIRED", msg, "extensions", testutil.TraceExtension), string(r.Body))
	})
	for _, binding := range bindings {
		t.Run(string(binding)+"/client", func(t *testing.T) {
			c := srv.Client(t, binding, testutil.Bearer(tok))
			_, err := c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
			require.ErrorIs(t, err, a2a.ErrExtensionSupportRequired)

			var rec testutil.Responses
			c = srv.Client(t, binding, testutil.Bearer(tok), testutil.Header("A2A-Extensions", testutil.TraceExtension), testutil.RecordResponses(&rec))
			card, err := c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
			require.NoError(t, err)
			require.Contains(t, skillIDs(card), "reconcile-invoice")
			require.Equal(t, testutil.TraceExtension, rec.Last().Header.Get("A2A-Extensions"))
		})
	}
	t.Run("a 0.3 client activates it with X-A2A-Extensions", func(t *testing.T) {
		// a2a-go's 0.3 transport sends the 0.3 header name.
		tr := a2av0.NewJSONRPCTransport(a2av0.JSONRPCTransportConfig{URL: srv.URL, Client: srv.HTTP})
		params := a2aclient.ServiceParams{"authorization": {auth}, "a2a-extensions": {testutil.TraceExtension}}
		card, err := tr.GetExtendedAgentCard(t.Context(), params, &a2a.GetExtendedAgentCardRequest{})
		require.NoError(t, err)
		require.Contains(t, skillIDs(card), "reconcile-invoice")

		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":3,"method":"agent/getAuthenticatedExtendedCard"}`, "Authorization", auth,
			"X-A2A-Extensions", testutil.TraceExtension)
		jsonrpcResult(t, r)
		require.Equal(t, testutil.TraceExtension, r.Header.Get("X-A2A-Extensions"))
	})
	t.Run("the 0.3 header name is not read for 1.0 requests", func(t *testing.T) {
		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":3,"method":"GetExtendedAgentCard"}`, "A2A-Version", "1.0", "Authorization", auth,
			"X-A2A-Extensions", testutil.TraceExtension)
		require.JSONEq(t, rpcErr("3", -32008, "EXTENSION_SUPPORT_REQUIRED", msg, "extensions", testutil.TraceExtension), string(r.Body))
	})
}
