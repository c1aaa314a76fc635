package gateway_test

import (
	"errors"
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacyclient "github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// legacyClient is an a2a-go v0.3.15 client (a genuine A2A 0.3 client: it sends no A2A-Version)
// of srv's JSON-RPC interface, with tok as its bearer token ("" for none).
func legacyClient(t *testing.T, srv *testutil.Server, tok string) *legacyclient.Client {
	t.Helper()
	opts := []legacyclient.FactoryOption{legacyclient.WithJSONRPCTransport(srv.HTTP)}
	if tok != "" {
		opts = append(opts, legacyclient.WithInterceptors(legacyclient.NewStaticCallMetaInjector(legacyclient.CallMeta{"authorization": {"Bearer " + tok}})))
	}
	c, err := legacyclient.NewFromEndpoints(t.Context(), []legacy.AgentInterface{{URL: srv.URL, Transport: legacy.TransportProtocolJSONRPC}}, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// requireTyped requires err to be the typed a2a-go v0.3 error want, carrying capgate's ErrorInfo
// (the error's data, one object) as its details.
func requireTyped(t *testing.T, err, want error, reason string) {
	t.Helper()
	require.ErrorIs(t, err, want)
	var e *legacy.Error
	require.True(t, errors.As(err, &e), "%T: %v", err, err)
	require.Equal(t, reason, e.Details["reason"], "%v", e.Details)
	require.Equal(t, "a2a-protocol.org", e.Details["domain"], "%v", e.Details)
}

// TestA2AGoV03ClientReadsTypedErrors: a2a-go v0.3.15, a 0.3 client nobody here wrote, reads
// capgate's JSON-RPC errors as its typed errors — refusals by admission, the handler's own answer
// relayed in capgate's shape, and a streaming call refused before its stream — and is served
// where it may be. It decodes an error's data as an object only; an array made every error
// reach it untyped ("cannot unmarshal array into … Error.error.data").
func TestA2AGoV03ClientReadsTypedErrors(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, testutil.CopyFinance(t)))
	tok := testutil.Token(t, grpcCaller)
	c := legacyClient(t, srv, tok)
	ctx := t.Context()

	msg := legacy.NewMessage(legacy.MessageRoleUser, legacy.TextPart{Text: "look up invoice INV-1"})
	msg.Metadata = map[string]any{"skillId": "lookup-invoice"}
	res, err := c.SendMessage(ctx, &legacy.MessageSendParams{Message: msg})
	require.NoError(t, err)
	task, ok := res.(*legacy.Task)
	require.True(t, ok, "%T", res)
	require.Equal(t, legacy.TaskStateCompleted, task.Status.State)

	_, err = c.GetTask(ctx, &legacy.TaskQueryParams{ID: "task-nobody-holds"})
	requireTyped(t, err, legacy.ErrTaskNotFound, "TASK_NOT_FOUND")

	// The handler's own answer (its task is complete), relayed in capgate's shape.
	_, err = c.CancelTask(ctx, &legacy.TaskIDParams{ID: task.ID})
	requireTyped(t, err, legacy.ErrTaskNotCancelable, "TASK_NOT_CANCELABLE")

	// A streaming call refused before its stream: one SSE event holding the error.
	cont := legacy.NewMessage(legacy.MessageRoleUser, legacy.TextPart{Text: "continue"})
	cont.TaskID = "task-nobody-holds"
	var streamErrs []error
	for ev, err := range c.SendStreamingMessage(ctx, &legacy.MessageSendParams{Message: cont}) {
		require.Nil(t, ev)
		streamErrs = append(streamErrs, err)
	}
	require.Len(t, streamErrs, 1)
	requireTyped(t, streamErrs[0], legacy.ErrTaskNotFound, "TASK_NOT_FOUND")

	_, err = legacyClient(t, srv, "").GetTask(ctx, &legacy.TaskQueryParams{ID: task.ID})
	requireTyped(t, err, legacy.ErrUnauthenticated, "UNAUTHENTICATED")
}

// TestA2AGoV2RESTClient03SkillHint: a2a-go v2's 0.3 REST client snake-cases every key it sends,
// metadata's too, so a skillId hint arrives as metadata.skill_id; capgate reads it as the hint
// (an alias, in 0.3 only) under the same entitlement rules: a caller entitled to the skill is
// routed to it, one that is not is not.
func TestA2AGoV2RESTClient03SkillHint(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, testutil.CopyFinance(t)))
	tr, err := a2av0.NewRESTTransport(a2av0.RESTTransportConfig{URL: srv.URL, Client: srv.HTTP})
	require.NoError(t, err)
	send := func(t *testing.T, who testutil.TokenOptions) *a2a.Task {
		t.Helper()
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("please take care of this"))
		msg.Metadata = map[string]any{"skillId": "reconcile-invoice"}
		// a2aclient.Client sends A2A-Version: 0.3 on every call of a 0.3 interface.
		params := a2aclient.ServiceParams{"authorization": {"Bearer " + testutil.Token(t, who)}, a2a.SvcParamVersion: {"0.3"}}
		res, err := tr.SendMessage(t.Context(), params, &a2a.SendMessageRequest{Message: msg})
		require.NoError(t, err)
		task, ok := res.(*a2a.Task)
		require.True(t, ok, "%T", res)
		return task
	}

	task := send(t, grpcCaller) // holds recon.run
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State, "the hint was not honoured: %+v", task.Status)
	require.NotEmpty(t, task.Artifacts)
	report, ok := task.Artifacts[0].Parts[0].Data().(map[string]any)
	require.True(t, ok, "%T", task.Artifacts[0].Parts[0].Data())
	require.Equal(t, "reconcile-invoice", report["capability"])

	// Without recon.run the hint is not honoured: the text alone does not pick a skill, so the
	// caller is asked to choose — among what it may use.
	task = send(t, testutil.TokenOptions{Subject: "partner-2", Tenant: "acme"})
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State, "%+v", task.Status)
}
