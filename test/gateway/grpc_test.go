package gateway_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/handler/echo"
	"github.com/capgate/capgate/test/testutil"
)

// grpcCaller is partner-1@acme with recon.run: entitled to reconcile-invoice.
var grpcCaller = testutil.TokenOptions{Subject: "partner-1", Tenant: "acme", Scopes: []string{"recon.run"}}

func grpcClient(t *testing.T, srv *testutil.Server, tok testutil.TokenOptions, opts ...testutil.ClientOption) *a2aclient.Client {
	t.Helper()
	return srv.Client(t, a2a.TransportProtocolGRPC, append([]testutil.ClientOption{testutil.Bearer(testutil.Token(t, tok))}, opts...)...)
}

// reconcileMessage is the design's reference example: a PDF and a request to reconcile it.
func reconcileMessage() *a2a.Message {
	p := a2a.NewRawPart([]byte("%PDF-1.7\n% an invoice\n"))
	p.MediaType = "application/pdf"
	return a2a.NewMessage(a2a.MessageRoleUser, p, a2a.NewTextPart("reconcile this against the PO"))
}

func echoReport(t *testing.T, task *a2a.Task) echo.Report {
	t.Helper()
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.Len(t, task.Artifacts, 1)
	require.Len(t, task.Artifacts[0].Parts, 1)
	data, ok := task.Artifacts[0].Parts[0].Content.(a2a.Data)
	require.True(t, ok, "want a data part, got %T", task.Artifacts[0].Parts[0].Content)
	b, err := json.Marshal(data.Value)
	require.NoError(t, err)
	var r echo.Report
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

// TestGRPCClient drives every A2A 1.0 operation through the official a2a-go v2 gRPC client
// (a2agrpc over h2c) against capgate with the builtin echo behind it.
func TestGRPCClient(t *testing.T) {
	d := testutil.LoadDeployment(t, "")
	d.Config.Push = config.Push{Enabled: true, AllowedURLs: []string{"https://hooks.example.com/"}}
	srv := testutil.Start(t, d)
	c := grpcClient(t, srv, grpcCaller)

	t.Run("the card advertises gRPC as a gRPC target for the agent URL's host", func(t *testing.T) {
		card := srv.PublicCard(t)
		var urls []string
		for _, iface := range card.SupportedInterfaces {
			if iface.ProtocolBinding == a2a.TransportProtocolGRPC {
				require.Equal(t, a2a.ProtocolVersion("1.0"), iface.ProtocolVersion)
				urls = append(urls, iface.URL)
			}
		}
		require.Equal(t, []string{config.GRPCTarget(card.SupportedInterfaces[0].URL)}, urls)
		require.True(t, strings.HasPrefix(urls[0], "dns:///"), urls[0])
	})

	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: reconcileMessage()})
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "want a task, got %T", res)

	t.Run("SendMessage is routed, and the handler gets the message", func(t *testing.T) {
		r := echoReport(t, task)
		require.Equal(t, "reconcile-invoice", r.Capability)
		require.Equal(t, "partner-1", r.Principal)
		require.Equal(t, "acme", r.Tenant)
		require.Equal(t, []string{"application/pdf", "text/plain"}, r.MediaTypes, "the parts the caller sent reach the handler")
	})
	t.Run("GetTask", func(t *testing.T) {
		got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		require.NoError(t, err)
		require.Equal(t, task.ID, got.ID)
		require.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	})
	t.Run("CancelTask on a completed task is TaskNotCancelable", func(t *testing.T) {
		_, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotCancelable)
	})
	t.Run("SendStreamingMessage", func(t *testing.T) {
		var events []a2a.Event
		for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: reconcileMessage()}) {
			require.NoError(t, err)
			events = append(events, ev)
		}
		require.NotEmpty(t, events)
		var last *a2a.TaskStatusUpdateEvent
		for _, ev := range events {
			if s, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
				last = s
			}
		}
		require.NotNil(t, last, "want a status update, got %v", events)
		require.Equal(t, a2a.TaskStateCompleted, last.Status.State)
	})
	t.Run("SubscribeToTask on a task awaiting clarification", func(t *testing.T) {
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello there"))})
		require.NoError(t, err)
		clar, ok := res.(*a2a.Task)
		require.True(t, ok, "want a task, got %T", res)
		require.Equal(t, a2a.TaskStateInputRequired, clar.Status.State)
		var events []a2a.Event
		for ev, err := range c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: clar.ID}) {
			require.NoError(t, err)
			events = append(events, ev)
		}
		require.Len(t, events, 1)
		sub, ok := events[0].(*a2a.Task)
		require.True(t, ok, "want a task, got %T", events[0])
		require.Equal(t, clar.ID, sub.ID)
	})
	t.Run("SubscribeToTask on another caller's task is TaskNotFound", func(t *testing.T) {
		other := grpcClient(t, srv, testutil.TokenOptions{Subject: "partner-2", Tenant: "acme", Scopes: []string{"recon.run"}})
		for _, err := range other.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: task.ID}) {
			require.ErrorIs(t, err, a2a.ErrTaskNotFound)
			break
		}
	})
	t.Run("GetExtendedAgentCard", func(t *testing.T) {
		card, err := c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
		require.NoError(t, err)
		require.Contains(t, skillIDs(card), "reconcile-invoice")
	})
	t.Run("ListTasks", func(t *testing.T) {
		list, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{PageSize: 1})
		require.NoError(t, err)
		require.Len(t, list.Tasks, 1)
		require.NotEmpty(t, list.NextPageToken)
	})
	t.Run("push config create, get, list, delete", func(t *testing.T) {
		cfg := &a2a.PushConfig{TaskID: task.ID, ID: "cfg-1", URL: "https://hooks.example.com/a2a"}
		created, err := c.CreateTaskPushConfig(t.Context(), cfg)
		require.NoError(t, err)
		require.Equal(t, cfg.URL, created.URL)
		got, err := c.GetTaskPushConfig(t.Context(), &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "cfg-1"})
		require.NoError(t, err)
		require.Equal(t, cfg.URL, got.URL)
		all, err := c.ListTaskPushConfigs(t.Context(), &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
		require.NoError(t, err)
		require.Len(t, all, 1)
		require.NoError(t, c.DeleteTaskPushConfig(t.Context(), &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "cfg-1"}))
		all, err = c.ListTaskPushConfigs(t.Context(), &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
		require.NoError(t, err)
		require.Empty(t, all)
	})
	t.Run("a push URL outside push.allowed_urls is refused", func(t *testing.T) {
		_, err := c.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: task.ID, URL: "https://evil.example.com/a2a"})
		require.ErrorIs(t, err, a2a.ErrInvalidParams)
	})
	t.Run("another caller's task is TaskNotFound", func(t *testing.T) {
		other := grpcClient(t, srv, testutil.TokenOptions{Subject: "partner-2", Tenant: "acme", Scopes: []string{"recon.run"}})
		_, err := other.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		_, unknown := other.GetTask(t.Context(), &a2a.GetTaskRequest{ID: "no-such-task"})
		require.ErrorIs(t, unknown, a2a.ErrTaskNotFound)
	})
	t.Run("anonymous is Unauthenticated", func(t *testing.T) {
		anon := srv.Client(t, a2a.TransportProtocolGRPC)
		_, err := anon.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		require.ErrorIs(t, err, a2a.ErrUnauthenticated)
		_, err = anon.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
		require.ErrorIs(t, err, a2a.ErrUnauthenticated)
	})
}

// TestGRPCRequiredExtension: a required extension the gRPC call did not activate (a2a-extensions
// metadata) is refused as over the other bindings.
func TestGRPCRequiredExtension(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "description: Trace ids, required: false}", "description: Trace ids, required: true}")
	})
	srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
	_, err := grpcClient(t, srv, grpcCaller).GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
	require.ErrorIs(t, err, a2a.ErrExtensionSupportRequired)
	var ae *a2a.Error
	require.ErrorAs(t, err, &ae)
	require.Contains(t, ae.Message, testutil.TraceExtension)

	card, err := grpcClient(t, srv, grpcCaller, testutil.Header("A2A-Extensions", testutil.TraceExtension)).
		GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
	require.NoError(t, err)
	require.Contains(t, skillIDs(card), "reconcile-invoice")
}

// grpcCall sends one raw gRPC request over h2c and returns the response status, headers,
// trailers and body.
func grpcCall(t *testing.T, srv *testutil.Server, path string, body []byte, headers ...string) (*http.Response, []byte) {
	t.Helper()
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &h2c}
	defer tr.CloseIdleConnections()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+u.Host+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var out bytes.Buffer
	_, err = out.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp, out.Bytes()
}

func frame(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// TestGRPCRawRefusals: refusals are trailers-only gRPC responses, whoever refuses.
func TestGRPCRawRefusals(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	cases := []struct {
		name, path string
		body       []byte
		code       string
	}{
		{"unknown method", "/lf.a2a.v1.A2AService/Nope", frame(nil), "12"},
		{"truncated message", "/lf.a2a.v1.A2AService/GetTask", []byte{0, 0, 0, 0, 9, 1}, "3"},
		{"compressed message", "/lf.a2a.v1.A2AService/GetTask", []byte{1, 0, 0, 0, 0}, "3"},
		{"the 0.3 service", "/a2a.v1.A2AService/GetAgentCard", frame(nil), "16"}, // anonymous: authentication first
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := grpcCall(t, srv, tc.path, tc.body)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "application/grpc", resp.Header.Get("Content-Type"))
			require.Equal(t, tc.code, resp.Header.Get("Grpc-Status"), "trailers-only: the status is in the headers")
			require.NotEmpty(t, resp.Header.Get("Grpc-Status-Details-Bin"))
			require.Empty(t, body)
		})
	}
	t.Run("the 0.3 service is not served", func(t *testing.T) {
		resp, _ := grpcCall(t, srv, "/a2a.v1.A2AService/GetAgentCard", frame(nil),
			"Authorization", "Bearer "+testutil.Token(t, grpcCaller))
		require.Equal(t, "12", resp.Header.Get("Grpc-Status"))
		require.Contains(t, resp.Header.Get("Grpc-Message"), "lf.a2a.v1.A2AService")
	})
}

// failingStreamHandler is a skill handler whose stream sends one task event and then fails with
// a JSON-RPC error.
type failingStreamHandler struct{}

func (failingStreamHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := requestID(r)
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+id+
		`,"result":{"task":{"id":"fail-task-1","contextId":"fail-ctx-1","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
	_, _ = io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+id+
		`,"error":{"code":-32001,"message":"task not found"}}`+"\n\n")
}

// TestGRPCMidStreamError: an error after a stream's first event reaches the a2a-go gRPC client
// as a typed error after that event (the call's trailers), not as a normal end.
func TestGRPCMidStreamError(t *testing.T) {
	up := httptest.NewServer(failingStreamHandler{})
	t.Cleanup(up.Close)
	d := testutil.LoadDeployment(t, "")
	d.Config.Handlers["invoices.lookup.v1"] = up.URL + "/"
	srv := testutil.Start(t, d)
	c := grpcClient(t, srv, testutil.TokenOptions{Scopes: []string{"invoices.read"}})
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Show me invoice INV-20931"))
	msg.Metadata = map[string]any{"skillId": "lookup-invoice-v1"}
	var events []a2a.Event
	var got error
	for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			got = err
			break
		}
		events = append(events, ev)
	}
	require.Len(t, events, 1)
	task, ok := events[0].(*a2a.Task)
	require.True(t, ok, "want a task, got %T", events[0])
	require.Equal(t, a2a.TaskID("fail-task-1"), task.ID)
	require.ErrorIs(t, got, a2a.ErrTaskNotFound)
}

// TestGRPCOff: agent.grpc: false takes gRPC out of the card, and a gRPC call is unimplemented.
func TestGRPCOff(t *testing.T) {
	d := testutil.LoadDeployment(t, "")
	off := false
	d.Config.Agent.GRPC = &off
	srv := testutil.Start(t, d)
	for _, iface := range srv.PublicCard(t).SupportedInterfaces {
		require.NotEqual(t, a2a.TransportProtocolGRPC, iface.ProtocolBinding)
	}
	resp, body := grpcCall(t, srv, "/lf.a2a.v1.A2AService/GetExtendedAgentCard", frame(nil),
		"Authorization", "Bearer "+testutil.Token(t, grpcCaller))
	require.Equal(t, "12", resp.Header.Get("Grpc-Status"))
	require.Equal(t, "this agent does not serve the gRPC binding", resp.Header.Get("Grpc-Message"))
	require.Empty(t, body)
}

// TestGRPCStatusMappingA2AGo pins where a2a-go v2.3.1's gRPC client and the A2A 1.0 error mapping
// disagree (docs/interop.md): capgate answers PushNotificationNotSupported as the spec maps it,
// UNIMPLEMENTED with its ErrorInfo reason; a2a-go expects FAILED_PRECONDITION for that reason
// and, finding no match, reports an internal error — with capgate's message intact.
func TestGRPCStatusMappingA2AGo(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, "")) // push.enabled is false
	c := grpcClient(t, srv, grpcCaller)
	_, err := c.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: "t-1", URL: "https://hooks.example.com/a2a"})
	require.Error(t, err)
	require.ErrorIs(t, err, a2a.ErrInternalError, "a2a-go types this reason only with FAILED_PRECONDITION")
	require.NotErrorIs(t, err, a2a.ErrPushNotificationNotSupported)
	require.Contains(t, err.Error(), "push notifications are not supported by this agent")

	msg, err := proto.Marshal(&a2apb.TaskPushNotificationConfig{TaskId: "t-1", Url: "https://hooks.example.com/a2a"})
	require.NoError(t, err)
	resp, _ := grpcCall(t, srv, "/lf.a2a.v1.A2AService/CreateTaskPushNotificationConfig", frame(msg),
		"Authorization", "Bearer "+testutil.Token(t, grpcCaller))
	require.Equal(t, "12", resp.Header.Get("Grpc-Status"), "UNIMPLEMENTED, as the A2A 1.0 mapping says")
}

// TestGRPCUnservedStreamingMethod: a client- or bidi-streaming call to a method capgate does not
// serve (a reflection client's first call) hears UNIMPLEMENTED at once, while the client has not
// half-closed — it does not wait for the end of a request body that never comes.
func TestGRPCUnservedStreamingMethod(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	conn, err := grpc.NewClient(srv.Addrs.A2A, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	for _, method := range []string{
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
		"/lf.a2a.v1.A2AService/NoSuchMethod",
	} {
		t.Run(method, func(t *testing.T) {
			// The deadline only stops a regression from hanging the suite; the call must end
			// with UNIMPLEMENTED, never DEADLINE_EXCEEDED.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
			require.NoError(t, err)
			// The server may have answered (and ended the stream) before the message goes out:
			// SendMsg then says io.EOF, and RecvMsg has the status (grpc.ClientStream).
			if err := s.SendMsg(&a2apb.GetTaskRequest{Id: "t-1"}); !errors.Is(err, io.EOF) {
				require.NoError(t, err)
			}
			// No CloseSend: the client keeps its half open, as a streaming client does.
			err = s.RecvMsg(&a2apb.Task{})
			require.Equal(t, codes.Unimplemented, status.Code(err), "%v", err)
		})
	}
}
