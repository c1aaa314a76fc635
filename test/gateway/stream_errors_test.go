package gateway_test

import (
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// A streaming call refused before its stream starts must reach the a2a-go
// client as an error, not as an empty stream: over A2A 1.0 JSON-RPC the refusal
// is a plain JSON-RPC error with the error's HTTP status, which a2a-go v2.3.1's
// JSON-RPC client (it reads streaming answers as SSE only) reports by its
// status, untyped; its HTTP+JSON and gRPC transports report it typed.
func TestStreamingRefusalReachesTheClient(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	for _, transport := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC} {
		t.Run(string(transport), func(t *testing.T) {
			check := func(got error, typed error, status string) {
				t.Helper()
				require.Error(t, got, "an error, not an empty stream")
				if transport == a2a.TransportProtocolJSONRPC {
					require.Contains(t, got.Error(), status, "a2a-go's JSON-RPC client reports the status")
					return
				}
				require.True(t, errors.Is(got, typed), "got %v", got)
			}
			c := srv.Client(t, transport, testutil.Bearer(tok))
			var got error
			events := 0
			for _, err := range c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: "no-such-task"}) {
				if err != nil {
					got = err
					break
				}
				events++
			}
			require.Zero(t, events)
			check(got, a2a.ErrTaskNotFound, "404")

			anon := srv.Client(t, transport)
			got = nil
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("look up invoice INV-1"))
			for _, err := range anon.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
				if err != nil {
					got = err
					break
				}
			}
			check(got, a2a.ErrUnauthenticated, "401")
		})
	}
}
