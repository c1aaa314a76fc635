package jsonmodel_test

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

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

// sentinel is the a2a-go error each code must decode to.
var codeSentinels = []struct {
	code     protocol.Code
	sentinel error
	rpc      int
	status   int
	name     string
}{
	{protocol.ParseError, a2a.ErrParseError, -32700, 400, "INVALID_ARGUMENT"},
	{protocol.InvalidRequest, a2a.ErrInvalidRequest, -32600, 400, "INVALID_ARGUMENT"},
	{protocol.MethodNotFound, a2a.ErrMethodNotFound, -32601, 501, "UNIMPLEMENTED"},
	{protocol.InvalidParams, a2a.ErrInvalidParams, -32602, 400, "INVALID_ARGUMENT"},
	{protocol.Internal, a2a.ErrInternalError, -32603, 500, "INTERNAL"},
	{protocol.TaskNotFound, a2a.ErrTaskNotFound, -32001, 404, "NOT_FOUND"},
	{protocol.TaskNotCancelable, a2a.ErrTaskNotCancelable, -32002, 409, "FAILED_PRECONDITION"},
	{protocol.PushNotificationNotSupported, a2a.ErrPushNotificationNotSupported, -32003, 400, "UNIMPLEMENTED"},
	{protocol.UnsupportedOperation, a2a.ErrUnsupportedOperation, -32004, 400, "UNIMPLEMENTED"},
	{protocol.ContentTypeNotSupported, a2a.ErrUnsupportedContentType, -32005, 415, "INVALID_ARGUMENT"},
	{protocol.InvalidAgentResponse, a2a.ErrInvalidAgentResponse, -32006, 502, "INTERNAL"},
	{protocol.ExtendedAgentCardNotConfigured, a2a.ErrExtendedCardNotConfigured, -32007, 400, "FAILED_PRECONDITION"},
	{protocol.ExtensionSupportRequired, a2a.ErrExtensionSupportRequired, -32008, 400, "FAILED_PRECONDITION"},
	{protocol.VersionNotSupported, a2a.ErrVersionNotSupported, -32009, 400, "UNIMPLEMENTED"},
	{protocol.Unauthenticated, a2a.ErrUnauthenticated, -31401, 401, "UNAUTHENTICATED"},
	{protocol.Unauthorized, a2a.ErrUnauthorized, -31403, 403, "PERMISSION_DENIED"},
	{protocol.NotFound, a2a.ErrMethodNotFound, -32601, 404, "NOT_FOUND"},
	{protocol.MethodNotAllowed, a2a.ErrMethodNotFound, -32601, 405, "UNIMPLEMENTED"},
	{protocol.PayloadTooLarge, a2a.ErrInvalidRequest, -32600, 413, "INVALID_ARGUMENT"},
	{protocol.Unavailable, a2a.ErrInternalError, -32603, 503, "UNAVAILABLE"},
}

func TestErrorsDecodeWithA2AGoClients(t *testing.T) {
	for _, tc := range codeSentinels {
		t.Run(string(tc.code), func(t *testing.T) {
			require.True(t, tc.code.Valid())
			perr := protocol.Errorf(tc.code, "refused: %s", "because").WithMetadata("taskId", "t1")
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
					req, err := jsonrpcwire.ParseJSONRPC(protocol.V1, r.Header.Get("Content-Type"), body, protocol.Limits{})
					require.Nil(t, err)
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write(jsonrpcwire.MarshalError(perr, req.ID))
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
					_, _ = w.Write(httpjsonwire.MarshalStatus(perr))
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
		req *protocol.Request
		err *protocol.Error
	}
	newServer := func(t *testing.T, binding protocol.Binding, got chan<- seen) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			v, verr := protocol.ParseVersion(r.Header.Get(protocol.VersionHeader))
			require.Nil(t, verr)
			var req *protocol.Request
			var err *protocol.Error
			if binding == protocol.JSONRPC {
				req, err = jsonrpcwire.ParseJSONRPC(v, r.Header.Get("Content-Type"), body, protocol.Limits{})
			} else {
				req, err = httpjsonwire.ParseHTTP(v, r.Method, r.URL.RequestURI(), r.Header.Get("Content-Type"), body, protocol.Limits{})
			}
			got <- seen{req, err}
			reply := protocol.Errorf(protocol.TaskNotFound, "no such task")
			var out []byte
			if binding == protocol.JSONRPC {
				var id []byte
				if req != nil {
					id = req.ID
				}
				out = jsonrpcwire.MarshalError(reply, id)
			} else {
				out = httpjsonwire.MarshalStatus(reply)
			}
			if r.Header.Get("Accept") == "text/event-stream" {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("data: " + string(out) + "\n\n"))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			if binding == protocol.HTTPJSON {
				w.WriteHeader(reply.HTTPStatus())
			}
			_, _ = w.Write(out)
		}))
	}
	msg := &a2a.Message{ID: "m1", TaskID: "t1", ContextID: "c1", Role: a2a.MessageRoleUser, Metadata: map[string]any{"skillId": "s1"},
		Parts: a2a.ContentParts{a2a.NewTextPart("hello"), a2a.NewFileURLPart("https://x/a.pdf", "application/pdf"), a2a.NewDataPart(map[string]any{"k": 1})}}
	wantMsg := &protocol.MessageInfo{MessageID: "m1", TaskID: "t1", ContextID: "c1", SkillHint: "s1", AcceptedOutputModes: []string{"text/plain"},
		Parts: []protocol.PartInfo{{Kind: protocol.PartText, MediaType: "text/plain", Text: "hello"}, {Kind: protocol.PartURL, MediaType: "application/pdf"}, {Kind: protocol.PartData, MediaType: "application/json", Data: jsontext.Value(`{"k":1}`)}}}
	sendReq := &a2a.SendMessageRequest{Tenant: "acme", Message: msg, Config: &a2a.SendMessageConfig{AcceptedOutputModes: []string{"text/plain"}}}
	params := a2aclient.ServiceParams{protocol.VersionHeader: {"1.0"}}

	calls := []struct {
		name   string
		call   func(a2aclient.Transport) error
		op     protocol.Operation
		task   string
		config string
		msg    *protocol.MessageInfo
	}{
		{"SendMessage", func(tr a2aclient.Transport) error { _, err := tr.SendMessage(t.Context(), params, sendReq); return err }, protocol.SendMessage, "t1", "", wantMsg},
		{"SendStreamingMessage", func(tr a2aclient.Transport) error {
			for _, err := range tr.SendStreamingMessage(t.Context(), params, sendReq) {
				return err
			}
			return nil
		}, protocol.SendStreamingMessage, "t1", "", wantMsg},
		{"GetTask", func(tr a2aclient.Transport) error {
			_, err := tr.GetTask(t.Context(), params, &a2a.GetTaskRequest{Tenant: "acme", ID: "t1"})
			return err
		}, protocol.GetTask, "t1", "", nil},
		{"ListTasks", func(tr a2aclient.Transport) error {
			_, err := tr.ListTasks(t.Context(), params, &a2a.ListTasksRequest{Tenant: "acme", ContextID: "c1"})
			return err
		}, protocol.ListTasks, "", "", nil},
		{"CancelTask", func(tr a2aclient.Transport) error {
			_, err := tr.CancelTask(t.Context(), params, &a2a.CancelTaskRequest{Tenant: "acme", ID: "t1"})
			return err
		}, protocol.CancelTask, "t1", "", nil},
		{"SubscribeToTask", func(tr a2aclient.Transport) error {
			for _, err := range tr.SubscribeToTask(t.Context(), params, &a2a.SubscribeToTaskRequest{Tenant: "acme", ID: "t1"}) {
				return err
			}
			return nil
		}, protocol.SubscribeToTask, "t1", "", nil},
		{"CreateTaskPushConfig", func(tr a2aclient.Transport) error {
			_, err := tr.CreateTaskPushConfig(t.Context(), params, &a2a.PushConfig{Tenant: "acme", TaskID: "t1", ID: "c1", URL: "https://hook"})
			return err
		}, protocol.CreateTaskPushNotificationConfig, "t1", "c1", nil},
		{"GetTaskPushConfig", func(tr a2aclient.Transport) error {
			_, err := tr.GetTaskPushConfig(t.Context(), params, &a2a.GetTaskPushConfigRequest{Tenant: "acme", TaskID: "t1", ID: "c1"})
			return err
		}, protocol.GetTaskPushNotificationConfig, "t1", "c1", nil},
		{"ListTaskPushConfigs", func(tr a2aclient.Transport) error {
			_, err := tr.ListTaskPushConfigs(t.Context(), params, &a2a.ListTaskPushConfigRequest{Tenant: "acme", TaskID: "t1"})
			return err
		}, protocol.ListTaskPushNotificationConfigs, "t1", "", nil},
		{"DeleteTaskPushConfig", func(tr a2aclient.Transport) error {
			return tr.DeleteTaskPushConfig(t.Context(), params, &a2a.DeleteTaskPushConfigRequest{Tenant: "acme", TaskID: "t1", ID: "c1"})
		}, protocol.DeleteTaskPushNotificationConfig, "t1", "c1", nil},
		{"GetExtendedAgentCard", func(tr a2aclient.Transport) error {
			_, err := tr.GetExtendedAgentCard(t.Context(), params, &a2a.GetExtendedAgentCardRequest{Tenant: "acme"})
			return err
		}, protocol.GetExtendedAgentCard, "", "", nil},
	}
	for _, binding := range []protocol.Binding{protocol.JSONRPC, protocol.HTTPJSON} {
		for _, c := range calls {
			t.Run(string(binding)+"/"+c.name, func(t *testing.T) {
				got := make(chan seen, 1)
				srv := newServer(t, binding, got)
				defer srv.Close()
				var tr a2aclient.Transport
				if binding == protocol.JSONRPC {
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
				require.Equal(t, protocol.V1, s.req.Version)
				require.Equal(t, c.op, s.req.Operation)
				require.Equal(t, c.task, s.req.TaskID)
				require.Equal(t, c.config, s.req.ConfigID)
				require.Equal(t, "acme", s.req.Tenant)
				require.Equal(t, c.msg, s.req.Message)
			})
		}
	}
}
