package protocol

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
)

// sentinel is the a2a-go error each code must decode to.
var codeSentinels = []struct {
	code     Code
	sentinel error
	rpc      int
	status   int
	name     string
}{
	{ParseError, a2a.ErrParseError, -32700, 400, "INVALID_ARGUMENT"},
	{InvalidRequest, a2a.ErrInvalidRequest, -32600, 400, "INVALID_ARGUMENT"},
	{MethodNotFound, a2a.ErrMethodNotFound, -32601, 501, "UNIMPLEMENTED"},
	{InvalidParams, a2a.ErrInvalidParams, -32602, 400, "INVALID_ARGUMENT"},
	{Internal, a2a.ErrInternalError, -32603, 500, "INTERNAL"},
	{TaskNotFound, a2a.ErrTaskNotFound, -32001, 404, "NOT_FOUND"},
	{TaskNotCancelable, a2a.ErrTaskNotCancelable, -32002, 409, "FAILED_PRECONDITION"},
	{PushNotificationNotSupported, a2a.ErrPushNotificationNotSupported, -32003, 400, "UNIMPLEMENTED"},
	{UnsupportedOperation, a2a.ErrUnsupportedOperation, -32004, 400, "UNIMPLEMENTED"},
	{ContentTypeNotSupported, a2a.ErrUnsupportedContentType, -32005, 415, "INVALID_ARGUMENT"},
	{InvalidAgentResponse, a2a.ErrInvalidAgentResponse, -32006, 502, "INTERNAL"},
	{ExtendedAgentCardNotConfigured, a2a.ErrExtendedCardNotConfigured, -32007, 400, "FAILED_PRECONDITION"},
	{ExtensionSupportRequired, a2a.ErrExtensionSupportRequired, -32008, 400, "FAILED_PRECONDITION"},
	{VersionNotSupported, a2a.ErrVersionNotSupported, -32009, 400, "UNIMPLEMENTED"},
	{Unauthenticated, a2a.ErrUnauthenticated, -31401, 401, "UNAUTHENTICATED"},
	{Unauthorized, a2a.ErrUnauthorized, -31403, 403, "PERMISSION_DENIED"},
	{NotFound, a2a.ErrMethodNotFound, -32601, 404, "NOT_FOUND"},
	{MethodNotAllowed, a2a.ErrMethodNotFound, -32601, 405, "UNIMPLEMENTED"},
	{PayloadTooLarge, a2a.ErrInvalidRequest, -32600, 413, "INVALID_ARGUMENT"},
	{Unavailable, a2a.ErrInternalError, -32603, 503, "UNAVAILABLE"},
}

func TestErrorsDecodeWithA2AGoClients(t *testing.T) {
	for _, tc := range codeSentinels {
		t.Run(string(tc.code), func(t *testing.T) {
			require.True(t, tc.code.Valid())
			perr := Errorf(tc.code, "refused: %s", "because").WithMetadata("taskId", "t1")
			require.Equal(t, tc.rpc, perr.JSONRPCCode())
			require.Equal(t, tc.status, perr.HTTPStatus())
			require.Equal(t, tc.name, perr.StatusName())
			require.Equal(t, a2a.ErrorReason(tc.sentinel), perr.Reason())

			check := func(t *testing.T, err error) {
				t.Helper()
				require.ErrorIs(t, err, tc.sentinel)
				var ae *a2a.Error
				require.ErrorAs(t, err, &ae)
				require.Equal(t, "refused: because", ae.Message)
				require.Equal(t, map[string]string{"taskId": "t1"}, ae.ErrorInfo().Value["metadata"])
			}

			t.Run("jsonrpc", func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					req, err := ParseJSONRPC(V1, r.Header.Get("Content-Type"), body, Limits{})
					require.Nil(t, err)
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write(perr.MarshalJSONRPC(req.ID))
				}))
				defer srv.Close()
				tr := a2aclient.NewJSONRPCTransport(srv.URL, srv.Client())
				_, err := tr.GetTask(t.Context(), nil, &a2a.GetTaskRequest{ID: "t1"})
				check(t, err)
			})
			t.Run("rest", func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(perr.HTTPStatus())
					_, _ = w.Write(perr.MarshalStatus())
				}))
				defer srv.Close()
				u, err := url.Parse(srv.URL)
				require.NoError(t, err)
				tr := a2aclient.NewRESTTransport(u, srv.Client())
				_, err = tr.GetTask(t.Context(), nil, &a2a.GetTaskRequest{ID: "t1"})
				check(t, err)
			})
		})
	}
}

// TestA2AGoRequestsParse sends every operation with a2a-go's own clients, over both bindings, to
// a server that parses with this package.
func TestA2AGoRequestsParse(t *testing.T) {
	type seen struct {
		req *Request
		err *Error
	}
	newServer := func(t *testing.T, binding Binding, got chan<- seen) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			v, verr := ParseVersion(r.Header.Get(VersionHeader))
			require.Nil(t, verr)
			var req *Request
			var err *Error
			if binding == JSONRPC {
				req, err = ParseJSONRPC(v, r.Header.Get("Content-Type"), body, Limits{})
			} else {
				req, err = ParseHTTP(v, r.Method, r.URL.RequestURI(), r.Header.Get("Content-Type"), body, Limits{})
			}
			got <- seen{req, err}
			reply := Errorf(TaskNotFound, "no such task")
			var out []byte
			if binding == JSONRPC {
				var id []byte
				if req != nil {
					id = req.ID
				}
				out = reply.MarshalJSONRPC(id)
			} else {
				out = reply.MarshalStatus()
			}
			if r.Header.Get("Accept") == "text/event-stream" {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("data: " + string(out) + "\n\n"))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			if binding == HTTPJSON {
				w.WriteHeader(reply.HTTPStatus())
			}
			_, _ = w.Write(out)
		}))
	}
	msg := &a2a.Message{ID: "m1", TaskID: "t1", ContextID: "c1", Role: a2a.MessageRoleUser, Metadata: map[string]any{"skillId": "s1"},
		Parts: a2a.ContentParts{a2a.NewTextPart("hello"), a2a.NewFileURLPart("https://x/a.pdf", "application/pdf"), a2a.NewDataPart(map[string]any{"k": 1})}}
	wantMsg := &MessageInfo{MessageID: "m1", TaskID: "t1", ContextID: "c1", SkillHint: "s1", AcceptedOutputModes: []string{"text/plain"},
		Parts: []PartInfo{{Kind: PartText, MediaType: "text/plain", Text: "hello"}, {Kind: PartURL, MediaType: "application/pdf"}, {Kind: PartData, MediaType: "application/json", Data: jsontext.Value(`{"k":1}`)}}}
	sendReq := &a2a.SendMessageRequest{Tenant: "acme", Message: msg, Config: &a2a.SendMessageConfig{AcceptedOutputModes: []string{"text/plain"}}}
	params := a2aclient.ServiceParams{VersionHeader: {"1.0"}}

	calls := []struct {
		name   string
		call   func(a2aclient.Transport) error
		op     Operation
		task   string
		config string
		msg    *MessageInfo
	}{
		{"SendMessage", func(tr a2aclient.Transport) error { _, err := tr.SendMessage(t.Context(), params, sendReq); return err }, SendMessage, "t1", "", wantMsg},
		{"SendStreamingMessage", func(tr a2aclient.Transport) error {
			for _, err := range tr.SendStreamingMessage(t.Context(), params, sendReq) {
				return err
			}
			return nil
		}, SendStreamingMessage, "t1", "", wantMsg},
		{"GetTask", func(tr a2aclient.Transport) error {
			_, err := tr.GetTask(t.Context(), params, &a2a.GetTaskRequest{Tenant: "acme", ID: "t1"})
			return err
		}, GetTask, "t1", "", nil},
		{"ListTasks", func(tr a2aclient.Transport) error {
			_, err := tr.ListTasks(t.Context(), params, &a2a.ListTasksRequest{Tenant: "acme", ContextID: "c1"})
			return err
		}, ListTasks, "", "", nil},
		{"CancelTask", func(tr a2aclient.Transport) error {
			_, err := tr.CancelTask(t.Context(), params, &a2a.CancelTaskRequest{Tenant: "acme", ID: "t1"})
			return err
		}, CancelTask, "t1", "", nil},
		{"SubscribeToTask", func(tr a2aclient.Transport) error {
			for _, err := range tr.SubscribeToTask(t.Context(), params, &a2a.SubscribeToTaskRequest{Tenant: "acme", ID: "t1"}) {
				return err
			}
			return nil
		}, SubscribeToTask, "t1", "", nil},
		{"CreateTaskPushConfig", func(tr a2aclient.Transport) error {
			_, err := tr.CreateTaskPushConfig(t.Context(), params, &a2a.PushConfig{Tenant: "acme", TaskID: "t1", ID: "c1", URL: "https://hook"})
			return err
		}, CreateTaskPushNotificationConfig, "t1", "c1", nil},
		{"GetTaskPushConfig", func(tr a2aclient.Transport) error {
			_, err := tr.GetTaskPushConfig(t.Context(), params, &a2a.GetTaskPushConfigRequest{Tenant: "acme", TaskID: "t1", ID: "c1"})
			return err
		}, GetTaskPushNotificationConfig, "t1", "c1", nil},
		{"ListTaskPushConfigs", func(tr a2aclient.Transport) error {
			_, err := tr.ListTaskPushConfigs(t.Context(), params, &a2a.ListTaskPushConfigRequest{Tenant: "acme", TaskID: "t1"})
			return err
		}, ListTaskPushNotificationConfigs, "t1", "", nil},
		{"DeleteTaskPushConfig", func(tr a2aclient.Transport) error {
			return tr.DeleteTaskPushConfig(t.Context(), params, &a2a.DeleteTaskPushConfigRequest{Tenant: "acme", TaskID: "t1", ID: "c1"})
		}, DeleteTaskPushNotificationConfig, "t1", "c1", nil},
		{"GetExtendedAgentCard", func(tr a2aclient.Transport) error {
			_, err := tr.GetExtendedAgentCard(t.Context(), params, &a2a.GetExtendedAgentCardRequest{Tenant: "acme"})
			return err
		}, GetExtendedAgentCard, "", "", nil},
	}
	for _, binding := range []Binding{JSONRPC, HTTPJSON} {
		for _, c := range calls {
			t.Run(string(binding)+"/"+c.name, func(t *testing.T) {
				got := make(chan seen, 1)
				srv := newServer(t, binding, got)
				defer srv.Close()
				var tr a2aclient.Transport
				if binding == JSONRPC {
					tr = a2aclient.NewJSONRPCTransport(srv.URL, srv.Client())
				} else {
					u, err := url.Parse(srv.URL)
					require.NoError(t, err)
					tr = a2aclient.NewRESTTransport(u, srv.Client())
				}
				err := c.call(tr)
				require.True(t, errors.Is(err, a2a.ErrTaskNotFound), "client error: %v", err)
				s := <-got
				require.Nil(t, s.err)
				require.Equal(t, binding, s.req.Binding)
				require.Equal(t, V1, s.req.Version)
				require.Equal(t, c.op, s.req.Operation)
				require.Equal(t, c.task, s.req.TaskID)
				require.Equal(t, c.config, s.req.ConfigID)
				require.Equal(t, "acme", s.req.Tenant)
				require.Equal(t, c.msg, s.req.Message)
			})
		}
	}
}
