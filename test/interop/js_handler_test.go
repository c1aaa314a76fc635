package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/handlerauth"
	"github.com/capgate/capgate/test/testutil"
)

// jsHandler is @a2a-js/sdk's server side (js/handler.mjs) listening on
// 127.0.0.1 until the test ends.
type jsHandler struct {
	// JSONRPC and REST are the SDK's JSON-RPC and HTTP+JSON endpoints, GRPC
	// its gRPC server (http://127.0.0.1:port).
	JSONRPC, REST, GRPC string
	calls               string // the file handler.mjs appends every request to
	read                int    // how many calls Next has returned
	stdin               io.Writer
	configured          chan struct{} // one value per '@@configured' line
}

// URL is the endpoint of the handler's binding b (config.Binding*).
func (h *jsHandler) URL(b string) string {
	switch b {
	case config.BindingHTTPJSON:
		return h.REST
	case config.BindingGRPC:
		return h.GRPC
	}
	return h.JSONRPC
}

// handlerCall is one request the JS handler received.
type handlerCall struct {
	// Binding is the endpoint it reached: JSONRPC, HTTP+JSON or GRPC.
	Binding string `json:"binding"`
	// Method is the JSON-RPC method, the gRPC method or the HTTP method and
	// path of an HTTP+JSON call (see A2AMethod).
	Method        string `json:"method"`
	Authorization string `json:"authorization"`
	Version       string `json:"version"`
	DecisionID    string `json:"decisionId"`
	Extensions    string `json:"extensions"` // A2A-Extensions
	// CallerAuthorization is X-Capgate-Caller-Authorization (absent unless
	// identity.forward_caller_token).
	CallerAuthorization string `json:"callerAuthorization"`
	// Jose is the handler's own check of the token (jose, against capgate's
	// JWKS), once Verify has configured it.
	Jose *struct {
		OK                                    bool
		Sub, Tenant, Scope, Capability, Error string
		Aud                                   any
	} `json:"jose"`
}

// startJSHandler runs handler.mjs and waits for the line naming its address.
func startJSHandler(t *testing.T, node string) *jsHandler {
	t.Helper()
	h := &jsHandler{calls: filepath.Join(t.TempDir(), "calls.jsonl"), configured: make(chan struct{})}
	cmd := exec.Command(node, "handler.mjs", h.calls)
	cmd.Dir = jsDir
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	h.stdin = stdin
	copied := make(chan struct{})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = stdin.Close() // handler.mjs exits when its stdin ends
			<-copied          // and its stdout with it
			_ = cmd.Wait()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			for _, l := range stderr.Lines() {
				t.Logf("handler.mjs: %s", l)
			}
		}
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line, ok := bytes.CutPrefix(sc.Bytes(), []byte("@@handler "))
		if !ok {
			continue
		}
		require.NoError(t, json.Unmarshal(line, &struct {
			JSONRPC *string `json:"jsonrpc"`
			REST    *string `json:"rest"`
			GRPC    *string `json:"grpc"`
		}{&h.JSONRPC, &h.REST, &h.GRPC}))
		go func() {
			defer close(copied)
			defer close(h.configured)
			for sc.Scan() {
				if bytes.Equal(sc.Bytes(), []byte("@@configured")) {
					h.configured <- struct{}{}
				}
			}
			_, _ = io.Copy(io.Discard, stdout) // a line too long for the scanner
		}()
		return h
	}
	close(copied) // stdout ended: the script exited
	stop()
	require.FailNow(t, "handler.mjs did not start", "%s", strings.Join(stderr.Lines(), "\n"))
	return nil
}

// Verify makes the handler check every token itself, with jose against
// jwksURL (issuer and one of audiences), and refuse the others with -31401.
func (h *jsHandler) Verify(t *testing.T, jwksURL, issuer string, audiences ...string) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"jwks": jwksURL, "issuer": issuer, "audiences": audiences})
	require.NoError(t, err)
	_, err = h.stdin.Write(append(b, '\n'))
	require.NoError(t, err)
	_, ok := <-h.configured
	require.True(t, ok, "handler.mjs exited")
}

// Next returns the calls the handler received since the last Next.
func (h *jsHandler) Next(t *testing.T) []handlerCall {
	t.Helper()
	b, err := os.ReadFile(h.calls)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var all []handlerCall
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var c handlerCall
		require.NoError(t, json.Unmarshal(l, &c), "%s", l)
		all = append(all, c)
	}
	out := all[h.read:]
	h.read = len(all)
	return out
}

// restRoutes name the A2A 1.0 method of an HTTP+JSON call by its HTTP method
// and path (the proto's google.api.http annotations, optionally under
// /{tenant}); written out here, not taken from capgate's route table, which
// builds the calls under test.
var restRoutes = []struct {
	route  *regexp.Regexp
	method string
}{
	{regexp.MustCompile(`^POST (/[^/]+)?/message:send$`), "SendMessage"},
	{regexp.MustCompile(`^POST (/[^/]+)?/message:stream$`), "SendStreamingMessage"},
	{regexp.MustCompile(`^GET (/[^/]+)?/tasks/[^/]+$`), "GetTask"},
	{regexp.MustCompile(`^GET (/[^/]+)?/tasks$`), "ListTasks"},
	{regexp.MustCompile(`^POST (/[^/]+)?/tasks/[^/]+:cancel$`), "CancelTask"},
	{regexp.MustCompile(`^(GET|POST) (/[^/]+)?/tasks/[^/]+:subscribe$`), "SubscribeToTask"},
	{regexp.MustCompile(`^POST (/[^/]+)?/tasks/[^/]+/pushNotificationConfigs$`), "CreateTaskPushNotificationConfig"},
	{regexp.MustCompile(`^GET (/[^/]+)?/tasks/[^/]+/pushNotificationConfigs/[^/]+$`), "GetTaskPushNotificationConfig"},
	{regexp.MustCompile(`^GET (/[^/]+)?/tasks/[^/]+/pushNotificationConfigs$`), "ListTaskPushNotificationConfigs"},
	{regexp.MustCompile(`^DELETE (/[^/]+)?/tasks/[^/]+/pushNotificationConfigs/[^/]+$`), "DeleteTaskPushNotificationConfig"},
	{regexp.MustCompile(`^GET (/[^/]+)?/extendedAgentCard$`), "GetExtendedAgentCard"},
}

// A2AMethod is the call's A2A method: the JSON-RPC and gRPC method names are
// the same; an HTTP+JSON call is named by its route (its Method otherwise).
func (c handlerCall) A2AMethod() string {
	if c.Binding != config.BindingHTTPJSON {
		return c.Method
	}
	for _, r := range restRoutes {
		if r.route.MatchString(c.Method) {
			return r.method
		}
	}
	return c.Method
}

// jsHandlerEnv is one capgate whose every handler is the JS handler, called
// over one handler binding, and the caller of one binding.
type jsHandlerEnv struct {
	h       *jsHandler
	c       *a2aclient.Client
	verify  *handlerauth.Verifier
	binding a2a.TransportProtocol
	// handler is the binding capgate calls the JS handler over (config.Binding*).
	handler string
	subject string
	version string // the A2A version capgate speaks to the handler
	// tasks the steps create, by name.
	tasks map[string]*a2a.Task
}

// The capability the caller reaches, its handler name and its limits
// (manifests/finance/capabilities/reconcile-invoice.yaml).
const (
	jsCapability = "reconcile-invoice"
	jsAudience   = "recon.v3.reconcile"
	// jsExtension is an extension of the finance agent (capgate.yaml).
	jsExtension = "https://example.com/ext/trace/v1"
)

var jsLimits = handlerauth.Limits{"max_pdf_pages": float64(200), "max_file_bytes": float64(524288), "cost_class": "medium"}

// expectCalls checks the calls the handler received since the last check:
// their methods, in order, and the token of each, verified against
// capgate's admin JWKS: audience this handler, the caller, the caller's
// scopes narrowed to the capability's, the capability's limits, the decision
// id capgate sent alongside.
func (e *jsHandlerEnv) expectCalls(t *testing.T, methods ...string) []handlerCall {
	t.Helper()
	calls := e.h.Next(t)
	got := make([]string, 0, len(calls))
	for _, c := range calls {
		got = append(got, c.A2AMethod())
	}
	require.Equal(t, append([]string{}, methods...), got, "the calls that reached the JS handler")
	for _, c := range calls {
		require.Equal(t, e.handler, c.Binding, "capgate calls the handler over its configured binding")
		require.Equal(t, e.version, c.Version, "capgate speaks the caller's A2A version")
		require.Empty(t, c.CallerAuthorization, "the caller's own credential never reaches the handler")
		claims, err := e.verify.Verify(t.Context(), c.Authorization)
		require.NoError(t, err, "%s: the token the handler received", c.Method)
		require.Equal(t, jsAudience, claims.Audience)
		require.Equal(t, e.subject, claims.Subject)
		require.Equal(t, "acme", claims.Tenant)
		require.Equal(t, []string{"recon.run"}, claims.Scopes, "invoices.read is narrowed away")
		require.Equal(t, jsCapability, claims.Capability)
		require.Equal(t, jsLimits, claims.Limits)
		require.NotEmpty(t, claims.DecisionID)
		require.Equal(t, c.DecisionID, claims.DecisionID, "X-Capgate-Decision-Id names the token's decision")
		// The handler's own verifier (jose) agrees.
		require.NotNil(t, c.Jose, "the handler verified the token")
		require.True(t, c.Jose.OK, "jose: %s", c.Jose.Error)
		require.Equal(t, e.subject, c.Jose.Sub)
		require.Equal(t, "acme", c.Jose.Tenant)
		require.Equal(t, "recon.run", c.Jose.Scope)
		require.Equal(t, jsCapability, c.Jose.Capability)
		require.Equal(t, jsAudience, c.Jose.Aud)
	}
	return calls
}

func jsMessage(text string) *a2a.SendMessageRequest {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Reconcile invoice INV-1 against PO-2 "+text))
	msg.Metadata = map[string]any{"skillId": jsCapability}
	return &a2a.SendMessageRequest{Message: msg}
}

// drain collects a stream's events and the error that ended it.
func drain(seq func(func(a2a.Event, error) bool)) ([]a2a.Event, error) {
	var events []a2a.Event
	for ev, err := range seq {
		if err != nil {
			return events, err
		}
		events = append(events, ev)
	}
	return events, nil
}

func eventKinds(events []a2a.Event) []string {
	out := make([]string, 0, len(events))
	for _, ev := range events {
		switch ev := ev.(type) {
		case *a2a.Task:
			out = append(out, "task "+string(ev.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			out = append(out, "status "+string(ev.Status.State))
		case *a2a.TaskArtifactUpdateEvent:
			out = append(out, "artifact")
		case *a2a.Message:
			out = append(out, "message")
		}
	}
	return out
}

func artifactText(t *testing.T, a *a2a.Artifact) string {
	t.Helper()
	require.NotEmpty(t, a.Parts)
	return a.Parts[0].Text()
}

// jsUnsupported checks the SDK's UnsupportedOperationError as the caller gets it:
// typed on JSON-RPC and HTTP+JSON; on gRPC capgate sends UNIMPLEMENTED (the A2A
// mapping), which a2a-go v2.3.1 types only with FAILED_PRECONDITION, so it
// reports an internal error with the message kept (docs/interop.md).
func (e *jsHandlerEnv) jsUnsupported(t *testing.T, err error, msg string) {
	t.Helper()
	require.Error(t, err)
	if e.binding == a2a.TransportProtocolGRPC {
		require.ErrorIs(t, err, a2a.ErrInternalError)
	} else {
		require.ErrorIs(t, err, a2a.ErrUnsupportedOperation)
	}
	require.ErrorContains(t, err, msg)
}

// jsUnsupportedBeforeStream is jsUnsupported for a streaming call refused before its stream:
// over A2A 1.0 JSON-RPC capgate answers a plain JSON-RPC error with the error's HTTP status
// (400), which a2a-go v2.3.1's JSON-RPC stream reader reports by its status only
// (docs/interop.md, "Stream errors have one form per caller binding").
func (e *jsHandlerEnv) jsUnsupportedBeforeStream(t *testing.T, err error, msg string) {
	t.Helper()
	if e.binding == a2a.TransportProtocolJSONRPC {
		require.ErrorContains(t, err, "unexpected HTTP status: 400 Bad Request")
		return
	}
	e.jsUnsupported(t, err, msg)
}

// jsHandlerSteps are docs/interop.md's "@a2a-js/sdk as an upstream handler"
// table, in order: later steps use the tasks earlier ones created.
var jsHandlerSteps = []struct {
	name string
	run  func(t *testing.T, e *jsHandlerEnv)
}{
	{"send", func(t *testing.T, e *jsHandlerEnv) {
		res, err := e.c.SendMessage(t.Context(), jsMessage("hello"))
		require.NoError(t, err)
		task, ok := res.(*a2a.Task)
		require.True(t, ok, "%T", res)
		require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
		require.Len(t, task.Artifacts, 1)
		require.Contains(t, artifactText(t, task.Artifacts[0]), "@a2a-js/sdk handled: Reconcile invoice INV-1 against PO-2 hello")
		e.tasks["completed"] = task
		e.expectCalls(t, "SendMessage")
	}},
	{"send, a message answer", func(t *testing.T, e *jsHandlerEnv) {
		res, err := e.c.SendMessage(t.Context(), jsMessage("mode:message"))
		require.NoError(t, err)
		msg, ok := res.(*a2a.Message)
		require.True(t, ok, "%T", res)
		require.Equal(t, a2a.MessageRoleAgent, msg.Role)
		require.Contains(t, msg.Parts[0].Text(), "@a2a-js/sdk says")
		e.expectCalls(t, "SendMessage")
	}},
	{"continue a task awaiting input", func(t *testing.T, e *jsHandlerEnv) {
		res, err := e.c.SendMessage(t.Context(), jsMessage("mode:input"))
		require.NoError(t, err)
		open, ok := res.(*a2a.Task)
		require.True(t, ok, "%T", res)
		require.Equal(t, a2a.TaskStateInputRequired, open.Status.State)
		next := jsMessage("PO-2 it is")
		next.Message.TaskID, next.Message.ContextID = open.ID, open.ContextID
		res, err = e.c.SendMessage(t.Context(), next)
		require.NoError(t, err)
		done, ok := res.(*a2a.Task)
		require.True(t, ok, "%T", res)
		require.Equal(t, open.ID, done.ID, "the follow-up reached the same task at the handler")
		require.Equal(t, a2a.TaskStateCompleted, done.Status.State)
		var turns []string
		for _, m := range done.History {
			turns = append(turns, string(m.ID))
		}
		require.Equal(t, []string{string(open.History[0].ID), string(next.Message.ID)}, turns, "the SDK kept both turns")
		e.expectCalls(t, "SendMessage", "SendMessage")
		e.tasks["continued"] = done
	}},
	{"stream", func(t *testing.T, e *jsHandlerEnv) {
		events, err := drain(e.c.SendStreamingMessage(t.Context(), jsMessage("streamed")))
		require.NoError(t, err)
		require.Equal(t, []string{"task TASK_STATE_WORKING", "artifact", "status TASK_STATE_COMPLETED"}, eventKinds(events))
		e.tasks["streamed"] = events[0].(*a2a.Task)
		e.expectCalls(t, "SendStreamingMessage")
	}},
	{"get", func(t *testing.T, e *jsHandlerEnv) {
		task, err := e.c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: e.tasks["streamed"].ID})
		require.NoError(t, err)
		require.Equal(t, e.tasks["streamed"].ID, task.ID)
		require.Equal(t, a2a.TaskStateCompleted, task.Status.State, "the SDK's task store kept the stream's updates")
		require.Len(t, task.Artifacts, 1)
		e.expectCalls(t, "GetTask")
	}},
	{"get, historyLength", func(t *testing.T, e *jsHandlerEnv) {
		// historyLength reaches the SDK on each handler binding (the
		// HTTP+JSON query, the gRPC field): it keeps the last turns.
		continued := e.tasks["continued"]
		for _, n := range []int{1, 0} {
			task, err := e.c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: continued.ID, HistoryLength: &n})
			require.NoError(t, err)
			require.Len(t, task.History, n, "historyLength %d", n)
			if n == 1 {
				require.Equal(t, continued.History[1].ID, task.History[0].ID, "the last turn")
			}
		}
		e.expectCalls(t, "GetTask", "GetTask")
	}},
	{"list, pageSize 1", func(t *testing.T, e *jsHandlerEnv) {
		// capgate answers ListTasks itself, reading each of the caller's
		// tasks from its handler with GetTask (docs/handlers.md).
		var ids []string
		token := ""
		for page := 0; ; page++ {
			require.Less(t, page, 4, "the three tasks take three pages")
			res, err := e.c.ListTasks(t.Context(), &a2a.ListTasksRequest{PageSize: 1, PageToken: token})
			require.NoError(t, err)
			require.Len(t, res.Tasks, 1)
			require.Equal(t, 3, res.TotalSize)
			ids = append(ids, string(res.Tasks[0].ID))
			e.expectCalls(t, "GetTask")
			if token = res.NextPageToken; token == "" {
				break
			}
		}
		require.Equal(t, []string{string(e.tasks["streamed"].ID), string(e.tasks["continued"].ID), string(e.tasks["completed"].ID)}, ids, "newest first")
	}},
	{"subscribe and cancel", func(t *testing.T, e *jsHandlerEnv) {
		res, err := e.c.SendMessage(t.Context(), jsMessage("mode:input"))
		require.NoError(t, err)
		open, ok := res.(*a2a.Task)
		require.True(t, ok, "%T", res)
		require.Equal(t, a2a.TaskStateInputRequired, open.Status.State)
		e.expectCalls(t, "SendMessage")

		var events []a2a.Event
		for ev, err := range e.c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: open.ID}) {
			require.NoError(t, err)
			events = append(events, ev)
			if len(events) == 1 {
				// The subscription is open at the handler: cancel the task
				// through capgate; the subscriber sees it end.
				e.expectCalls(t, "SubscribeToTask")
				canceled, err := e.c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: open.ID})
				require.NoError(t, err)
				require.Equal(t, a2a.TaskStateCanceled, canceled.Status.State)
				e.expectCalls(t, "CancelTask")
			}
		}
		require.Equal(t, []string{"task TASK_STATE_INPUT_REQUIRED", "status TASK_STATE_CANCELED"}, eventKinds(events))
		e.tasks["canceled"] = open
	}},
	{"list, status and contextId filters", func(t *testing.T, e *jsHandlerEnv) {
		// status is the state the handler answers now: capgate asks it
		// about each of the caller's four tasks.
		res, err := e.c.ListTasks(t.Context(), &a2a.ListTasksRequest{Status: a2a.TaskStateCanceled})
		require.NoError(t, err)
		require.Len(t, res.Tasks, 1)
		require.Equal(t, e.tasks["canceled"].ID, res.Tasks[0].ID)
		e.expectCalls(t, "GetTask", "GetTask", "GetTask", "GetTask")

		res, err = e.c.ListTasks(t.Context(), &a2a.ListTasksRequest{ContextID: e.tasks["completed"].ContextID})
		require.NoError(t, err)
		require.Len(t, res.Tasks, 1)
		require.Equal(t, e.tasks["completed"].ID, res.Tasks[0].ID)
		e.expectCalls(t, "GetTask") // the store answers contextId: one task to read
	}},
	{"cancel a completed task", func(t *testing.T, e *jsHandlerEnv) {
		_, err := e.c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: e.tasks["completed"].ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotCancelable)
		e.expectCalls(t, "CancelTask")
	}},
	{"subscribe to a completed task", func(t *testing.T, e *jsHandlerEnv) {
		// The SDK answers as the spec asks (UnsupportedOperationError), before
		// the stream starts; capgate relays the code with its own message.
		events, err := drain(e.c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: e.tasks["completed"].ID}))
		require.Empty(t, events)
		e.jsUnsupportedBeforeStream(t, err, "the skill's handler does not support this operation (decision ")
		e.expectCalls(t, "SubscribeToTask")
	}},
	{"push config", func(t *testing.T, e *jsHandlerEnv) {
		ctx := t.Context()
		id := e.tasks["completed"].ID
		cfg, err := e.c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: id, ID: "c-1", URL: "https://hooks.example.com/a2a"})
		require.NoError(t, err)
		require.Equal(t, id, cfg.TaskID)
		one, err := e.c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: id, ID: "c-1"})
		require.NoError(t, err)
		require.Equal(t, "https://hooks.example.com/a2a", one.URL)
		list, err := e.c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: id})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.NoError(t, e.c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: id, ID: "c-1"}))
		e.expectCalls(t, "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
			"ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig")

		// A webhook outside push.allowed_urls never reaches the handler.
		_, err = e.c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: id, ID: "c-2", URL: "https://evil.example.net/a2a"})
		require.ErrorIs(t, err, a2a.ErrInvalidParams)
		e.expectCalls(t)
	}},
	{"send with a push config", func(t *testing.T, e *jsHandlerEnv) {
		ctx := t.Context()
		req := jsMessage("hello")
		req.Config = &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{ID: "inline", URL: "https://hooks.example.com/inline"}}
		res, err := e.c.SendMessage(ctx, req)
		require.NoError(t, err)
		task, ok := res.(*a2a.Task)
		require.True(t, ok, "%T", res)
		list, err := e.c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
		require.NoError(t, err)
		require.Len(t, list, 1, "the SDK stored the config the message carried")
		require.Equal(t, "https://hooks.example.com/inline", list[0].URL)
		e.expectCalls(t, "SendMessage", "ListTaskPushNotificationConfigs")

		req.Config.PushConfig.URL = "https://evil.example.net/inline"
		_, err = e.c.SendMessage(ctx, req)
		require.ErrorIs(t, err, a2a.ErrInvalidParams)
		e.expectCalls(t)
	}},
	{"send activating an extension", func(t *testing.T, e *jsHandlerEnv) {
		// The caller's A2A-Extensions (an extension the agent declares)
		// reach the handler: a header, or gRPC metadata.
		ctx := a2aclient.AttachServiceParams(t.Context(), a2aclient.ServiceParams{"a2a-extensions": {jsExtension}})
		_, err := e.c.SendMessage(ctx, jsMessage("hello"))
		require.NoError(t, err)
		calls := e.expectCalls(t, "SendMessage")
		require.Equal(t, jsExtension, calls[0].Extensions)
	}},
	{"output outside acceptedOutputModes", func(t *testing.T, e *jsHandlerEnv) {
		// The manifest says application/json; the SDK's artifact is
		// text/plain, which this caller does not accept: capgate refuses
		// the answer (docs/handlers.md, output modes).
		req := jsMessage("hello")
		req.Config = &a2a.SendMessageConfig{AcceptedOutputModes: []string{"application/json"}}
		_, err := e.c.SendMessage(t.Context(), req)
		require.ErrorIs(t, err, a2a.ErrUnsupportedContentType)
		require.ErrorContains(t, err, "text/plain")
		e.expectCalls(t, "SendMessage")
	}},
	{"extended card", func(t *testing.T, e *jsHandlerEnv) {
		card, err := e.c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
		require.NoError(t, err)
		var skills []string
		for _, s := range card.Skills {
			skills = append(skills, s.ID)
		}
		require.Contains(t, skills, jsCapability)
		e.expectCalls(t) // capgate composes the card from manifests: no handler is asked
	}},
	{"executor exception", func(t *testing.T, e *jsHandlerEnv) {
		// Not an A2A error: the SDK fails the task with the exception's
		// message, on both paths.
		res, err := e.c.SendMessage(t.Context(), jsMessage("mode:throw"))
		require.NoError(t, err)
		task, ok := res.(*a2a.Task)
		require.True(t, ok, "%T", res)
		require.Equal(t, a2a.TaskStateFailed, task.Status.State)
		require.NotNil(t, task.Status.Message)
		require.Contains(t, task.Status.Message.Parts[0].Text(), "the executor gave up")
		events, err := drain(e.c.SendStreamingMessage(t.Context(), jsMessage("mode:throw")))
		require.NoError(t, err)
		require.Equal(t, []string{"task TASK_STATE_FAILED", "status TASK_STATE_FAILED"}, eventKinds(events))
		e.expectCalls(t, "SendMessage", "SendStreamingMessage")
	}},
	{"error before a result", func(t *testing.T, e *jsHandlerEnv) {
		// The SDK's unary path does not check the events' order as its
		// stream does: it finds no task and answers an internal error.
		_, err := e.c.SendMessage(t.Context(), jsMessage("mode:fail-first"))
		require.ErrorIs(t, err, a2a.ErrInternalError)
		require.ErrorContains(t, err, "the skill's handler failed (decision ")
		require.NotContains(t, err.Error(), "Agent execution", "the handler's text is logged, not shown")
		e.expectCalls(t, "SendMessage")
	}},
	{"error before a stream", func(t *testing.T, e *jsHandlerEnv) {
		events, err := drain(e.c.SendStreamingMessage(t.Context(), jsMessage("mode:fail-first")))
		require.Empty(t, events)
		e.jsUnsupportedBeforeStream(t, err, "the skill's handler does not support this operation (decision ")
		e.expectCalls(t, "SendStreamingMessage")
	}},
	{"error in the middle of a stream", func(t *testing.T, e *jsHandlerEnv) {
		events, err := drain(e.c.SendStreamingMessage(t.Context(), jsMessage("mode:fail-mid")))
		require.Equal(t, []string{"task TASK_STATE_WORKING", "artifact"}, eventKinds(events), "the events before the error")
		e.jsUnsupported(t, err, "the skill's handler does not support this operation (decision ")
		e.expectCalls(t, "SendStreamingMessage")
	}},
}

// jsBehind makes url, called over binding (config.Binding*), the handler of
// every capability of d and returns the handler names. A JSON-RPC handler is
// configured in the plain string form, the others in the object form.
func jsBehind(d *deployment.Deployment, url, binding string) []string {
	names := make([]string, 0, len(d.Config.Handlers))
	d.Config.HandlerBindings = map[string]string{}
	for name := range d.Config.Handlers {
		d.Config.Handlers[name] = url
		if binding != config.BindingJSONRPC {
			d.Config.HandlerBindings[name] = binding
		}
		names = append(names, name)
	}
	return names
}

// handlerBindings are the bindings capgate calls the JS handler over.
var handlerBindings = []string{config.BindingJSONRPC, config.BindingHTTPJSON, config.BindingGRPC}

// callerBindings are the bindings the a2a-go client calls capgate over.
var callerBindings = []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC}

// TestJSHandler puts @a2a-js/sdk's server behind capgate as the handler of
// every capability, called over each handler binding (the SDK's JSON-RPC,
// HTTP+JSON and gRPC transports; one handler process and one capgate per
// handler binding), and drives capgate with the a2a-go v2 client over each
// caller binding: 3 × 3, the steps of docs/interop.md's table in each. Last,
// per handler binding, the handler refuses capgate's token.
func TestJSHandler(t *testing.T) {
	node := requireNode(t)
	for _, hb := range handlerBindings {
		t.Run("handler "+hb, func(t *testing.T) {
			h := startJSHandler(t, node)
			d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
			d.Config.Push = config.Push{Enabled: true, AllowedURLs: []string{"https://hooks.example.com/"}}
			names := jsBehind(d, h.URL(hb), hb)
			srv := testutil.Start(t, d)
			h.Verify(t, srv.Admin("/.well-known/jwks.json"), d.Config.Identity.Issuer, names...)
			verify, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{
				Issuer: d.Config.Identity.Issuer, Audience: jsAudience, JWKSURL: srv.Admin("/.well-known/jwks.json"),
			})
			require.NoError(t, err)

			for _, b := range callerBindings {
				// One caller per binding, so each lists only its own tasks.
				subject := "js-handler-" + strings.ToLower(strings.ReplaceAll(string(b), "+", "-"))
				tok := testutil.Token(t, testutil.TokenOptions{Subject: subject, Tenant: "acme", Scopes: []string{"invoices.read", "recon.run"}})
				e := &jsHandlerEnv{h: h, c: srv.Client(t, b, testutil.Bearer(tok)), verify: verify, binding: b, handler: hb,
					subject: subject, version: "1.0", tasks: map[string]*a2a.Task{}}
				for _, s := range jsHandlerSteps {
					if !t.Run("caller "+string(b)+"/"+s.name, func(t *testing.T) { s.run(t, e) }) {
						h.Next(t) // a failed step's calls do not count against the next
					}
				}
			}

			t.Run("error statuses", func(t *testing.T) { jsErrorStatuses(t, srv, h, hb) })
			if hb != config.BindingJSONRPC {
				t.Run("a 0.3 caller", func(t *testing.T) {
					// HTTP+JSON and gRPC handlers are called in A2A 1.0
					// only (docs/handlers.md): nothing reaches the SDK.
					tok := "Bearer " + testutil.Token(t, testutil.TokenOptions{Subject: "js-v03", Tenant: "acme", Scopes: []string{"recon.run"}})
					r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user",`+
						`"parts":[{"kind":"text","text":"Reconcile invoice INV-1 against PO-2"}],"metadata":{"skillId":"`+jsCapability+`"}}}}`, "Authorization", tok)
					require.Equal(t, 200, r.Status, "%s", r.Body)
					var rpc struct {
						Error struct {
							Code    int    `json:"code"`
							Message string `json:"message"`
						} `json:"error"`
					}
					require.NoError(t, json.Unmarshal(r.Body, &rpc), "%s", r.Body)
					require.Equal(t, -32009, rpc.Error.Code, "VersionNotSupported: %s", r.Body)
					require.Empty(t, h.Next(t))
				})
			}

			t.Run("the handler refuses the token", func(t *testing.T) {
				// A handler that verifies as another handler refuses the
				// token in its binding's shape (-31401, HTTP+JSON or gRPC
				// UNAUTHENTICATED); capgate tells the caller its own
				// credential was not at fault.
				h.Verify(t, srv.Admin("/.well-known/jwks.json"), d.Config.Identity.Issuer, "invoices.lookup")
				tok := testutil.Token(t, testutil.TokenOptions{Subject: "js-refused", Tenant: "acme", Scopes: []string{"recon.run"}})
				for _, b := range callerBindings {
					_, err := srv.Client(t, b, testutil.Bearer(tok)).SendMessage(t.Context(), jsMessage("hello"))
					require.ErrorIs(t, err, a2a.ErrInternalError, "caller %s", b)
					require.ErrorContains(t, err, "the skill's handler refused capgate's credential", "caller %s", b)
					calls := h.Next(t)
					require.Len(t, calls, 1)
					require.Equal(t, hb, calls[0].Binding)
					require.Equal(t, "SendMessage", calls[0].A2AMethod())
					require.NotNil(t, calls[0].Jose)
					require.False(t, calls[0].Jose.OK)
					require.Equal(t, "ERR_JWT_CLAIM_VALIDATION_FAILED", calls[0].Jose.Error, "jose: the audience")
				}
			})
		})
	}
}

// jsErrorStatuses: the SDK's servers give some A2A errors another HTTP status
// or gRPC code than the A2A 1.0 error mapping (docs/interop.md, "Where the
// SDKs and the spec disagree"). capgate types a handler's error by its
// ErrorInfo reason, not by the status, so its callers get the spec's: shown
// here by calling the SDK directly, with the token capgate sent it, and
// capgate with the same operation.
func jsErrorStatuses(t *testing.T, srv *testutil.Server, h *jsHandler, hb string) {
	ctx := t.Context()
	tok := testutil.Token(t, testutil.TokenOptions{Subject: "js-statuses", Tenant: "acme", Scopes: []string{"recon.run"}})
	res, err := srv.Client(t, a2a.TransportProtocolJSONRPC, testutil.Bearer(tok)).SendMessage(ctx, jsMessage("hello"))
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "%T", res)
	calls := h.Next(t)
	require.Len(t, calls, 1)
	handlerToken := calls[0].Authorization // capgate's token for this caller: the SDK's user owns the task

	// capgate's HTTP+JSON door: TaskNotCancelable is 409, the spec's.
	r := srv.Do(t, http.MethodPost, "/tasks/"+string(task.ID)+":cancel", "{}", "A2A-Version", "1.0", "Content-Type", "application/json", "Authorization", "Bearer "+tok)
	require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
	require.Equal(t, "TASK_NOT_CANCELABLE", restReason(t, r.Body).reason)
	// capgate's gRPC door: UnsupportedOperation is UNIMPLEMENTED, the spec's.
	code, reason := grpcSubscribe(t, strings.TrimPrefix(srv.URL, "http://"), "Bearer "+tok, task.ID)
	require.Equal(t, codes.Unimplemented, code)
	require.Equal(t, "UNSUPPORTED_OPERATION", reason)
	h.Next(t)

	switch hb {
	case config.BindingHTTPJSON:
		// The SDK's REST server: TaskNotCancelable is 400 FAILED_PRECONDITION
		// (spec: 409).
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.REST+"/tasks/"+string(task.ID)+":cancel", strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set("Authorization", handlerToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
		got := restReason(t, body)
		require.Equal(t, "FAILED_PRECONDITION", got.status)
		require.Equal(t, "TASK_NOT_CANCELABLE", got.reason)
	case config.BindingGRPC:
		// The SDK's gRPC server: UnsupportedOperation is FAILED_PRECONDITION
		// (spec: UNIMPLEMENTED), as a2a-go's.
		code, reason := grpcSubscribe(t, strings.TrimPrefix(h.GRPC, "http://"), handlerToken, task.ID)
		require.Equal(t, codes.FailedPrecondition, code)
		require.Equal(t, "UNSUPPORTED_OPERATION", reason)
	}
	h.Next(t)
}

// restReason reads a google.rpc.Status error body's status and A2A reason.
func restReason(t *testing.T, body []byte) (out struct{ status, reason string }) {
	t.Helper()
	var s struct {
		Error struct {
			Status  string `json:"status"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &s), "%s", body)
	require.Len(t, s.Error.Details, 1, "%s", body)
	return struct{ status, reason string }{s.Error.Status, s.Error.Details[0].Reason}
}

// grpcSubscribe calls SubscribeToTask on the A2A gRPC service at target
// (host:port, cleartext) with authorization and returns the status code and
// ErrorInfo reason it fails with.
func grpcSubscribe(t *testing.T, target, authorization string, id a2a.TaskID) (codes.Code, string) {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", authorization, "a2a-version", "1.0")
	stream, err := a2apb.NewA2AServiceClient(conn).SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{Id: string(id)})
	require.NoError(t, err)
	_, err = stream.Recv()
	require.Error(t, err)
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.Reason
		}
	}
	return st.Code(), ""
}

// TestJSHandlerToken: the token a JS handler receives is for that handler
// only. A verifier configured as another handler (audience invoices.lookup)
// refuses it, and so does one trusting another issuer. (The JS handler
// verifying as another handler and refusing the call, over each handler
// binding: TestJSHandler's "the handler refuses the token".)
func TestJSHandlerToken(t *testing.T) {
	node := requireNode(t)
	h := startJSHandler(t, node)
	d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
	jsBehind(d, h.JSONRPC, config.BindingJSONRPC)
	srv := testutil.Start(t, d)
	tok := testutil.Token(t, testutil.TokenOptions{Subject: "js-token", Tenant: "acme", Scopes: []string{"invoices.read", "recon.run"}})
	_, err := srv.Client(t, a2a.TransportProtocolJSONRPC, testutil.Bearer(tok)).SendMessage(t.Context(), jsMessage("hello"))
	require.NoError(t, err)
	calls := h.Next(t)
	require.Len(t, calls, 1)

	for _, tc := range []struct {
		name             string
		issuer, audience string
		ok               bool
	}{
		{"this handler", d.Config.Identity.Issuer, jsAudience, true},
		{"another handler", d.Config.Identity.Issuer, "invoices.lookup", false},
		{"another issuer", "https://other.example.com", jsAudience, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{
				Issuer: tc.issuer, Audience: tc.audience, JWKSURL: srv.Admin("/.well-known/jwks.json"),
			})
			require.NoError(t, err)
			_, err = v.Verify(t.Context(), calls[0].Authorization)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, handlerauth.ErrInvalidToken)
		})
	}
}

// TestJSHandlerRESTEndpoint: a handler's binding is configured, not
// discovered (docs/handlers.md). The SDK's HTTP+JSON endpoint configured as a
// JSON-RPC handler (the plain string form) gets capgate's JSON-RPC POST, which
// is no HTTP+JSON call; the SDK's answer is no JSON-RPC response, and the
// caller gets InvalidAgentResponse.
func TestJSHandlerRESTEndpoint(t *testing.T) {
	node := requireNode(t)
	h := startJSHandler(t, node)
	d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
	jsBehind(d, h.REST, config.BindingJSONRPC)
	srv := testutil.Start(t, d)
	tok := testutil.Token(t, testutil.TokenOptions{Subject: "js-rest", Tenant: "acme", Scopes: []string{"recon.run"}})
	_, err := srv.Client(t, a2a.TransportProtocolJSONRPC, testutil.Bearer(tok)).SendMessage(t.Context(), jsMessage("hello"))
	require.ErrorIs(t, err, a2a.ErrInvalidAgentResponse)
	calls := h.Next(t)
	require.Len(t, calls, 1)
	require.Equal(t, "HTTP+JSON", calls[0].Binding)
	require.Equal(t, "POST /", calls[0].Method)
}

// TestJSHandlerV03: a 0.3 caller's calls reach the handler in 0.3 (method
// names, params, A2A-Version: 0.3): the SDK's 0.3 compatibility layer
// (legacyCompat) answers them, and capgate relays its 0.3 answers, and its
// stream errors in each 0.3 caller binding's form.
func TestJSHandlerV03(t *testing.T) {
	node := requireNode(t)
	h := startJSHandler(t, node)
	d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
	names := jsBehind(d, h.JSONRPC, config.BindingJSONRPC)
	srv := testutil.Start(t, d)
	h.Verify(t, srv.Admin("/.well-known/jwks.json"), d.Config.Identity.Issuer, names...)
	verify, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{
		Issuer: d.Config.Identity.Issuer, Audience: jsAudience, JWKSURL: srv.Admin("/.well-known/jwks.json"),
	})
	require.NoError(t, err)
	e := &jsHandlerEnv{h: h, verify: verify, handler: config.BindingJSONRPC, subject: "js-handler-v03", version: "0.3"}
	auth := "Bearer " + testutil.Token(t, testutil.TokenOptions{Subject: e.subject, Tenant: "acme", Scopes: []string{"invoices.read", "recon.run"}})
	send := func(method, text string) string {
		return `{"jsonrpc":"2.0","id":"v03","method":"` + method + `","params":{"message":{"kind":"message","messageId":"m-` + text +
			`","role":"user","parts":[{"kind":"text","text":"Reconcile invoice INV-1 against PO-2 ` + text + `"}],"metadata":{"skillId":"` + jsCapability + `"}}}}`
	}
	type v03Task struct {
		Kind   string `json:"kind"`
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
		Artifacts []struct {
			Parts []struct{ Kind, Text string } `json:"parts"`
		} `json:"artifacts"`
	}
	var rpc struct {
		Result v03Task `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	call := func(t *testing.T, body string) {
		t.Helper()
		rpc.Result, rpc.Error = v03Task{}, nil
		r := srv.JSONRPC(t, body, "Authorization", auth) // no A2A-Version: 0.3
		require.Equal(t, 200, r.Status, "%s", r.Body)
		require.NoError(t, json.Unmarshal(r.Body, &rpc), "%s", r.Body)
	}

	var taskID string
	t.Run("message/send", func(t *testing.T) {
		call(t, send("message/send", "hello"))
		require.Nil(t, rpc.Error)
		require.Equal(t, "task", rpc.Result.Kind)
		require.Equal(t, "completed", rpc.Result.Status.State)
		require.Len(t, rpc.Result.Artifacts, 1)
		require.Equal(t, "text", rpc.Result.Artifacts[0].Parts[0].Kind)
		require.Contains(t, rpc.Result.Artifacts[0].Parts[0].Text, "@a2a-js/sdk handled")
		taskID = rpc.Result.ID
		e.expectCalls(t, "message/send")
	})
	t.Run("tasks/get", func(t *testing.T) {
		call(t, `{"jsonrpc":"2.0","id":"v03","method":"tasks/get","params":{"id":"`+taskID+`"}}`)
		require.Nil(t, rpc.Error)
		require.Equal(t, taskID, rpc.Result.ID)
		require.Equal(t, "completed", rpc.Result.Status.State)
		e.expectCalls(t, "tasks/get")
	})
	t.Run("tasks/cancel a completed task", func(t *testing.T) {
		call(t, `{"jsonrpc":"2.0","id":"v03","method":"tasks/cancel","params":{"id":"`+taskID+`"}}`)
		require.NotNil(t, rpc.Error)
		require.Equal(t, -32002, rpc.Error.Code, "TaskNotCancelableError")
		e.expectCalls(t, "tasks/cancel")
	})
	t.Run("message/stream", func(t *testing.T) {
		r := srv.JSONRPC(t, send("message/stream", "streamed"), "Authorization", auth, "Accept", "text/event-stream")
		require.Equal(t, 200, r.Status, "%s", r.Body)
		var kinds []string
		for _, l := range strings.Split(string(r.Body), "\n") {
			data, ok := strings.CutPrefix(l, "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Result struct {
					Kind   string `json:"kind"`
					Final  bool   `json:"final"`
					Status struct {
						State string `json:"state"`
					} `json:"status"`
				} `json:"result"`
			}
			require.NoError(t, json.Unmarshal([]byte(data), &ev), "%s", data)
			kinds = append(kinds, strings.TrimSpace(ev.Result.Kind+" "+ev.Result.Status.State))
		}
		require.Equal(t, []string{"task working", "artifact-update", "status-update completed"}, kinds)
		e.expectCalls(t, "message/stream")
	})
	// The SDK's stream errors (its ordering checks) reach every 0.3 caller binding in one form
	// (test/gateway's TestStreamErrorsOneFormPerCallerBinding03): before the first event, 0.3
	// JSON-RPC one SSE event with the JSON-RPC error, 0.3 HTTP+JSON (/v1/ and un-prefixed) the
	// HTTP status and google.rpc.Status; after the SDK's two events, the error as the last event.
	t.Run("stream errors, every 0.3 caller binding", func(t *testing.T) {
		// Each send is a new message (its own messageId): a repeated id is a retry, answered
		// from the first call's record without a handler call.
		text := func(mode string) string { return "Reconcile invoice INV-1 against PO-2 " + mode }
		for mode, events := range map[string]int{"mode:fail-first": 0, "mode:fail-mid": 2} {
			for _, caller := range []string{"JSON-RPC", "/v1/message:stream", "/message:stream"} {
				var r *testutil.Response
				switch caller {
				case "JSON-RPC":
					r = srv.JSONRPC(t, send("message/stream", mode), "Authorization", auth)
				case "/v1/message:stream":
					r = srv.Do(t, http.MethodPost, caller, `{"message":{"messageId":"m-`+mode+caller+`","role":"ROLE_USER","content":[{"text":"`+text(mode)+
						`"}],"metadata":{"skillId":"`+jsCapability+`"}}}`, "Content-Type", "application/json", "Authorization", auth)
				default:
					r = srv.Do(t, http.MethodPost, caller, `{"message":{"kind":"message","messageId":"m-`+mode+caller+`","role":"user","parts":[{"kind":"text","text":"`+
						text(mode)+`"}],"metadata":{"skillId":"`+jsCapability+`"}}}`, "Content-Type", "application/json", "Authorization", auth)
				}
				e.expectCalls(t, "message/stream")
				body, frames := string(r.Body), []string{}
				if r.Header.Get("Content-Type") == "text/event-stream" {
					require.Equal(t, http.StatusOK, r.Status)
					frames = strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
					body = frames[len(frames)-1]
					frames = frames[:len(frames)-1]
				}
				require.Len(t, frames, events, "%s %s: the events before the error: %s", mode, caller, r.Body)
				if caller == "JSON-RPC" {
					require.Equal(t, "text/event-stream", r.Header.Get("Content-Type"), "%s", r.Body)
					require.True(t, strings.HasPrefix(body, `data: {"jsonrpc":"2.0","id":"v03","error":{"code":-32004,`), "%s", body)
				} else if events == 0 {
					require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
					require.Equal(t, "application/json", r.Header.Get("Content-Type"))
				} else {
					require.True(t, strings.HasPrefix(body, `event: error`+"\n"+`data: {"error":{"code":400,"status":"UNIMPLEMENTED",`), "%s", body)
				}
				require.Contains(t, body, `"message":"the skill's handler does not support this operation (decision `)
				require.Contains(t, body, `"reason":"UNSUPPORTED_OPERATION"`)
			}
		}
	})
}

// TestJSHandlerTenant: the SDK keeps tasks apart by the request's tenant
// (A2A 1.0's tenant field, the HTTP+JSON /{tenant} prefix). A task created
// naming the caller's tenant is found by the operations naming it, capgate's
// ListTasks included (its GetTask calls carry the list's tenant), and not by
// those naming none: capgate forwards the tenant the caller names, over each
// handler binding (an HTTP+JSON handler gets it as the path's prefix).
func TestJSHandlerTenant(t *testing.T) {
	node := requireNode(t)
	for _, hb := range handlerBindings {
		t.Run("handler "+hb, func(t *testing.T) {
			h := startJSHandler(t, node)
			d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
			names := jsBehind(d, h.URL(hb), hb)
			srv := testutil.Start(t, d)
			h.Verify(t, srv.Admin("/.well-known/jwks.json"), d.Config.Identity.Issuer, names...)
			for _, b := range callerBindings {
				t.Run("caller "+string(b), func(t *testing.T) {
					ctx := t.Context()
					subject := "js-tenant-" + strings.ToLower(strings.ReplaceAll(string(b), "+", "-"))
					c := srv.Client(t, b, testutil.Bearer(testutil.Token(t, testutil.TokenOptions{Subject: subject, Tenant: "acme", Scopes: []string{"recon.run"}})))
					req := jsMessage("hello")
					req.Tenant = "acme"
					res, err := c.SendMessage(ctx, req)
					require.NoError(t, err)
					task, ok := res.(*a2a.Task)
					require.True(t, ok, "%T", res)
					calls := h.Next(t)
					require.Len(t, calls, 1)
					require.Equal(t, hb, calls[0].Binding)
					if hb == config.BindingHTTPJSON {
						require.Equal(t, "POST /acme/message:send", calls[0].Method)
					}

					got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID, Tenant: "acme"})
					require.NoError(t, err)
					require.Equal(t, task.ID, got.ID)
					_, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
					require.ErrorIs(t, err, a2a.ErrTaskNotFound, "the SDK's store has no such task outside the tenant")

					list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{Tenant: "acme"})
					require.NoError(t, err)
					require.Equal(t, []a2a.TaskID{task.ID}, taskIDs(list))
					list, err = c.ListTasks(ctx, &a2a.ListTasksRequest{})
					require.NoError(t, err)
					require.Empty(t, list.Tasks, "the handler does not find it without the tenant: left out (and logged)")
					require.Equal(t, 1, list.TotalSize, "capgate's store counts it")
					h.Next(t)
				})
			}
		})
	}
}

func taskIDs(l *a2a.ListTasksResponse) []a2a.TaskID {
	out := []a2a.TaskID{}
	for _, task := range l.Tasks {
		out = append(out, task.ID)
	}
	return out
}
