package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/test/testutil"
)

// failingStreams is an a2a-go request handler whose streams fail: a "before" message fails
// before its first event, a "mid" message after one task event (t-mid), both with
// TaskNotCancelable; an "open" message opens task t-open and ends. Subscribing to t-mid fails
// after one event, to any other task before the first. Only the streaming methods are served.
type failingStreams struct{ a2asrv.RequestHandler }

func (failingStreams) SendStreamingMessage(_ context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return failingStream(req.Message.Parts[0].Text())
}

func (failingStreams) SubscribeToTask(_ context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return failingStream(subscribed(string(req.ID)))
}

// subscribed is how a subscription to task id goes: "mid" for t-mid, else "before".
func subscribed(id string) string {
	if id == "t-mid" {
		return "mid"
	}
	return "before"
}

func failingStream(text string) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if text == "open" {
			yield(&a2a.Task{ID: "t-open", ContextID: "c-open", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, nil)
			return
		}
		fail := a2a.NewError(a2a.ErrTaskNotCancelable, "ledger locked")
		if text == "mid" {
			task := &a2a.Task{ID: "t-mid", ContextID: "c-mid", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
			if !yield(task, nil) {
				return
			}
		}
		yield(nil, fail)
	}
}

// failingUpstream serves failingStreams over binding on 127.0.0.1 and points handler at it.
func failingUpstream(t *testing.T, handler, binding string) (url string) {
	t.Helper()
	rh := failingStreams{}
	switch binding {
	case config.BindingGRPC:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		s := grpc.NewServer()
		grpcv1.NewHandler(rh).RegisterWith(s)
		go func() { _ = s.Serve(ln) }()
		t.Cleanup(s.Stop)
		return "http://" + ln.Addr().String()
	case config.BindingHTTPJSON:
		srv := httptest.NewServer(http.StripPrefix("/a2a", a2asrv.NewRESTHandler(rh)))
		t.Cleanup(srv.Close)
		return srv.URL + "/a2a"
	}
	srv := httptest.NewServer(a2asrv.NewJSONRPCHandler(rh))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

var decisionSuffix = regexp.MustCompile(` \(decision [^)]*\)`)

// streamAnswer is what a caller read of a streaming call that failed: the answer's form (its
// framing, with the events relayed before the error), and the error (code, reason, message
// without the decision id, which differs per request).
type streamAnswer struct{ form, err string }

// TestStreamErrorsOneFormPerCallerBinding: a handler's stream error reaches the caller in one
// form per caller binding, whichever binding the handler answered over (3 × 3), and the error
// itself — code, reason and message — is the same from every handler binding:
//   - before the first event: JSON-RPC, a plain JSON-RPC error response with the error's HTTP
//     status; HTTP+JSON, the error's HTTP status and google.rpc.Status JSON; gRPC, a
//     trailers-only response;
//   - after an event: the event, then JSON-RPC's error response as the last event, HTTP+JSON's
//     "event: error" with the google.rpc.Status body, gRPC's status in the trailers.
func TestStreamErrorsOneFormPerCallerBinding(t *testing.T) {
	const handler = "recon.v3.reconcile"
	tok := "Bearer " + testutil.Token(t, grpcCaller)
	want := map[string]map[string]streamAnswer{} // caller → when → answer
	for _, upstream := range []string{config.BindingJSONRPC, config.BindingHTTPJSON, config.BindingGRPC} {
		t.Run("handler over "+upstream, func(t *testing.T) {
			d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
			d.Config.Handlers[handler] = failingUpstream(t, handler, upstream)
			d.Config.HandlerBindings = map[string]string{handler: upstream}
			srv := testutil.Start(t, d)
			for _, caller := range []string{"JSON-RPC", "HTTP+JSON", "gRPC"} {
				for _, when := range []string{"before", "mid"} {
					t.Run(caller+"/"+when, func(t *testing.T) {
						got := callStream(t, srv, caller, tok, when)
						require.Contains(t, got.err, "TASK_NOT_CANCELABLE", "%+v", got)
						if want[caller] == nil {
							want[caller] = map[string]streamAnswer{}
						}
						if w, ok := want[caller][when]; ok {
							require.Equal(t, w, got, "the same answer as from a handler over another binding")
							return
						}
						want[caller][when] = got
					})
				}
			}
		})
	}
	require.Len(t, want, 3)
}

// callStream sends a streaming SendMessage with text when to reconcile-invoice over caller's
// binding and reads the failed answer, checking its form.
func callStream(t *testing.T, srv *testutil.Server, caller, tok, when string) streamAnswer {
	t.Helper()
	msg := `{"messageId":"m-` + rand.Text() + `","role":"ROLE_USER","parts":[{"text":"` + when + `"}],"metadata":{"skillId":"reconcile-invoice"}}`
	switch caller {
	case "JSON-RPC":
		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":7,"method":"SendStreamingMessage","params":{"message":`+msg+`}}`,
			"A2A-Version", "1.0", "Authorization", tok)
		return jsonrpcStreamAnswer(t, r)
	case "HTTP+JSON":
		r := srv.Do(t, http.MethodPost, "/message:stream", `{"message":`+msg+`}`,
			"A2A-Version", "1.0", "Content-Type", "application/json", "Authorization", tok)
		return statusStreamAnswer(t, r)
	}
	var pm a2apb.Message
	require.NoError(t, protojson.Unmarshal([]byte(msg), &pm))
	req, err := proto.Marshal(&a2apb.SendMessageRequest{Message: &pm})
	require.NoError(t, err)
	resp, body := grpcCall(t, srv, "/lf.a2a.v1.A2AService/SendStreamingMessage", frame(req), "Authorization", tok, "A2A-Version", "1.0")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/grpc", resp.Header.Get("Content-Type"))
	st := resp.Trailer
	form := fmt.Sprintf("grpc, %d messages before the status", len(messages(t, body)))
	if resp.Header.Get("Grpc-Status") != "" {
		st = resp.Header
		require.Empty(t, body)
		form = "grpc, trailers-only"
	}
	var ids []string
	for _, m := range messages(t, body) {
		var ev a2apb.StreamResponse
		require.NoError(t, proto.Unmarshal(m, &ev))
		ids = append(ids, ev.GetTask().GetId())
	}
	b, err := base64.RawStdEncoding.DecodeString(st.Get("Grpc-Status-Details-Bin"))
	require.NoError(t, err)
	var sp spb.Status
	require.NoError(t, proto.Unmarshal(b, &sp))
	require.Len(t, sp.GetDetails(), 1)
	var info errdetails.ErrorInfo
	require.NoError(t, sp.GetDetails()[0].UnmarshalTo(&info))
	return streamAnswer{form: form + " " + strings.Join(ids, ","),
		err: fmt.Sprintf("%s %s %s", st.Get("Grpc-Status"), info.GetReason(), decisionSuffix.ReplaceAllString(st.Get("Grpc-Message"), ""))}
}

// jsonrpcStreamAnswer reads a JSON-RPC streaming answer (request id 7) that failed: a plain
// JSON-RPC error response with the error's HTTP status (A2A 1.0, before any event), or HTTP 200
// SSE with the error response as the last event.
func jsonrpcStreamAnswer(t *testing.T, r *testutil.Response) streamAnswer {
	t.Helper()
	events := []string{"data: " + string(r.Body)}
	form := fmt.Sprintf("HTTP %d %s", r.Status, r.Header.Get("Content-Type"))
	if r.Header.Get("Content-Type") == "text/event-stream" {
		require.Equal(t, http.StatusOK, r.Status)
		events = strings.Split(strings.TrimSuffix(string(r.Body), "\n\n"), "\n\n")
		form = fmt.Sprintf("sse, %d events before the error: %s", len(events)-1, eventIDs(events[:len(events)-1]))
	} else {
		require.Equal(t, "application/json", r.Header.Get("Content-Type"), "%s", r.Body)
		require.GreaterOrEqual(t, r.Status, 400, "%s", r.Body)
	}
	last, ok := strings.CutPrefix(events[len(events)-1], "data: ")
	require.True(t, ok, "%q", r.Body)
	var env struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code    int                `json:"code"`
			Message string             `json:"message"`
			Data    testutil.ErrorData `json:"data"` // a list in 1.0, one object to 0.3 callers
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(last), &env), last)
	require.NotNil(t, env.Error, last)
	require.Equal(t, "7", string(env.ID))
	require.Len(t, env.Error.Data, 1)
	return streamAnswer{form: form,
		err: fmt.Sprintf("%d %s %s", env.Error.Code, env.Error.Data[0].Reason, decisionSuffix.ReplaceAllString(env.Error.Message, ""))}
}

// statusStreamAnswer reads an HTTP+JSON streaming answer that failed: the error's HTTP status
// and google.rpc.Status JSON, or HTTP 200 SSE whose last event is "event: error" with that body.
func statusStreamAnswer(t *testing.T, r *testutil.Response) streamAnswer {
	t.Helper()
	body := string(r.Body)
	form := fmt.Sprintf("HTTP %d %s", r.Status, r.Header.Get("Content-Type"))
	if r.Header.Get("Content-Type") == "text/event-stream" {
		require.Equal(t, http.StatusOK, r.Status)
		events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
		var ok bool
		body, ok = strings.CutPrefix(events[len(events)-1], "event: error\ndata: ")
		require.True(t, ok, "the last event is an error event: %q", r.Body)
		form = fmt.Sprintf("sse, %d events before the error: %s", len(events)-1, eventIDs(events[:len(events)-1]))
	} else {
		require.GreaterOrEqual(t, r.Status, 400, body)
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	}
	var st struct {
		Error struct {
			Code    int    `json:"code"`
			Status  string `json:"status"`
			Message string `json:"message"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &st), body)
	require.Len(t, st.Error.Details, 1)
	return streamAnswer{form: form, err: fmt.Sprintf("%d %s %s %s", st.Error.Code, st.Error.Status, st.Error.Details[0].Reason,
		decisionSuffix.ReplaceAllString(st.Error.Message, ""))}
}

// eventIDs names the task of each relayed SSE event.
func eventIDs(events []string) string {
	var ids []string
	for _, e := range events {
		var v struct {
			ID   string `json:"id"` // 0.3: the event itself, kind-discriminated
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
			Result struct {
				ID   string `json:"id"`
				Task struct {
					ID string `json:"id"`
				} `json:"task"`
			} `json:"result"`
		}
		_ = json.Unmarshal([]byte(strings.TrimPrefix(e, "data: ")), &v)
		ids = append(ids, v.ID+v.Task.ID+v.Result.ID+v.Result.Task.ID)
	}
	return strings.Join(ids, ",")
}

// messages splits a gRPC response body into its length-prefixed messages.
func messages(t *testing.T, body []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(body) > 0 {
		require.GreaterOrEqual(t, len(body), 5)
		n := int(body[1])<<24 | int(body[2])<<16 | int(body[3])<<8 | int(body[4])
		require.GreaterOrEqual(t, len(body)-5, n)
		out = append(out, body[5:5+n])
		body = body[5+n:]
	}
	return out
}
