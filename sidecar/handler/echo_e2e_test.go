package handler_test

import (
	"context"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/handler/echo"
	"github.com/capgate/capgate/sidecar/handlerauth"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/protocol"
)

const reconHandler = "recon.v3.reconcile"

type echoFixture struct {
	inv    *handler.Invoker
	minter *identity.Minter
}

func newEchoFixture(t *testing.T) echoFixture {
	t.Helper()
	m, err := identity.GenerateMinter("capgate-test")
	require.NoError(t, err)
	v, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{
		Issuer: m.Issuer(), Audience: reconHandler, Audiences: []string{"lookup"}, JWKS: m.JWKS(),
	})
	require.NoError(t, err)
	inv, err := handler.NewInvoker(map[string]string{reconHandler: "builtin:echo", "lookup": "builtin:echo"},
		handler.WithBuiltin("echo", echo.New(v.Verify)), handler.WithLogger(zaptest.NewLogger(t)))
	require.NoError(t, err)
	return echoFixture{inv: inv, minter: m}
}

func (f echoFixture) token(t *testing.T, c identity.MintClaims) string {
	t.Helper()
	tok, err := f.minter.Mint(c)
	require.NoError(t, err)
	return tok
}

func partnerClaims() identity.MintClaims {
	return identity.MintClaims{
		Subject: "partner-1", Tenant: "acme", Audience: reconHandler, Scopes: []string{"recon.run"},
		Capability: "reconcile-invoice", Actor: "finance-agent", DecisionID: "dec-1",
	}
}

const (
	send10 = `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"reconcile this against the PO"},` +
		`{"raw":"JVBERi0xLjQ=","mediaType":"application/pdf","filename":"inv.pdf"},{"data":{"po":"PO-1"}}]}}`
	send03 = `{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"reconcile this"},` +
		`{"kind":"file","file":{"bytes":"JVBERi0xLjQ=","mimeType":"application/pdf","name":"inv.pdf"}}]}}`
)

// task10 and task03 are the parts of a task result the tests read.
type artifact struct {
	Parts []struct {
		Kind string         `json:"kind"`
		Data map[string]any `json:"data"`
	} `json:"parts"`
}

type task struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Kind      string `json:"kind"`
	Status    struct {
		State string `json:"state"`
	} `json:"status"`
	Artifacts []artifact `json:"artifacts"`
}

func decode[T any](t *testing.T, v jsontext.Value) T {
	t.Helper()
	var out T
	require.NoError(t, json.Unmarshal(v, &out, json.RejectUnknownMembers(false)), string(v))
	return out
}

func wantReport(mediaTypes ...string) map[string]any {
	mt := make([]any, len(mediaTypes))
	for i, m := range mediaTypes {
		mt[i] = m
	}
	return map[string]any{
		"capability": "reconcile-invoice",
		"handler":    reconHandler,
		"principal":  "partner-1",
		"tenant":     "acme",
		"scopes":     []any{"recon.run"},
		"mediaTypes": mt,
	}
}

func TestEchoEndToEnd(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := newEchoFixture(t)
	ctx := t.Context()
	tok := f.token(t, partnerClaims())

	t.Run("1.0 SendMessage, then GetTask and ListTasks", func(t *testing.T) {
		res, perr := f.inv.Call(ctx, handler.Request{Handler: reconHandler, Version: protocol.V1, Method: "SendMessage",
			Params: jsontext.Value(send10), Token: tok, DecisionID: "dec-1"})
		require.Nil(t, perr)
		got := decode[struct {
			Task task `json:"task"`
		}](t, res).Task
		require.Equal(t, "TASK_STATE_COMPLETED", got.Status.State)
		require.Len(t, got.Artifacts, 1)
		require.Len(t, got.Artifacts[0].Parts, 1)
		require.Equal(t, wantReport("application/json", "application/pdf", "text/plain"), got.Artifacts[0].Parts[0].Data)

		res, perr = f.inv.Call(ctx, handler.Request{Handler: reconHandler, Version: protocol.V1, Method: "GetTask",
			Params: jsontext.Value(`{"id":"` + got.ID + `"}`), Token: tok})
		require.Nil(t, perr)
		again := decode[task](t, res)
		require.Equal(t, got.ID, again.ID)
		require.Equal(t, "TASK_STATE_COMPLETED", again.Status.State)

		res, perr = f.inv.Call(ctx, handler.Request{Handler: reconHandler, Version: protocol.V1, Method: "ListTasks",
			Params: jsontext.Value(`{}`), Token: tok})
		require.Nil(t, perr)
		list := decode[struct {
			Tasks []task `json:"tasks"`
		}](t, res)
		require.Len(t, list.Tasks, 1)
		require.Equal(t, got.ID, list.Tasks[0].ID)

		_, perr = f.inv.Call(ctx, handler.Request{Handler: reconHandler, Version: protocol.V1, Method: "CancelTask",
			Params: jsontext.Value(`{"id":"` + got.ID + `"}`), Token: tok})
		require.NotNil(t, perr)
		require.Equal(t, protocol.TaskNotCancelable, perr.Code)

		// Another caller's token cannot see the task.
		other := f.token(t, identity.MintClaims{Subject: "partner-2", Tenant: "acme", Audience: reconHandler, Capability: "reconcile-invoice"})
		_, perr = f.inv.Call(ctx, handler.Request{Handler: reconHandler, Version: protocol.V1, Method: "GetTask",
			Params: jsontext.Value(`{"id":"` + got.ID + `"}`), Token: other})
		require.NotNil(t, perr)
		require.Equal(t, protocol.TaskNotFound, perr.Code)
	})

	t.Run("0.3 message/send, then tasks/get", func(t *testing.T) {
		res, perr := f.inv.Call(ctx, handler.Request{Handler: reconHandler, Version: protocol.V03, Method: "message/send",
			Params: jsontext.Value(send03), Token: tok})
		require.Nil(t, perr)
		got := decode[task](t, res)
		require.Equal(t, "task", got.Kind)
		require.Equal(t, "completed", got.Status.State)
		require.Len(t, got.Artifacts, 1)
		require.Equal(t, "data", got.Artifacts[0].Parts[0].Kind)
		require.Equal(t, wantReport("application/pdf", "text/plain"), got.Artifacts[0].Parts[0].Data)

		res, perr = f.inv.Call(ctx, handler.Request{Handler: reconHandler, Version: protocol.V03, Method: "tasks/get",
			Params: jsontext.Value(`{"id":"` + got.ID + `"}`), Token: tok})
		require.Nil(t, perr)
		require.Equal(t, got.ID, decode[task](t, res).ID)
	})

	t.Run("1.0 streaming yields the task events", func(t *testing.T) {
		var events []jsontext.Value
		perr := f.inv.Stream(ctx, handler.Request{Handler: reconHandler, Version: protocol.V1, Method: "SendStreamingMessage",
			Params: jsontext.Value(send10), Token: tok}, func(r jsontext.Value) error {
			events = append(events, r.Clone()) // r is valid only during the call
			return nil
		})
		require.Nil(t, perr)
		require.Len(t, events, 3)
		ev := decode[map[string]jsontext.Value](t, events[0])
		require.Contains(t, ev, "task")
		art := decode[struct {
			ArtifactUpdate struct {
				Artifact artifact `json:"artifact"`
			} `json:"artifactUpdate"`
		}](t, events[1])
		require.Equal(t, wantReport("application/json", "application/pdf", "text/plain"), art.ArtifactUpdate.Artifact.Parts[0].Data)
		last := decode[struct {
			StatusUpdate struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"statusUpdate"`
		}](t, events[2])
		require.Equal(t, "TASK_STATE_COMPLETED", last.StatusUpdate.Status.State)
	})

	t.Run("0.3 streaming yields the task events", func(t *testing.T) {
		var kinds []string
		perr := f.inv.Stream(ctx, handler.Request{Handler: reconHandler, Version: protocol.V03, Method: "message/stream",
			Params: jsontext.Value(send03), Token: tok}, func(r jsontext.Value) error {
			kinds = append(kinds, decode[struct {
				Kind string `json:"kind"`
			}](t, r).Kind)
			return nil
		})
		require.Nil(t, perr)
		require.Equal(t, []string{"task", "artifact-update", "status-update"}, kinds)
	})
}

func TestEchoRefusesTokens(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := newEchoFixture(t)
	stranger, err := identity.GenerateMinter("capgate-test") // same issuer name, other key
	require.NoError(t, err)
	strangerTok, err := stranger.Mint(partnerClaims())
	require.NoError(t, err)

	noCapability := partnerClaims()
	noCapability.Capability = ""
	otherAudience := partnerClaims()
	otherAudience.Audience = "payments.v1.pay"

	for name, tok := range map[string]string{
		"no capability claim":   f.token(t, noCapability),
		"another handler's aud": f.token(t, otherAudience),
		"another signing key":   strangerTok,
		"not a JWT":             "opaque-token",
	} {
		for _, v := range []struct {
			version protocol.Version
			method  string
			params  string
		}{{protocol.V1, "SendMessage", send10}, {protocol.V03, "message/send", send03}} {
			t.Run(name+" "+string(v.version), func(t *testing.T) {
				_, perr := f.inv.Call(t.Context(), handler.Request{Handler: reconHandler, Version: v.version, Method: v.method,
					Params: jsontext.Value(v.params), Token: tok})
				require.NotNil(t, perr)
				// The echo answers -31401; capgate reports a handler refusing
				// its credential as its own internal failure, not the caller's.
				require.Equal(t, protocol.Internal, perr.Code)
				require.Equal(t, "the skill's handler refused capgate's credential", perr.Message)
			})
		}
	}
}

func TestEchoStreamCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := newEchoFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	perr := f.inv.Stream(ctx, handler.Request{Handler: reconHandler, Version: protocol.V1, Method: "SendStreamingMessage",
		Params: jsontext.Value(send10), Token: f.token(t, partnerClaims())}, func(jsontext.Value) error {
		n++
		cancel()
		return nil
	})
	require.NotNil(t, perr)
	require.Equal(t, protocol.Internal, perr.Code)
	require.Contains(t, perr.Message, "cancelled")
	require.Equal(t, 1, n)
}
