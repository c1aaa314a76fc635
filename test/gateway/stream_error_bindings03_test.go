package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacysrv "github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/test/testutil"
)

// failingStreams03 is failingStreams on a2a-go v0.3's own server: a genuine A2A 0.3 handler,
// its streams failingStream's in 0.3 types.
type failingStreams03 struct{ legacysrv.RequestHandler }

func (failingStreams03) OnSendMessageStream(_ context.Context, p *legacy.MessageSendParams) iter.Seq2[legacy.Event, error] {
	text := ""
	if tp, ok := p.Message.Parts[0].(legacy.TextPart); ok {
		text = tp.Text
	}
	return stream03(failingStream(text))
}

func (failingStreams03) OnResubscribeToTask(_ context.Context, p *legacy.TaskIDParams) iter.Seq2[legacy.Event, error] {
	return stream03(failingStream(subscribed(string(p.ID))))
}

// stream03 is an a2a-go v2 stream in a2a-go v0.3's types.
func stream03(events iter.Seq2[a2a.Event, error]) iter.Seq2[legacy.Event, error] {
	return func(yield func(legacy.Event, error) bool) {
		for ev, err := range events {
			var ev03 legacy.Event
			if err == nil {
				ev03, err = a2av0.FromV1Event(ev)
			}
			var e *a2a.Error
			if errors.Is(err, a2a.ErrTaskNotCancelable) && errors.As(err, &e) {
				err = legacy.NewError(legacy.ErrTaskNotCancelable, e.Message)
			}
			if !yield(ev03, err) {
				return
			}
		}
	}
}

// jsWireForm03 answers as the @a2a-js/sdk JSON-RPC server answers 0.3 streaming methods
// (docs/interop.md; the SDK itself runs in test/interop): an error before the first event is a
// plain JSON-RPC error response (HTTP 200, application/json), a later one an SSE event of type
// "error" whose data is the JSON-RPC error response; events carry SSE ids. Its errors carry no
// data, only the code.
func jsWireForm03(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ID      string `json:"id"`
			Message struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"message"`
		} `json:"params"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if json.Unmarshal(body, &req) != nil || (req.Method != "tasks/resubscribe" && len(req.Params.Message.Parts) == 0) {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	text := subscribed(req.Params.ID)
	if req.Method != "tasks/resubscribe" {
		text = req.Params.Message.Parts[0].Text
	}
	fail := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32002,"message":"ledger locked"}}`
	task := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"kind":"task","id":"t-` + id + `","contextId":"c-` + id + `","status":{"state":"working"}}}`
	}
	if text == "before" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, fail)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	if text == "open" {
		_, _ = io.WriteString(w, "id: 1\ndata: "+task("open")+"\n\n")
		return
	}
	_, _ = io.WriteString(w, "id: 1\ndata: "+task("mid")+"\n\nid: 2\nevent: error\ndata: "+fail+"\n\n")
}

// callers03 are the A2A 0.3 caller bindings: 0.3 JSON-RPC, the 0.3 specification's HTTP+JSON
// binding (/v1/ routes, ProtoJSON) and the un-prefixed 0.3 routes (a2a-go's 0.3 REST dialect).
// None sends A2A-Version, as 0.3 clients do not.
var callers03 = []string{"0.3 JSON-RPC", "0.3 HTTP+JSON /v1", "0.3 HTTP+JSON un-prefixed"}

// TestStreamErrorsOneFormPerCallerBinding03 is TestStreamErrorsOneFormPerCallerBinding for A2A
// 0.3 callers, on message/stream and tasks/resubscribe (/v1/message:stream,
// /v1/tasks/{id}:subscribe, and the same un-prefixed). capgate calls a skill's handler in 0.3
// over JSON-RPC only, so the handlers are three 0.3 JSON-RPC servers: a2a-go v0.3's, a2a-go
// v2's 0.3 compatibility server, and the JS SDK's wire form (a plain JSON-RPC error before the
// first event, an "event: error" after it). Whichever answered, the caller reads one form:
//   - before the first event: 0.3 JSON-RPC, HTTP 200 and one SSE event whose data is the
//     JSON-RPC error response (what the 0.3 JS client reads on a streaming method); 0.3
//     HTTP+JSON (both route forms), the error's HTTP status and google.rpc.Status JSON;
//   - after an event: the event in the caller's dialect, then JSON-RPC's error response as the
//     last event, or HTTP+JSON's "event: error" with the google.rpc.Status body;
//
// and the same error, code, reason and message, as a 1.0 caller reads. A handler over HTTP+JSON or gRPC, which capgate
// calls in 1.0 only, is refused VersionNotSupported in the before-the-stream form.
func TestStreamErrorsOneFormPerCallerBinding03(t *testing.T) {
	const handler = "recon.v3.reconcile"
	tok := "Bearer " + testutil.Token(t, grpcCaller)
	wantForm := map[string]map[string]string{ // caller → when → form
		"0.3 JSON-RPC":              {"before": "sse, 0 events before the error: ", "mid": "sse, 1 events before the error: t-mid"},
		"0.3 HTTP+JSON /v1":         {"before": "HTTP 409 application/json", "mid": "sse, 1 events before the error: t-mid"},
		"0.3 HTTP+JSON un-prefixed": {"before": "HTTP 409 application/json", "mid": "sse, 1 events before the error: t-mid"},
	}
	// The error is the one a 1.0 caller reads (TestStreamErrorsOneFormPerCallerBinding).
	const cannotCancel = "TASK_NOT_CANCELABLE the task cannot be canceled in its current state"
	wantErr := map[string]string{
		"0.3 JSON-RPC":              "-32002 " + cannotCancel,
		"0.3 HTTP+JSON /v1":         "409 FAILED_PRECONDITION " + cannotCancel,
		"0.3 HTTP+JSON un-prefixed": "409 FAILED_PRECONDITION " + cannotCancel,
	}
	upstreams := []struct {
		name string
		h    http.Handler
	}{
		{"a2a-go v0.3 JSON-RPC server", legacysrv.NewJSONRPCHandler(failingStreams03{})},
		{"a2a-go v2 0.3 JSON-RPC server", a2av0.NewJSONRPCHandler(failingStreams{})},
		{"the JS SDK's JSON-RPC wire form", http.HandlerFunc(jsWireForm03)},
	}
	for _, up := range upstreams {
		t.Run("handler: "+up.name, func(t *testing.T) {
			hs := httptest.NewServer(up.h)
			t.Cleanup(hs.Close)
			d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
			d.Config.Handlers[handler] = hs.URL + "/"
			d.Config.HandlerBindings = map[string]string{handler: config.BindingJSONRPC}
			srv := testutil.Start(t, d)
			t.Run("a2a-go's 0.3 clients", func(t *testing.T) { clients03ReadStreamErrors(t, srv, tok) })
			for _, op := range []string{"stream", "subscribe"} {
				if op == "subscribe" { // the caller's tasks t-open and t-mid, to subscribe to
					for _, text := range []string{"open", "mid"} {
						r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":`+message03(text)+`}}`, "Authorization", tok)
						require.Contains(t, string(r.Body), `"id":"t-`+text+`"`)
					}
				}
				for _, caller := range callers03 {
					for _, when := range []string{"before", "mid"} {
						t.Run(caller+"/"+op+"/"+when, func(t *testing.T) {
							got := callStream03(t, srv, caller, op, tok, when)
							require.Equal(t, streamAnswer{form: wantForm[caller][when], err: wantErr[caller]}, got)
						})
					}
				}
			}
		})
	}

	for _, upstream := range []string{config.BindingHTTPJSON, config.BindingGRPC} {
		t.Run("handler over "+upstream, func(t *testing.T) {
			d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
			d.Config.Handlers[handler] = failingUpstream(t, handler, upstream)
			d.Config.HandlerBindings = map[string]string{handler: upstream}
			srv := testutil.Start(t, d)
			for _, caller := range callers03 {
				t.Run(caller, func(t *testing.T) {
					got := callStream03(t, srv, caller, "stream", tok, "mid")
					require.Contains(t, got.err, "VERSION_NOT_SUPPORTED", "%+v", got)
					early := strings.Replace(wantForm[caller]["before"], "409", "400", 1)
					require.Equal(t, early, got.form, "refused before the stream")
				})
			}
		})
	}
}

// clients03ReadStreamErrors: a2a-go's 0.3 JSON-RPC client reads the stream error, before and
// after the first event, as the typed error, after the events before it. The transport is
// given the A2A-Version: 0.3 that a2aclient.Client adds to every call of a 0.3 interface
// (its data decoder takes a list only, which capgate sends to a caller naming a version).
func clients03ReadStreamErrors(t *testing.T, srv *testutil.Server, tok string) {
	tr := a2av0.NewJSONRPCTransport(a2av0.JSONRPCTransportConfig{URL: srv.URL, Client: srv.HTTP})
	for when, wantEvents := range map[string]int{"before": 0, "mid": 1} {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(when))
		msg.Metadata = map[string]any{"skillId": "reconcile-invoice"}
		events, errs := 0, []error{}
		for ev, err := range tr.SendStreamingMessage(t.Context(), a2aclient.ServiceParams{"authorization": {tok}, a2a.SvcParamVersion: {"0.3"}}, &a2a.SendMessageRequest{Message: msg}) {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			require.Empty(t, errs, "no event after the error")
			task, ok := ev.(*a2a.Task)
			require.True(t, ok, "%T", ev)
			require.Equal(t, a2a.TaskID("t-mid"), task.ID)
			events++
		}
		require.Equal(t, wantEvents, events, "%s", when)
		require.Len(t, errs, 1, "%s", when)
		require.ErrorIs(t, errs[0], a2a.ErrTaskNotCancelable, "%s", when)
	}
}

// message03 is a 0.3 JSON-RPC message with text for reconcile-invoice.
func message03(text string) string {
	return `{"kind":"message","messageId":"m-` + rand.Text() + `","role":"user","parts":[{"kind":"text","text":"` + text + `"}],"metadata":{"skillId":"reconcile-invoice"}}`
}

// callStream03 makes the failing streaming call op ("stream": a message with text when;
// "subscribe": to t-open before, t-mid mid) over a 0.3 caller binding and reads its answer.
func callStream03(t *testing.T, srv *testutil.Server, caller, op, tok, when string) streamAnswer {
	t.Helper()
	task := map[string]string{"before": "t-open", "mid": "t-mid"}[when]
	switch caller {
	case "0.3 JSON-RPC":
		req := `{"jsonrpc":"2.0","id":7,"method":"message/stream","params":{"message":` + message03(when) + `}}`
		if op == "subscribe" {
			req = `{"jsonrpc":"2.0","id":7,"method":"tasks/resubscribe","params":{"id":"` + task + `"}}`
		}
		r := srv.JSONRPC(t, req, "Authorization", tok)
		// A 0.3 caller that names no version reads the error's data as one object.
		require.Contains(t, string(r.Body), `"data":{"@type":"type.googleapis.com/google.rpc.ErrorInfo"`)
		return jsonrpcStreamAnswer(t, r)
	case "0.3 HTTP+JSON /v1":
		path, body := "/v1/message:stream", `{"message":{"messageId":"m-`+rand.Text()+`","role":"ROLE_USER","content":[{"text":"`+when+`"}],"metadata":{"skillId":"reconcile-invoice"}}}`
		if op == "subscribe" {
			path, body = "/v1/tasks/"+task+":subscribe", ""
		}
		return statusStreamAnswer(t, srv.Do(t, http.MethodPost, path, body, "Content-Type", "application/json", "Authorization", tok))
	}
	path, body := "/message:stream", `{"message":`+message03(when)+`}`
	if op == "subscribe" {
		path, body = "/tasks/"+task+":subscribe", ""
	}
	return statusStreamAnswer(t, srv.Do(t, http.MethodPost, path, body, "Content-Type", "application/json", "Authorization", tok))
}

// inexpressible03 is an a2a-go v0.3 handler whose stream holds an event the 0.3 HTTP+JSON
// binding cannot express (a file part whose bytes are not base64: ProtoJSON's bytes field cannot
// hold them), first ("first") or after a task event ("second").
type inexpressible03 struct{ legacysrv.RequestHandler }

func (inexpressible03) OnSendMessageStream(_ context.Context, p *legacy.MessageSendParams) iter.Seq2[legacy.Event, error] {
	return func(yield func(legacy.Event, error) bool) {
		task := &legacy.Task{ID: "t-x", ContextID: "c-x", Status: legacy.TaskStatus{State: legacy.TaskStateWorking}}
		if tp, ok := p.Message.Parts[0].(legacy.TextPart); ok && tp.Text == "second" {
			if !yield(task, nil) {
				return
			}
		}
		yield(&legacy.TaskArtifactUpdateEvent{TaskID: "t-x", ContextID: "c-x", Artifact: &legacy.Artifact{ID: "a-1",
			Parts: legacy.ContentParts{legacy.FilePart{File: legacy.FileBytes{FileMeta: legacy.FileMeta{MimeType: "text/plain"}, Bytes: "not base64!"}}}}}, nil)
	}
}

// TestProtoJSON03FirstEventInexpressible: a 0.3 handler's stream event that the 0.3 HTTP+JSON
// binding (/v1/ routes, ProtoJSON) cannot express is InvalidAgentResponse there, in the form of
// any stream error: as the first event, a refusal (HTTP 502 and google.rpc.Status JSON, never an
// HTTP 200 stream whose only event is the error), recorded as a denial; after an event, the
// stream's last event. The 0.3 dialects that can express it (JSON-RPC, the un-prefixed routes'
// 0.3 JSON-RPC types) relay it.
func TestProtoJSON03FirstEventInexpressible(t *testing.T) {
	const handler = "recon.v3.reconcile"
	tok := "Bearer " + testutil.Token(t, grpcCaller)
	hs := httptest.NewServer(legacysrv.NewJSONRPCHandler(inexpressible03{}))
	t.Cleanup(hs.Close)
	d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
	d.Config.Handlers[handler] = hs.URL + "/"
	srv := testutil.Start(t, d)
	const wantErr = "502 INTERNAL INVALID_AGENT_RESPONSE the agent's 0.3 stream event has file content that is not base64"
	for when, wantForm := range map[string]string{"first": "HTTP 502 application/json", "second": "sse, 1 events before the error: t-x"} {
		t.Run(when, func(t *testing.T) {
			r := srv.Do(t, http.MethodPost, "/v1/message:stream", `{"message":{"messageId":"m-`+rand.Text()+`","role":"ROLE_USER","content":[{"text":"`+when+`"}],"metadata":{"skillId":"reconcile-invoice"}}}`,
				"Content-Type", "application/json", "Authorization", tok)
			got := statusStreamAnswer(t, r)
			require.Equal(t, streamAnswer{form: wantForm, err: wantErr}, got)
			dec := srv.WaitDecision(t, r.Header.Get("X-Capgate-Decision-Id"))
			require.Len(t, dec, 1)
			require.Equal(t, "deny", dec[0]["result"])
			require.Equal(t, "INVALID_AGENT_RESPONSE", dec[0]["code"])

			for _, rr := range []*testutil.Response{
				srv.JSONRPC(t, `{"jsonrpc":"2.0","id":7,"method":"message/stream","params":{"message":`+message03(when)+`}}`, "Authorization", tok),
				srv.Do(t, http.MethodPost, "/message:stream", `{"message":`+message03(when)+`}`, "Content-Type", "application/json", "Authorization", tok),
			} {
				require.Equal(t, http.StatusOK, rr.Status)
				require.Equal(t, "text/event-stream", rr.Header.Get("Content-Type"))
				require.Contains(t, string(rr.Body), `"bytes":"not base64!"`, "relayed where it can be expressed")
				require.NotContains(t, string(rr.Body), `"error"`)
			}
		})
	}
}
