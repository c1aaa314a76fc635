package interop

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/test/testutil"
)

// a2aGoBindings are the bindings a2a-go v2 reaches capgate over.
var a2aGoBindings = []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC}

// a2aGoFromCard is an a2a-go v2.3.1 client built the way its documentation builds one, from the
// card alone: the card resolver's default parser (no A2A-Version header), the client factory
// with a2a-go's own transports (a2agrpc.WithGRPCTransport dials the card's gRPC URL as given;
// plaintext, as the test's capgate serves h2c), preferring binding, and a2a-go's
// AuthInterceptor with the caller's token stored under the card's bearer scheme. The card's
// interfaces are not rewritten. The context carries the session id the interceptor looks up.
func a2aGoFromCard(t *testing.T, base string, binding a2a.TransportProtocol, tok string) (*a2aclient.Client, context.Context, error) {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	c, err := agentcard.NewResolver(hc).Resolve(t.Context(), base)
	if err != nil {
		return nil, nil, err
	}
	creds := a2aclient.NewInMemoryCredentialsStore()
	creds.Set("session-1", card.BearerSchemeName, a2aclient.AuthCredential(tok))
	client, err := a2aclient.NewFromCard(t.Context(), c,
		a2aclient.WithJSONRPCTransport(hc),
		a2aclient.WithRESTTransport(hc),
		a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}),
		a2aclient.WithCallInterceptors(&a2aclient.AuthInterceptor{Service: creds}),
	)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { _ = client.Destroy() })
	return client, a2aclient.AttachSessionID(t.Context(), "session-1"), nil
}

func hinted(skill, text string) *a2a.SendMessageRequest {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	msg.Metadata = map[string]any{"skillId": skill}
	return &a2a.SendMessageRequest{Message: msg}
}

// TestA2AGoFromCard: a2a-go v2 works from capgate's card as served, on every binding, and its
// AuthInterceptor attaches the token when the card states requirements in the form a2a-go
// reads (cards.security_requirements: a2a-go). With the default (omit) it dials every binding
// but sends no token; with the proto's form its resolver cannot parse the card at all
// (a2aproject/a2a-go#430). docs/interop.md's client matrix has these rows.
func TestA2AGoFromCard(t *testing.T) {
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"invoices.read", "recon.run"}})

	t.Run("security_requirements: a2a-go", func(t *testing.T) {
		base, _ := frontedServer(t, "cards: {security_requirements: a2a-go}\n")
		for _, b := range a2aGoBindings {
			t.Run(string(b), func(t *testing.T) {
				c, ctx, err := a2aGoFromCard(t, base, b, tok)
				require.NoError(t, err)
				res, err := c.SendMessage(ctx, hinted("reconcile-invoice", "reconcile INV-20931 against its PO"))
				require.NoError(t, err, "the interceptor attached the token")
				task, ok := res.(*a2a.Task)
				require.True(t, ok, "%T", res)
				require.Equal(t, a2a.TaskStateCompleted, task.Status.State)

				ext, err := c.GetExtendedAgentCard(ctx, &a2a.GetExtendedAgentCardRequest{})
				require.NoError(t, err)
				ids := map[string]bool{}
				for _, s := range ext.Skills {
					ids[s.ID] = true
				}
				require.True(t, ids["reconcile-invoice"], "the extended card: %v", ids)
				require.Len(t, ext.SecurityRequirements, 1, "read back over %s", b)

				got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
				require.NoError(t, err)
				require.Equal(t, task.ID, got.ID)
			})
		}
	})

	t.Run("security_requirements: omit (the default)", func(t *testing.T) {
		base, _ := frontedServer(t)
		for _, b := range a2aGoBindings {
			t.Run(string(b), func(t *testing.T) {
				c, ctx, err := a2aGoFromCard(t, base, b, tok)
				require.NoError(t, err, "every form of the card parses")
				_, err = c.SendMessage(ctx, hinted("lookup-invoice", "status of INV-20931"))
				require.ErrorIs(t, err, a2a.ErrUnauthenticated, "the card dialled, but no requirement: no token")
			})
		}
	})

	// a2a-go's resolver sends no A2A-Version: with cards.default_version "0.3" it is handed the
	// 0.3 card, which it cannot use (capgate validate warns about the setting).
	t.Run("cards.default_version: 0.3", func(t *testing.T) {
		base, _ := frontedServer(t, "cards: {default_version: \"0.3\"}\n")
		_, _, err := a2aGoFromCard(t, base, a2a.TransportProtocolJSONRPC, tok)
		require.Error(t, err, "the 0.3 card is no 1.0 card")
		t.Logf("a2a-go v2 given the 0.3 card: %v", err)
	})

	t.Run("security_requirements: proto", func(t *testing.T) {
		base, _ := frontedServer(t, "cards: {security_requirements: proto}\n")
		_, _, err := a2aGoFromCard(t, base, a2a.TransportProtocolJSONRPC, tok)
		require.ErrorContains(t, err, "card parsing failed", "a2a-go v2.3.1 reads scopes as a bare array (a2a-go#430)")
	})
}
