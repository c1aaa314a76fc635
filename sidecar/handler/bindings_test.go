package handler_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/handlerauth"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
)

// a2aUpstream is a real a2a-go v2 server (a2asrv) answering over one
// binding on 127.0.0.1: JSON-RPC, HTTP+JSON (with tenant-prefixed paths) or
// gRPC. It records the headers (gRPC: metadata) of every call.
type a2aUpstream struct {
	url   string
	pace  chan struct{}
	mu    sync.Mutex
	heads []http.Header
}

func (u *a2aUpstream) record(h http.Header) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.heads = append(u.heads, h.Clone())
}

func (u *a2aUpstream) last() http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.heads[len(u.heads)-1]
}

func newA2AUpstream(t *testing.T, binding protocol.Binding) *a2aUpstream {
	t.Helper()
	u := &a2aUpstream{pace: make(chan struct{})}
	// The handler accepts only capgate's token of the test, as a handler
	// verifying capgate's tokens would (handlerauth's interceptor).
	auth := handlerauth.VerifyFunc(func(_ context.Context, bearer string) (handlerauth.Claims, error) {
		if bearer != "Bearer tok-123" {
			return handlerauth.Claims{}, handlerauth.ErrInvalidToken
		}
		return handlerauth.Claims{Subject: "alice", Capability: "recon"}, nil
	})
	rh := a2asrv.NewHandler(testExecutor{u}, a2asrv.WithPushNotifications(push.NewInMemoryStore(), noPush{}),
		a2asrv.WithCallInterceptors(handlerauth.NewServerInterceptor(auth)))
	rh = midStreamFailure{rh}
	switch binding {
	case protocol.GRPC:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		record := func(ctx context.Context) {
			md, _ := metadata.FromIncomingContext(ctx)
			h := http.Header{}
			for k, vs := range md {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			u.record(h)
		}
		s := grpc.NewServer(
			grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
				record(ctx)
				return next(ctx, req)
			}),
			grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
				record(ss.Context())
				return next(srv, ss)
			}))
		grpcv1.NewHandler(rh).RegisterWith(s)
		go func() { _ = s.Serve(ln) }()
		t.Cleanup(s.Stop)
		u.url = "http://" + ln.Addr().String()
		return u
	case protocol.HTTPJSON:
		plain := a2asrv.NewRESTHandler(rh)
		tenant := a2asrv.NewTenantRESTHandler("/{*}", rh)
		srv := httptest.NewServer(http.StripPrefix("/a2a", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u.record(r.Header)
			if strings.HasPrefix(r.URL.Path, "/acme/") {
				tenant.ServeHTTP(w, r)
				return
			}
			plain.ServeHTTP(w, r)
		})))
		t.Cleanup(srv.Close)
		u.url = srv.URL + "/a2a"
		return u
	default:
		h := a2asrv.NewJSONRPCHandler(rh)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u.record(r.Header)
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		u.url = srv.URL + "/"
		return u
	}
}

type noPush struct{}

func (noPush) SendPush(context.Context, *a2a.PushConfig, a2a.Event) error { return nil }

// midStreamFailure is the a2a-go request handler with one change: a
// streamed "fail-mid" message fails right after its first event (a2a-go's
// own executor errors become a failed task, not a stream error).
type midStreamFailure struct{ a2asrv.RequestHandler }

func (h midStreamFailure) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	inner := h.RequestHandler.SendStreamingMessage(ctx, req)
	if req.Message == nil || len(req.Message.Parts) == 0 || req.Message.Parts[0].Text() != "fail-mid" {
		return inner
	}
	return func(yield func(a2a.Event, error) bool) {
		for ev, err := range inner {
			if !yield(ev, err) || err != nil {
				return
			}
			yield(nil, a2a.NewError(a2a.ErrTaskNotCancelable, "ledger locked"))
			return
		}
	}
}

// testExecutor answers a message by its text: "fail" fails before any
// event, "slow" waits for pace before its
// artifact and again before completing; anything else is a task, an
// artifact echoing the tenant, and completion.
type testExecutor struct{ u *a2aUpstream }

func (e testExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text := ""
		if ec.Message != nil && len(ec.Message.Parts) > 0 {
			text = ec.Message.Parts[0].Text()
		}
		if text == "fail" {
			yield(nil, a2a.NewError(a2a.ErrUnsupportedOperation, "no invoices today").WithErrorInfoMeta(map[string]string{"why": "closed"}))
			return
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		wait := func() bool {
			if text != "slow" {
				return true
			}
			select {
			case <-e.u.pace:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if !wait() || !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("tenant="+ec.Tenant)), nil) {
			return
		}
		if !wait() {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (testExecutor) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

var bindings = []protocol.Binding{protocol.JSONRPC, protocol.HTTPJSON, protocol.GRPC}

// traced marks every call the invoker's transport makes, as tracing does.
func traced(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func bindingInvoker(t *testing.T, u *a2aUpstream, b protocol.Binding) *handler.Invoker {
	t.Helper()
	// "frank" is the same handler with handlers.frank.expose_errors: true.
	inv, err := handler.NewInvoker(map[string]string{"up": u.url, "frank": u.url},
		handler.WithLogger(zaptest.NewLogger(t)), handler.WithBindings(map[string]protocol.Binding{"up": b, "frank": b}),
		handler.WithRoundTripper(traced), handler.WithExposedErrors(map[string]bool{"frank": true}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = inv.Close() })
	return inv
}

func req(method, params string) handler.Request {
	return handler.Request{Handler: "up", Version: protocol.V1, Method: method, Params: jsontext.Value(params),
		Token: "tok-123", DecisionID: "dec-9", Extensions: []string{"https://example.com/ext/a"}}
}

func sendParams(text, tenant string) string {
	p := `{"message":{"messageId":"m-` + text + `","role":"ROLE_USER","parts":[{"text":"` + text + `"}]}`
	if tenant != "" {
		p += `,"tenant":"` + tenant + `"`
	}
	return p + `}`
}

// field reads a string at a dotted path of a JSON result.
func field(t *testing.T, v jsontext.Value, path ...string) string {
	t.Helper()
	var cur any
	require.NoError(t, json.Unmarshal(v, &cur))
	for _, p := range path {
		m, ok := cur.(map[string]any)
		require.True(t, ok, "%s: not an object at %s in %s", path, p, v)
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

func collect(t *testing.T, inv *handler.Invoker, r handler.Request) ([]jsontext.Value, *protocol.Error) {
	t.Helper()
	var events []jsontext.Value
	perr := inv.Stream(t.Context(), r, func(v jsontext.Value) error {
		events = append(events, v.Clone()) // valid only until yield returns
		return nil
	})
	return events, perr
}

func TestBindingsAgainstA2AGo(t *testing.T) {
	for _, b := range bindings {
		t.Run(string(b), func(t *testing.T) {
			u := newA2AUpstream(t, b)
			inv := bindingInvoker(t, u, b)

			// SendMessage: the task, and every header on the handler's side.
			res, perr := inv.Call(t.Context(), req("SendMessage", sendParams("hello", "")))
			require.Nil(t, perr)
			taskID := field(t, res, "task", "id")
			require.NotEmpty(t, taskID)
			require.Equal(t, "TASK_STATE_COMPLETED", field(t, res, "task", "status", "state"))
			h := u.last()
			require.Equal(t, "Bearer tok-123", h.Get("Authorization"))
			require.Equal(t, "1.0", h.Get("A2A-Version"))
			require.Equal(t, "https://example.com/ext/a", h.Get("A2A-Extensions"))
			require.Equal(t, "dec-9", h.Get(handler.DecisionIDHeader))
			require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", h.Get("Traceparent"))

			// GetTask, by id in the path (HTTP+JSON) or the message.
			res, perr = inv.Call(t.Context(), req("GetTask", `{"id":"`+taskID+`","historyLength":1}`))
			require.Nil(t, perr)
			require.Equal(t, taskID, field(t, res, "id"))

			// ListTasks.
			res, perr = inv.Call(t.Context(), req("ListTasks", `{"pageSize":10}`))
			require.Nil(t, perr)
			require.Contains(t, string(res), taskID)

			// Push config CRUD.
			res, perr = inv.Call(t.Context(), req("CreateTaskPushNotificationConfig",
				`{"taskId":"`+taskID+`","id":"cfg-1","url":"https://hooks.example.com/a2a"}`))
			require.Nil(t, perr)
			require.Equal(t, "https://hooks.example.com/a2a", field(t, res, "url"))
			res, perr = inv.Call(t.Context(), req("GetTaskPushNotificationConfig", `{"taskId":"`+taskID+`","id":"cfg-1"}`))
			require.Nil(t, perr)
			require.Equal(t, "cfg-1", field(t, res, "id"))
			res, perr = inv.Call(t.Context(), req("ListTaskPushNotificationConfigs", `{"taskId":"`+taskID+`"}`))
			require.Nil(t, perr)
			require.Contains(t, string(res), "cfg-1")
			res, perr = inv.Call(t.Context(), req("DeleteTaskPushNotificationConfig", `{"taskId":"`+taskID+`","id":"cfg-1"}`))
			require.Nil(t, perr)
			require.Equal(t, "null", string(res))

			// An A2A error: the same protocol.Error on every binding.
			_, perr = inv.Call(t.Context(), req("GetTask", `{"id":"no-such-task"}`))
			require.NotNil(t, perr)
			require.Equal(t, protocol.TaskNotFound, perr.Code)

			// CancelTask of a finished task: TaskNotCancelable.
			_, perr = inv.Call(t.Context(), req("CancelTask", `{"id":"`+taskID+`"}`))
			require.NotNil(t, perr)
			require.Equal(t, protocol.TaskNotCancelable, perr.Code)

			// An error before any event, unary and streamed: the code with capgate's message and
			// the decision id; the handler's text and metadata only where its errors are exposed.
			_, perr = inv.Call(t.Context(), req("SendMessage", sendParams("fail", "")))
			require.NotNil(t, perr)
			require.Equal(t, protocol.UnsupportedOperation, perr.Code)
			require.Equal(t, "the skill's handler does not support this operation (decision dec-9)", perr.Message)
			require.Equal(t, map[string]string{"decision_id": "dec-9"}, perr.Metadata)
			frank := req("SendMessage", sendParams("fail", ""))
			frank.Handler = "frank"
			_, perr = inv.Call(t.Context(), frank)
			require.NotNil(t, perr)
			require.Equal(t, protocol.UnsupportedOperation, perr.Code)
			require.Equal(t, "no invoices today", perr.Message)
			require.Equal(t, "closed", perr.Metadata["why"])
			events, perr := collect(t, inv, req("SendStreamingMessage", sendParams("fail", "")))
			require.Empty(t, events)
			require.NotNil(t, perr)
			require.Equal(t, protocol.UnsupportedOperation, perr.Code)

			// A stream: task, artifact, status.
			events, perr = collect(t, inv, req("SendStreamingMessage", sendParams("stream", "")))
			require.Nil(t, perr)
			require.Len(t, events, 3)
			require.NotEmpty(t, field(t, events[0], "task", "id"))
			require.Contains(t, string(events[1]), `"artifactUpdate"`)
			require.Contains(t, string(events[1]), `tenant=`)
			require.Equal(t, "TASK_STATE_COMPLETED", field(t, events[2], "statusUpdate", "status", "state"))
			require.Equal(t, "Bearer tok-123", u.last().Get("Authorization"))

			// An error in the middle of a stream ends it with that error.
			events, perr = collect(t, inv, req("SendStreamingMessage", sendParams("fail-mid", "")))
			require.Len(t, events, 1)
			require.NotNil(t, perr)
			require.Equal(t, protocol.TaskNotCancelable, perr.Code)
			require.Equal(t, "the task cannot be canceled in its current state (decision dec-9)", perr.Message)
			frank = req("SendStreamingMessage", sendParams("fail-mid", ""))
			frank.Handler = "frank"
			events, perr = collect(t, inv, frank)
			require.Len(t, events, 1)
			require.NotNil(t, perr)
			require.Equal(t, "ledger locked", perr.Message)

			// SubscribeToTask to a running task, then CancelTask of it.
			first := make(chan string, 1)
			done := make(chan *protocol.Error, 1)
			go func() {
				done <- inv.Stream(t.Context(), req("SendStreamingMessage", sendParams("slow", "")), func(v jsontext.Value) error {
					var e struct {
						Task *struct {
							ID string `json:"id"`
						} `json:"task"`
					}
					if json.Unmarshal(v, &e, json.RejectUnknownMembers(false)) == nil && e.Task != nil {
						select {
						case first <- e.Task.ID:
						default:
						}
					}
					return nil
				})
			}()
			slowID := <-first
			var sub []jsontext.Value
			subDone := make(chan *protocol.Error, 1)
			subscribed := make(chan struct{})
			go func() {
				subDone <- inv.Stream(t.Context(), req("SubscribeToTask", `{"id":"`+slowID+`"}`), func(v jsontext.Value) error {
					if len(sub) == 0 {
						close(subscribed)
					}
					sub = append(sub, v.Clone())
					return nil
				})
			}()
			<-subscribed
			u.pace <- struct{}{}
			u.pace <- struct{}{}
			require.Nil(t, <-done)
			require.Nil(t, <-subDone)
			require.GreaterOrEqual(t, len(sub), 2)
			require.Equal(t, "TASK_STATE_COMPLETED", field(t, sub[len(sub)-1], "statusUpdate", "status", "state"))

			// CancelTask of a running task.
			first = make(chan string, 1)
			go func() {
				done <- inv.Stream(t.Context(), req("SendStreamingMessage", sendParams("slow", "")), func(v jsontext.Value) error {
					var e struct {
						Task *struct {
							ID string `json:"id"`
						} `json:"task"`
					}
					if json.Unmarshal(v, &e, json.RejectUnknownMembers(false)) == nil && e.Task != nil {
						select {
						case first <- e.Task.ID:
						default:
						}
					}
					return nil
				})
			}()
			slowID = <-first
			res, perr = inv.Call(t.Context(), req("CancelTask", `{"id":"`+slowID+`"}`))
			require.Nil(t, perr)
			require.Equal(t, "TASK_STATE_CANCELED", field(t, res, "status", "state"))
			require.Nil(t, <-done)

			// SubscribeToTask of an unknown task: an error before any event.
			events, perr = collect(t, inv, req("SubscribeToTask", `{"id":"no-such-task"}`))
			require.Empty(t, events)
			require.NotNil(t, perr)
			require.Equal(t, protocol.TaskNotFound, perr.Code)
		})
	}
}

// TestHTTPJSONTenantPath: a tenant in the params is the path's /{tenant}
// prefix (the proto's additional bindings); a2a-go's tenant handler reads it
// from there.
func TestHTTPJSONTenantPath(t *testing.T) {
	u := newA2AUpstream(t, protocol.HTTPJSON)
	inv := bindingInvoker(t, u, protocol.HTTPJSON)
	events, perr := collect(t, inv, req("SendStreamingMessage", sendParams("hello", "acme")))
	require.Nil(t, perr)
	require.Len(t, events, 3)
	require.Contains(t, string(events[1]), `"tenant=acme"`)
}

func TestBindingRefusals(t *testing.T) {
	for _, b := range []protocol.Binding{protocol.HTTPJSON, protocol.GRPC} {
		t.Run(string(b), func(t *testing.T) {
			u := newA2AUpstream(t, b)
			inv := bindingInvoker(t, u, b)
			r := req("message/send", `{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}`)
			r.Version = protocol.V03
			_, perr := inv.Call(t.Context(), r)
			require.NotNil(t, perr)
			require.Equal(t, protocol.VersionNotSupported, perr.Code)

			_, perr = inv.Call(t.Context(), req("finance/explainVariance", `{}`))
			require.NotNil(t, perr)
			require.Equal(t, protocol.UnsupportedOperation, perr.Code)
		})
	}
	_, err := handler.NewInvoker(map[string]string{"up": "http://127.0.0.1:1/a2a"},
		handler.WithBindings(map[string]protocol.Binding{"up": protocol.GRPC}))
	require.ErrorContains(t, err, "a gRPC handler is http://host:port")
	_, err = handler.NewInvoker(map[string]string{"up": "builtin:echo"},
		handler.WithBuiltin("echo", http.NotFoundHandler()), handler.WithBindings(map[string]protocol.Binding{"up": protocol.HTTPJSON}))
	require.ErrorContains(t, err, "builtin handlers are called over JSON-RPC only")
	_, err = handler.NewInvoker(map[string]string{"up": "http://127.0.0.1:1/"},
		handler.WithBindings(map[string]protocol.Binding{"ghost": protocol.GRPC, "up": "rest"}))
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "ghost") && strings.Contains(err.Error(), `"rest" is not a binding`), err.Error())
	require.False(t, errors.Is(err, context.Canceled))
}

// TestHTTPJSONAnswers: what an HTTP+JSON handler answers is checked as a
// JSON-RPC answer is: the spec's error events, google.rpc.Status bodies,
// and anything else refused as an invalid response.
func TestHTTPJSONAnswers(t *testing.T) {
	const notCancelable = `{"error":{"code":409,"status":"FAILED_PRECONDITION","message":"locked\u0000 now",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_CANCELABLE","domain":"a2a-protocol.org","metadata":{"k":"v"}}]}}`
	const event = `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`
	for _, tc := range []struct {
		name     string
		stream   bool
		serve    func(w http.ResponseWriter)
		events   int
		wantCode protocol.Code
		wantMsg  string
	}{
		{name: "status body", serve: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(notCancelable))
		}, wantCode: protocol.TaskNotCancelable, wantMsg: "locked now"},
		{name: "status without an A2A reason", serve: func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":503,"status":"UNAVAILABLE","message":"overloaded"}}`))
		}, wantCode: protocol.Internal, wantMsg: "overloaded"},
		{name: "401 is capgate's credential refused", serve: func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":401,"status":"UNAUTHENTICATED","message":"who are you"}}`))
		}, wantCode: protocol.Internal, wantMsg: "the skill's handler refused capgate's credential"},
		{name: "HTML error page", serve: func(w http.ResponseWriter) {
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "result not an object", serve: func(w http.ResponseWriter) {
			_, _ = w.Write([]byte(`["task"]`))
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "result with duplicate keys", serve: func(w http.ResponseWriter) {
			_, _ = w.Write([]byte(`{"task":{"id":"a","id":"b"}}`))
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "event: error frame mid-stream", stream: true, serve: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: " + event + "\n\n: keep-alive\n\nevent: error\ndata: " + notCancelable + "\n\n"))
		}, events: 1, wantCode: protocol.TaskNotCancelable, wantMsg: "locked now"},
		{name: "error frame that is not a status", stream: true, serve: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: error\ndata: {\"oops\":1}\n\n"))
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "event larger than the limit", stream: true, serve: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"x\":\"" + strings.Repeat("a", handler.MaxEventBytes) + "\"}\n\n"))
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "stream ends without an event", stream: true, serve: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "stream with its status", stream: true, serve: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("id: 1\ndata: " + event + "\n\ndata: " + event + "\n\n"))
		}, events: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *http.Request
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r.Clone(context.Background())
				tc.serve(w)
			}))
			defer srv.Close()
			inv, err := handler.NewInvoker(map[string]string{"up": srv.URL + "/v1/"}, handler.WithLogger(zaptest.NewLogger(t)),
				handler.WithBindings(map[string]protocol.Binding{"up": protocol.HTTPJSON}), exposed)
			require.NoError(t, err)
			defer func() { _ = inv.Close() }()
			var perr *protocol.Error
			n := 0
			if tc.stream {
				var events []jsontext.Value
				events, perr = collect(t, inv, req("SubscribeToTask", `{"id":"t1","tenant":"acme"}`))
				n = len(events)
				require.Equal(t, "POST /v1/acme/tasks/t1:subscribe", got.Method+" "+got.URL.Path)
				require.Equal(t, "text/event-stream", got.Header.Get("Accept"))
			} else {
				_, perr = inv.Call(t.Context(), req("CancelTask", `{"id":"t1","metadata":{"why":"x"}}`))
				require.Equal(t, "POST /v1/tasks/t1:cancel", got.Method+" "+got.URL.Path)
			}
			require.Equal(t, "Bearer tok-123", got.Header.Get("Authorization"))
			require.Equal(t, tc.events, n)
			if tc.wantCode == "" {
				require.Nil(t, perr)
				return
			}
			require.NotNil(t, perr)
			require.Equal(t, tc.wantCode, perr.Code, perr.Error())
			require.Equal(t, tc.wantMsg, perr.Message)
		})
	}
}

// TestHTTPJSONRequestShape: path fields leave the params, the rest are the
// body (POST) or the query (GET); a field GET cannot carry is refused.
func TestHTTPJSONRequestShape(t *testing.T) {
	var method, target, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		method, target, body = r.Method, r.URL.RequestURI(), string(b)
		_, _ = w.Write([]byte(`{"id":"t1"}`))
	}))
	defer srv.Close()
	inv, err := handler.NewInvoker(map[string]string{"up": srv.URL}, handler.WithBindings(map[string]protocol.Binding{"up": protocol.HTTPJSON}))
	require.NoError(t, err)
	defer func() { _ = inv.Close() }()
	for _, tc := range []struct {
		method, params, want, body string
	}{
		{"GetTask", `{"id":"t 1","historyLength":2,"tenant":"acme"}`, "GET /acme/tasks/t%201?historyLength=2", ""},
		{"ListTasks", `{"contextId":"c 1","pageSize":5,"includeArtifacts":true,"status":"TASK_STATE_WORKING"}`,
			"GET /tasks?contextId=c+1&includeArtifacts=true&pageSize=5&status=TASK_STATE_WORKING", ""},
		{"CreateTaskPushNotificationConfig", `{"taskId":"t1","id":"c1","url":"https://h.example.com/"}`,
			"POST /tasks/t1/pushNotificationConfigs", `{"id":"c1","url":"https://h.example.com/"}`},
		{"DeleteTaskPushNotificationConfig", `{"taskId":"t1","id":"c1"}`, "DELETE /tasks/t1/pushNotificationConfigs/c1", ""},
		// Other spellings of a field are the field, as admission reads them
		// (jsonmodel.SameField): proto names, any case, a folded rune.
		{"DeleteTaskPushNotificationConfig", `{"task_id":"t1","ID":"c1"}`, "DELETE /tasks/t1/pushNotificationConfigs/c1", ""},
		{"GetTask", `{"Id":"t2","history_length":3,"TENANT":"acme"}`, "GET /acme/tasks/t2?historyLength=3", ""},
		{"GetTask", `{"id":"t3","hiſtoryLength":4}`, "GET /tasks/t3?historyLength=4", ""},
		{"SendMessage", sendParams("hi", "acme"), "POST /acme/message:send", `{"message":{"messageId":"m-hi","role":"ROLE_USER","parts":[{"text":"hi"}]}}`},
	} {
		_, perr := inv.Call(t.Context(), req(tc.method, tc.params))
		if tc.method == "DeleteTaskPushNotificationConfig" {
			require.Nil(t, perr)
		}
		require.Equal(t, tc.want, method+" "+target, tc.method)
		require.Equal(t, tc.body, body, tc.method)
	}
	_, perr := inv.Call(t.Context(), req("GetTask", `{"id":"t1","metadata":{"a":1}}`))
	require.NotNil(t, perr)
	require.Equal(t, protocol.InvalidParams, perr.Code)
}

// h2cServer is a hand-written gRPC server (cleartext HTTP/2) for answers
// a2a-go's server never gives.
func h2cServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func grpcFrame(flag byte, msg []byte) []byte {
	b := []byte{flag, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// TestGRPCAnswers: what a gRPC handler answers is checked as a JSON-RPC
// answer is.
func TestGRPCAnswers(t *testing.T) {
	task, err := proto.Marshal(&a2apb.Task{Id: "t1", ContextId: "c1", Status: &a2apb.TaskStatus{State: a2apb.TaskState_TASK_STATE_WORKING}})
	require.NoError(t, err)
	event, err := proto.Marshal(&a2apb.StreamResponse{Payload: &a2apb.StreamResponse_Task{Task: &a2apb.Task{Id: "t1", ContextId: "c1"}}})
	require.NoError(t, err)
	status := func(w http.ResponseWriter, trailer bool) {
		prefix := ""
		if trailer {
			prefix = http.TrailerPrefix
		}
		for _, kv := range grpcwire.Status(protocol.Errorf(protocol.TaskNotFound, "no task t1 \u00e9").WithMetadata("k", "v")) {
			w.Header().Set(prefix+kv[0], kv[1])
		}
	}
	ok := func(w http.ResponseWriter) { w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0") }
	for _, tc := range []struct {
		name     string
		stream   bool
		serve    func(w http.ResponseWriter)
		events   int
		wantCode protocol.Code
		wantMsg  string
	}{
		{name: "one message and OK", serve: func(w http.ResponseWriter) {
			_, _ = w.Write(grpcFrame(0, task))
			ok(w)
		}},
		{name: "trailers-only error", serve: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/grpc")
			status(w, false)
			w.WriteHeader(http.StatusOK)
		}, wantCode: protocol.TaskNotFound, wantMsg: "no task t1 \u00e9"},
		{name: "error in the trailers", serve: func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusOK)
			status(w, true)
		}, wantCode: protocol.TaskNotFound, wantMsg: "no task t1 \u00e9"},
		{name: "status without details", serve: func(w http.ResponseWriter) {
			w.Header().Set(http.TrailerPrefix+"Grpc-Status", "14")
			w.Header().Set(http.TrailerPrefix+"Grpc-Message", "down%20for%20maintenance")
		}, wantCode: protocol.Internal, wantMsg: "down for maintenance"},
		{name: "unauthenticated is capgate's credential refused", serve: func(w http.ResponseWriter) {
			w.Header().Set(http.TrailerPrefix+"Grpc-Status", "16")
		}, wantCode: protocol.Internal, wantMsg: "the skill's handler refused capgate's credential"},
		{name: "no status", serve: func(w http.ResponseWriter) {
			_, _ = w.Write(grpcFrame(0, task))
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "two messages", serve: func(w http.ResponseWriter) {
			_, _ = w.Write(append(grpcFrame(0, task), grpcFrame(0, task)...))
			ok(w)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "compressed message", serve: func(w http.ResponseWriter) {
			_, _ = w.Write(grpcFrame(1, task))
			ok(w)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "not a Task", serve: func(w http.ResponseWriter) {
			_, _ = w.Write(grpcFrame(0, []byte{0xff, 0xff, 0xff}))
			ok(w)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "stream, then OK", stream: true, serve: func(w http.ResponseWriter) {
			_, _ = w.Write(append(grpcFrame(0, event), grpcFrame(0, event)...))
			ok(w)
		}, events: 2},
		{name: "stream, then an error", stream: true, serve: func(w http.ResponseWriter) {
			_, _ = w.Write(grpcFrame(0, event))
			status(w, true)
		}, events: 1, wantCode: protocol.TaskNotFound, wantMsg: "no task t1 \u00e9"},
		{name: "stream event larger than the limit", stream: true, serve: func(w http.ResponseWriter) {
			_, _ = w.Write(grpcFrame(0, make([]byte, handler.MaxEventBytes+1)))
			ok(w)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "stream without an event", stream: true, serve: func(w http.ResponseWriter) {
			ok(w)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *http.Request
			var body []byte
			url := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
				got = r.Clone(context.Background())
				body, _ = io.ReadAll(r.Body)
				if w.Header().Get("Content-Type") == "" {
					w.Header().Set("Content-Type", "application/grpc")
				}
				tc.serve(w)
			})
			inv, err := handler.NewInvoker(map[string]string{"up": url}, handler.WithLogger(zaptest.NewLogger(t)),
				handler.WithBindings(map[string]protocol.Binding{"up": protocol.GRPC}), exposed)
			require.NoError(t, err)
			defer func() { _ = inv.Close() }()
			var perr *protocol.Error
			n := 0
			if tc.stream {
				var events []jsontext.Value
				events, perr = collect(t, inv, req("SubscribeToTask", `{"id":"t1","tenant":"acme"}`))
				n = len(events)
				require.Equal(t, "/lf.a2a.v1.A2AService/SubscribeToTask", got.URL.Path)
			} else {
				var res jsontext.Value
				res, perr = inv.Call(t.Context(), req("GetTask", `{"id":"t1","historyLength":3}`))
				require.Equal(t, "/lf.a2a.v1.A2AService/GetTask", got.URL.Path)
				var m a2apb.GetTaskRequest
				require.NoError(t, proto.Unmarshal(body[5:], &m))
				require.Equal(t, "t1", m.GetId())
				require.Equal(t, int32(3), m.GetHistoryLength())
				if perr == nil {
					require.Equal(t, "t1", field(t, res, "id"))
					require.Equal(t, "TASK_STATE_WORKING", field(t, res, "status", "state"))
				}
			}
			require.Equal(t, 2, got.ProtoMajor)
			require.Equal(t, "application/grpc", got.Header.Get("Content-Type"))
			require.Equal(t, "trailers", got.Header.Get("Te"))
			require.Equal(t, "Bearer tok-123", got.Header.Get("Authorization"))
			require.Equal(t, "1.0", got.Header.Get("A2A-Version"))
			require.Equal(t, "dec-9", got.Header.Get(handler.DecisionIDHeader))
			require.Equal(t, tc.events, n)
			if tc.wantCode == "" {
				require.Nil(t, perr)
				return
			}
			require.NotNil(t, perr)
			require.Equal(t, tc.wantCode, perr.Code, perr.Error())
			require.Equal(t, tc.wantMsg, perr.Message)
			if tc.wantCode == protocol.TaskNotFound {
				require.Equal(t, map[string]string{"k": "v"}, perr.Metadata)
			}
		})
	}
}

// TestBindingIdleTimeout: a silent HTTP+JSON or gRPC stream is ended by
// the idle timeout, as a JSON-RPC one is.
func TestBindingIdleTimeout(t *testing.T) {
	silent := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	for _, b := range []protocol.Binding{protocol.HTTPJSON, protocol.GRPC} {
		t.Run(string(b), func(t *testing.T) {
			h := func(w http.ResponseWriter, r *http.Request) {
				if b == protocol.GRPC {
					w.Header().Set("Content-Type", "application/grpc")
				} else {
					w.Header().Set("Content-Type", "text/event-stream")
				}
				silent(w, r)
			}
			var url string
			if b == protocol.GRPC {
				url = h2cServer(t, h)
			} else {
				srv := httptest.NewServer(http.HandlerFunc(h))
				defer srv.Close()
				url = srv.URL
			}
			inv, err := handler.NewInvoker(map[string]string{"up": url}, handler.WithStreamIdleTimeout(100*time.Millisecond),
				handler.WithBindings(map[string]protocol.Binding{"up": b}))
			require.NoError(t, err)
			defer func() { _ = inv.Close() }()
			events, perr := collect(t, inv, req("SubscribeToTask", `{"id":"t1"}`))
			require.Empty(t, events)
			require.NotNil(t, perr)
			require.Equal(t, protocol.Internal, perr.Code)
			require.Equal(t, "the skill's handler sent nothing for 100ms", perr.Message)
		})
	}
}
