package dispatch

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tasks"
)

// inCtx is a message hinted at lookup-invoice in context c.
func inCtx(c string) string {
	return strings.Replace(hinted("lookup-invoice"), `"role"`, `"contextId":"`+c+`","role"`, 1)
}

// TestAnswerStaysInTheMessagesContext: a message that names a context (or continues a task
// whose context the handler named) is answered in that context only. A task, a direct reply or
// a stream event in another context is the handler's error (InvalidAgentResponse), not passed
// on, logged for the operator without content, and binds nothing: neither the task nor the other
// context. In the message's own context, the answer is passed on and bound as usual.
func TestAnswerStaysInTheMessagesContext(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		stream bool
		answer string // in context c-other, with secret content
		events []string
	}{
		{name: "task", answer: `{"task":{"id":"t-x","contextId":"c-other","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"s","role":"ROLE_AGENT","parts":[{"text":"secret"}]}}}}`},
		{name: "direct reply", answer: `{"message":{"messageId":"r-1","role":"ROLE_AGENT","contextId":"c-other","parts":[{"text":"secret"}]}}`},
		{name: "stream, first event", stream: true, events: []string{
			`{"task":{"id":"t-x","contextId":"c-other","status":{"state":"TASK_STATE_WORKING"}}}`,
		}},
		{name: "stream, a later event", stream: true, events: []string{
			`{"task":{"id":"t-x","contextId":"c-mine","status":{"state":"TASK_STATE_WORKING"}}}`,
			`{"statusUpdate":{"taskId":"t-x","contextId":"c-other","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"s","role":"ROLE_AGENT","parts":[{"text":"secret"}]}}}}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.inv.result = jsontext.Value(tc.answer)
			for _, e := range tc.events {
				f.inv.events = append(f.inv.events, jsontext.Value(e))
			}
			call := f.call(t, partner, inCtx("c-mine"), nil)
			if tc.stream {
				call.Request.Operation = protocol.SendStreamingMessage
			}
			relayed, perr := answered(f.d.send(ctx, call))
			require.NotNil(t, perr)
			require.Equal(t, protocol.InvalidAgentResponse, perr.Code)
			require.Equal(t, "the handler answered in another context than the message's", perr.Message)
			require.NotContains(t, string(relayed), "c-other", "the answer in another context is not passed on")
			require.NotContains(t, string(relayed), "secret")
			_, held, err := f.store.LookupContext(ctx, "c-other")
			require.NoError(t, err)
			require.False(t, held, "no context is bound from the answer")
			if len(tc.events) < 2 {
				_, bound, err := f.store.Lookup(ctx, "t-x")
				require.NoError(t, err)
				require.False(t, bound, "no task is bound from the answer")
			}
			logged := f.logs.FilterMessage("handler answered in another context than the message's; answer refused").All()
			require.Len(t, logged, 1)
			fields := logged[0].ContextMap()
			require.Equal(t, "c-mine", fields["context"])
			require.Equal(t, "c-other", fields["answer_context"])
			require.Equal(t, "d-1", fields["decision_id"])
			for _, e := range f.logs.All() {
				for _, v := range e.ContextMap() {
					require.NotContains(t, fmt.Sprint(v), "secret", "no content in the operator's log")
				}
			}
		})
	}

	t.Run("in the message's context", func(t *testing.T) {
		f := newFixture(t, nil)
		f.inv.result = jsontext.Value(`{"task":{"id":"t-in","contextId":"c-mine","status":{"state":"TASK_STATE_COMPLETED"}}}`)
		raw, perr := answered(f.d.send(ctx, f.call(t, partner, inCtx("c-mine"), nil)))
		require.Nil(t, perr)
		require.Contains(t, string(raw), "t-in")
		b, ok, err := f.store.Lookup(ctx, "t-in")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "c-mine", b.ContextID)
	})

	t.Run("a continued task's context", func(t *testing.T) {
		f := newFixture(t, nil)
		b := tasks.Binding{TaskID: "t-c", ContextID: "c-task", Capability: "lookup-invoice", Handler: "finance.lookup",
			Issuer: partner.Issuer, Subject: partner.Subject, Tenant: partner.Tenant}
		require.NoError(t, f.store.Bind(ctx, b))
		f.inv.result = jsontext.Value(`{"task":{"id":"t-c","contextId":"c-elsewhere","status":{"state":"TASK_STATE_COMPLETED"}}}`)
		_, perr := answered(f.d.send(ctx, f.call(t, partner, onTask("t-c", "and INV-2?"), &b)))
		require.NotNil(t, perr)
		require.Equal(t, protocol.InvalidAgentResponse, perr.Code)
		_, held, err := f.store.LookupContext(ctx, "c-elsewhere")
		require.NoError(t, err)
		require.False(t, held)
	})

	t.Run("a new conversation is the handler's to start", func(t *testing.T) {
		f := newFixture(t, nil)
		f.inv.result = jsontext.Value(`{"task":{"id":"t-n","contextId":"c-fresh","status":{"state":"TASK_STATE_COMPLETED"}}}`)
		_, perr := answered(f.d.send(ctx, f.call(t, partner, hinted("lookup-invoice"), nil)))
		require.Nil(t, perr)
		c, held, err := f.store.LookupContext(ctx, "c-fresh")
		require.NoError(t, err)
		require.True(t, held)
		require.Equal(t, partner.Subject, c.Subject)
	})
}
