package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
	"github.com/capgate/capgate/sidecar/tasks"
)

// switchStore is a memory store whose writes can be made to fail: all of them (down), or only
// those that follow a handler's call (bindDown: Bind and ClaimContext).
type switchStore struct {
	*tasks.Memory
	down, bindDown atomic.Bool
}

func (s *switchStore) Reserve(ctx context.Context, m tasks.Sent, w time.Duration, n int) (tasks.Sent, bool, error) {
	if s.down.Load() {
		return tasks.Sent{}, false, tasks.ErrUnavailable
	}
	return s.Memory.Reserve(ctx, m, w, n)
}

func (s *switchStore) Settle(ctx context.Context, m tasks.Sent, w time.Duration) error {
	if s.down.Load() {
		return tasks.ErrUnavailable
	}
	return s.Memory.Settle(ctx, m, w)
}

func (s *switchStore) Bind(ctx context.Context, b tasks.Binding) error {
	if s.down.Load() || s.bindDown.Load() {
		return tasks.ErrUnavailable
	}
	return s.Memory.Bind(ctx, b)
}

func (s *switchStore) ClaimContext(ctx context.Context, c tasks.Context) (tasks.Context, error) {
	if s.down.Load() || s.bindDown.Load() {
		return tasks.Context{}, tasks.ErrUnavailable
	}
	return s.Memory.ClaimContext(ctx, c)
}

// taskHandler answers SendMessage with a new task per call and GetTask with that task, now
// completed; it counts the SendMessage calls by messageId.
type taskHandler struct {
	mu    sync.Mutex
	sends map[string]int
	err   *protocol.Error
	// release, when set, holds every SendMessage until closed, after a send on entered.
	release, entered chan struct{}
}

func (h *taskHandler) Call(_ context.Context, req handler.Request) (jsontext.Value, *protocol.Error) {
	if req.Method == "GetTask" {
		var p struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(req.Params, &p)
		return jsontext.Value(`{"id":"` + p.ID + `","contextId":"c-` + p.ID + `","status":{"state":"TASK_STATE_COMPLETED"}}`), nil
	}
	var p struct {
		Message struct {
			MessageID string `json:"messageId"`
		} `json:"message"`
	}
	_ = json.Unmarshal(req.Params, &p)
	if h.release != nil {
		h.entered <- struct{}{}
		<-h.release
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sends == nil {
		h.sends = map[string]int{}
	}
	h.sends[p.Message.MessageID]++
	if h.err != nil {
		return nil, h.err
	}
	id := "t-" + p.Message.MessageID + "-" + strconv.Itoa(h.sends[p.Message.MessageID])
	return jsontext.Value(`{"task":{"id":"` + id + `","contextId":"c-` + id + `","status":{"state":"TASK_STATE_WORKING"}}}`), nil
}

func (h *taskHandler) Stream(ctx context.Context, req handler.Request, yield func(jsontext.Value) error) *protocol.Error {
	res, perr := h.Call(ctx, req)
	if perr != nil {
		return perr
	}
	if err := yield(res); err != nil {
		return protocol.AsError(err, protocol.Internal, "stream")
	}
	return nil
}

func (h *taskHandler) count(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sends[id]
}

func onceFixture(t *testing.T) (*fixture, *switchStore, *taskHandler) {
	store := &switchStore{Memory: tasks.NewMemory(0)}
	f := newFixture(t, store)
	h := &taskHandler{}
	f.d = New(store, h, f.tokens, WithLogger(zap.NewNop()))
	return f, store, h
}

func outcome(perr *protocol.Error) string { return perr.Metadata[protocol.MetaOutcome] }

// TestRetriedMessageRunsOnce: a message sent again (same messageId, same owner) is answered
// with the first call's task as its handler reports it now, on both message operations, and
// never reaches the handler again; another owner's message with the same id is another message.
func TestRetriedMessageRunsOnce(t *testing.T) {
	for _, op := range []protocol.Operation{protocol.SendMessage, protocol.SendStreamingMessage} {
		t.Run(string(op), func(t *testing.T) {
			f, _, h := onceFixture(t)
			send := func(p identity.Principal) ([]byte, *protocol.Error) {
				call := f.sameCall(t, p, hinted("lookup-invoice"), nil)
				call.Request.Operation = op
				return answered(f.d.send(t.Context(), call))
			}
			first, perr := send(partner)
			require.Nil(t, perr)
			require.Contains(t, string(first), `"id":"t-m-1-1"`)
			require.Contains(t, string(first), "TASK_STATE_WORKING")
			for range 3 {
				again, perr := send(partner)
				require.Nil(t, perr)
				require.JSONEq(t, `{"task":{"id":"t-m-1-1","contextId":"c-t-m-1-1","status":{"state":"TASK_STATE_COMPLETED"}}}`, string(again),
					"the first call's task, as its handler reports it now")
			}
			require.Equal(t, 1, h.count("m-1"))

			other := partner
			other.Issuer = "https://other-idp.example.com"
			_, perr = send(other)
			require.Nil(t, perr)
			require.Equal(t, 2, h.count("m-1"), "another owner's message is another message")
		})
	}
}

// TestStoreDownRunsNothing: a message the store cannot record is refused before any handler
// call, as Unavailable with outcome not_run; once the store answers, the same message runs.
func TestStoreDownRunsNothing(t *testing.T) {
	f, store, h := onceFixture(t)
	store.down.Store(true)
	_, perr := answered(f.d.send(t.Context(), f.sameCall(t, partner, hinted("lookup-invoice"), nil)))
	require.NotNil(t, perr)
	require.Equal(t, protocol.Unavailable, perr.Code)
	require.Equal(t, protocol.OutcomeNotRun, outcome(perr))
	require.Equal(t, 0, h.count("m-1"), "no handler call while the store is down")

	store.down.Store(false)
	_, perr = answered(f.d.send(t.Context(), f.sameCall(t, partner, hinted("lookup-invoice"), nil)))
	require.Nil(t, perr)
	require.Equal(t, 1, h.count("m-1"))
}

// TestUnrecordedAnswer: when the task the handler answered with cannot be bound, the caller
// learns the outcome is unknown (not "try again"); a retry does not run it again and, once the
// store answers, binds the task and answers with it.
func TestUnrecordedAnswer(t *testing.T) {
	f, store, h := onceFixture(t)
	store.bindDown.Store(true)
	_, perr := answered(f.d.send(t.Context(), f.sameCall(t, partner, hinted("lookup-invoice"), nil)))
	require.NotNil(t, perr)
	require.Equal(t, protocol.Internal, perr.Code)
	require.Equal(t, protocol.OutcomeUnknown, outcome(perr))

	_, perr = answered(f.d.send(t.Context(), f.sameCall(t, partner, hinted("lookup-invoice"), nil)))
	require.NotNil(t, perr, "the binding is still not writable")
	require.Equal(t, 1, h.count("m-1"))

	store.bindDown.Store(false)
	got, perr := answered(f.d.send(t.Context(), f.sameCall(t, partner, hinted("lookup-invoice"), nil)))
	require.Nil(t, perr)
	require.Contains(t, string(got), `"id":"t-m-1-1"`)
	require.Equal(t, 1, h.count("m-1"))
	b, ok, err := store.Lookup(t.Context(), "t-m-1-1")
	require.NoError(t, err)
	require.True(t, ok, "the retry bound the task")
	require.True(t, b.OwnedBy(tasks.Owner{Issuer: partner.Issuer, Subject: partner.Subject, Tenant: partner.Tenant}))
}

// TestInProgressAndRefused: while the first call runs, a retry is told it is in progress
// (Unavailable); a message the handler refused is released, and its retry runs; one whose
// handler failed otherwise is lost: retries are told the outcome is unknown.
func TestInProgressAndRefused(t *testing.T) {
	f, _, h := onceFixture(t)
	h.release, h.entered = make(chan struct{}), make(chan struct{})
	done := make(chan *protocol.Error)
	first := f.sameCall(t, partner, hinted("lookup-invoice"), nil)
	go func() {
		_, perr := answered(f.d.send(context.Background(), first))
		done <- perr
	}()
	<-h.entered // the first call is in its handler
	_, perr := answered(f.d.send(t.Context(), f.sameCall(t, partner, hinted("lookup-invoice"), nil)))
	require.NotNil(t, perr)
	require.Equal(t, protocol.OutcomeInProgress, outcome(perr))
	require.Equal(t, protocol.Unavailable, perr.Code)
	close(h.release)
	require.Nil(t, <-done)
	require.Equal(t, 1, h.count("m-1"))
	h.release = nil

	h.err = protocol.Errorf(protocol.InvalidParams, "no such invoice")
	msg := `{"messageId":"m-refused","role":"ROLE_USER","parts":[{"text":"What is the status of invoice INV-1042?"}],"metadata":{"skillId":"lookup-invoice"}}`
	for range 2 {
		_, perr = answered(f.d.send(t.Context(), f.sameCall(t, partner, msg, nil)))
		require.Equal(t, protocol.InvalidParams, perr.Code)
	}
	require.Equal(t, 2, h.count("m-refused"), "a refused message was not accepted: its retry is a new call")

	h.err = protocol.Errorf(protocol.Internal, "the skill's handler is unavailable")
	msg = `{"messageId":"m-lost","role":"ROLE_USER","parts":[{"text":"What is the status of invoice INV-1042?"}],"metadata":{"skillId":"lookup-invoice"}}`
	for range 2 {
		_, perr = answered(f.d.send(t.Context(), f.sameCall(t, partner, msg, nil)))
		require.NotNil(t, perr)
	}
	require.Equal(t, protocol.OutcomeUnknown, outcome(perr))
	require.Equal(t, 1, h.count("m-lost"), "a failure of unknown effect is not run again")
}

// TestReusedMessageIDForAnotherMessage: the owner of a messageId sending it again within the
// window with another request is refused — InvalidParams, outcome messageIdReused — before
// anything runs, whatever part of the request differs, on both message operations; the same
// request again is a retry, however its JSON is laid out and over whichever binding; and the
// first message's record is kept, so its own retry still answers with its task.
func TestReusedMessageIDForAnotherMessage(t *testing.T) {
	const first = `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"What is the status of invoice INV-1042?"}],"metadata":{"skillId":"lookup-invoice"}}}`
	// Each way a request can differ from the first, the messageId kept.
	differs := map[string]string{
		"text":             `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"What is the status of invoice INV-1043?"}],"metadata":{"skillId":"lookup-invoice"}}}`,
		"another part":     `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"What is the status of invoice INV-1042?"},{"text":"urgent"}],"metadata":{"skillId":"lookup-invoice"}}}`,
		"contextId":        `{"message":{"messageId":"m-1","contextId":"c-other","role":"ROLE_USER","parts":[{"text":"What is the status of invoice INV-1042?"}],"metadata":{"skillId":"lookup-invoice"}}}`,
		"message metadata": `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"What is the status of invoice INV-1042?"}],"metadata":{"skillId":"lookup-invoice","priority":"high"}}}`,
		"request metadata": `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"What is the status of invoice INV-1042?"}],"metadata":{"skillId":"lookup-invoice"}},"metadata":{"trace":"t-2"}}`,
		"configuration":    `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"What is the status of invoice INV-1042?"}],"metadata":{"skillId":"lookup-invoice"}},"configuration":{"historyLength":1}}`,
	}
	// The first request again, laid out otherwise: member order and spacing.
	const reordered = `{ "message" : { "metadata" : {"skillId":"lookup-invoice"}, "parts":[ {"text":"What is the status of invoice INV-1042?"} ], "role":"ROLE_USER", "messageId":"m-1" } }`
	jsonrpcCall := func(t *testing.T, f *fixture, op protocol.Operation, params string) *exchange.Call {
		t.Helper()
		req, perr := jsonrpcwire.ParseJSONRPC(protocol.V1, "application/json",
			[]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":`+params+`}`), protocol.Limits{})
		require.Nil(t, perr)
		req.Operation = op
		return &exchange.Call{Rev: f.rev, Request: req, Principal: partner, DecisionID: "d-1", Log: &decisionlog.Entry{}}
	}
	restCall := func(t *testing.T, f *fixture, op protocol.Operation, params string) *exchange.Call {
		t.Helper()
		req, perr := httpjsonwire.ParseHTTP(protocol.V1, "POST", "/message:send", "application/json", []byte(params), protocol.Limits{})
		require.Nil(t, perr)
		req.Operation = op
		return &exchange.Call{Rev: f.rev, Request: req, Principal: partner, DecisionID: "d-1", Log: &decisionlog.Entry{}}
	}
	const firstTask = `"id":"t-m-1-1"`
	for _, op := range []protocol.Operation{protocol.SendMessage, protocol.SendStreamingMessage} {
		for name, params := range differs {
			t.Run(string(op)+"/"+name, func(t *testing.T) {
				f, _, h := onceFixture(t)
				got, perr := answered(f.d.send(t.Context(), jsonrpcCall(t, f, op, first)))
				require.Nil(t, perr)
				require.Contains(t, string(got), firstTask)

				_, perr = answered(f.d.send(t.Context(), jsonrpcCall(t, f, op, params)))
				require.NotNil(t, perr, "a different message under a used messageId is refused")
				require.Equal(t, protocol.InvalidParams, perr.Code)
				require.Equal(t, "messageIdReused", outcome(perr))
				require.Contains(t, perr.Message, "messageId already used for a different message")
				require.Equal(t, 1, h.count("m-1"), "nothing ran for it")

				got, perr = answered(f.d.send(t.Context(), jsonrpcCall(t, f, op, first)))
				require.Nil(t, perr, "the first message's record is kept")
				require.Contains(t, string(got), firstTask)
				require.Equal(t, 1, h.count("m-1"))
			})
		}
		t.Run(string(op)+"/same request", func(t *testing.T) {
			f, _, h := onceFixture(t)
			_, perr := answered(f.d.send(t.Context(), jsonrpcCall(t, f, op, first)))
			require.Nil(t, perr)
			for _, call := range []*exchange.Call{jsonrpcCall(t, f, op, reordered), restCall(t, f, op, first), restCall(t, f, op, reordered)} {
				got, perr := answered(f.d.send(t.Context(), call))
				require.Nil(t, perr, "%s: the same request is a retry", call.Request.Binding)
				require.Contains(t, string(got), firstTask)
			}
			require.Equal(t, 1, h.count("m-1"))
		})
	}
}

// TestRecordWithoutDigestMatchesAny: a record written before fingerprints were kept (no
// digest) answers any request with its id as a retry, as before.
func TestRecordWithoutDigestMatchesAny(t *testing.T) {
	require.True(t, tasks.Sent{}.Retries("abc"))
	require.True(t, tasks.Sent{Digest: "abc"}.Retries("abc"))
	require.False(t, tasks.Sent{Digest: "abc"}.Retries("abd"))
}

// requestDigestPlain is requestDigest's definition, written plainly: SHA-256 of the version, a
// zero byte and the params in RFC 8785's canonical form.
func requestDigestPlain(v protocol.Version, params jsontext.Value) (string, bool) {
	canon := slices.Clone(params)
	if canon.Canonicalize() != nil {
		return "", false
	}
	h := sha256.New()
	h.Write([]byte(v))
	h.Write([]byte{0})
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)), true
}

// TestRequestDigestMatchesPlain: the pooled digest is the plain one, for params already
// canonical and not (key order, spacing, escapes, numbers), for both versions, in any order of
// calls (a buffer reused after a longer or shorter request), and refuses what is not JSON.
func TestRequestDigestMatchesPlain(t *testing.T) {
	cases := []string{
		`{}`,
		`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`,
		`{ "b" : 1 , "a" : [ 1e3 , 0.10 , -0 , "\u00e9\t" ] }`,
		`{"metadata":{"z":null,"y":true,"x":{"\u0041":"A"}},"message":{"parts":[{"data":{"n":12345678901234567890}}]}}`,
		`{"text":"` + strings.Repeat("long text ", 300) + `"}`,
		`{"a":1}`,
		`{"a":`, `not json`, `{"a":1}{"b":2}`,
	}
	for range 2 {
		for _, c := range cases {
			for _, v := range []protocol.Version{protocol.V1, protocol.V03} {
				want, ok := requestDigestPlain(v, jsontext.Value(c))
				params := jsontext.Value(c)
				got, perr := requestDigest(v, params)
				require.Equal(t, c, string(params), "the params are not changed")
				if !ok {
					require.NotNil(t, perr, "%s", c)
					require.Equal(t, protocol.InvalidParams, perr.Code)
					continue
				}
				require.Nil(t, perr, "%s", c)
				require.Equal(t, want, got, "%s %s", v, c)
			}
		}
	}
}

// BenchmarkRequestDigest: a routed SendMessage's fingerprint, pooled and plain (the forwarded params of
// jsonwire's BenchmarkParseJSONRPC), once per reserved message.
func BenchmarkRequestDigest(b *testing.B) {
	params := jsontext.Value(`{"message":{"messageId":"0b6f3c1e-52aa-4e0b-8d0f-9a1e7c3d2b10","contextId":"ctx-42","role":"ROLE_USER",` +
		`"parts":[{"text":"Reconcile invoice INV-20931 against its purchase order, please."},` +
		`{"url":"https://files.example.com/inv-20931.pdf","filename":"inv-20931.pdf","mediaType":"application/pdf"}]},` +
		`"configuration":{"acceptedOutputModes":["application/json","text/plain"]},"metadata":{"skillId":"reconcile-invoice"}}`)
	b.Run("pooled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, perr := requestDigest(protocol.V1, params); perr != nil {
				b.Fatal(perr)
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			requestDigestPlain(protocol.V1, params)
		}
	})
}
