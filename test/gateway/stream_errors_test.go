package gateway_test

import (
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// A streaming call refused before its stream starts must reach the a2a-go
// client as a typed error, not as an empty stream.
func TestStreamingRefusalReachesTheClient(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	c := srv.Client(t, a2a.TransportProtocolJSONRPC, testutil.Bearer(tok))

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
	require.True(t, errors.Is(got, a2a.ErrTaskNotFound), "got %v", got)

	anon := srv.Client(t, a2a.TransportProtocolJSONRPC)
	got = nil
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("look up invoice INV-1"))
	for _, err := range anon.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			got = err
			break
		}
	}
	require.True(t, errors.Is(got, a2a.ErrUnauthenticated), "got %v", got)
}
