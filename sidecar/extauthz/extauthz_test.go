package extauthz

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/capgate/capgate/policy/config"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"

	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tasks"
)

const (
	msgText = `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"reconcile INV-20931 against its PO"}]}`
	v1      = "1.0"
)

func rpcBody(id, method, params string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`
}

// want is the expected outcome of one check.
type want struct {
	allow bool
	grpc  codes.Code // of CheckResponse.status when denied
	http  int        // denied HTTP status
	// rpcCode is the JSON-RPC error code in a JSON-RPC denial; rpcID the echoed id.
	rpcCode int
	rpcID   string
	// status is the google.rpc.Status code (HTTP status) in an HTTP+JSON denial.
	status int
	// grpcStatus is the grpc-status header of a gRPC-binding denial.
	grpcStatus string
	// contains must appear in the denial body (or grpc-message).
	contains string
	// headers must be present on the denial or allow response.
	headers map[string]string
	// remove is the exact headers_to_remove of an allow.
	remove []string
}

func TestCheck(t *testing.T) {
	rev := financeRevision(t)
	tok := newTokens(t)
	mem := tasks.NewMemory(0)
	require.NoError(t, mem.Bind(t.Context(), tasks.Binding{TaskID: "task-alice", Capability: "reconcile-invoice", Handler: "recon.v3.reconcile", Subject: "alice", Tenant: "acme"}))
	s := New(revision.NewHolder(rev), mem)
	client, conn := startServer(t, s)

	alice := tok.bearer("alice", "acme", "recon.run")
	bob := tok.bearer("bob", "acme")

	sendTask := rpcBody(`7`, "SendMessage", `{"message":{"messageId":"m-2","taskId":"task-alice","role":"ROLE_USER","parts":[{"text":"go on"}]}}`)
	cases := []struct {
		name string
		req  *authv3.CheckRequest
		want want
	}{
		{"public card anonymous", httpCheck("GET", "/.well-known/agent-card.json", nil, ""),
			want{allow: true, headers: map[string]string{}}},
		{"extended card JSON-RPC without token", jsonrpc(rpcBody(`"x1"`, "GetExtendedAgentCard", `{}`), map[string]string{"a2a-version": v1}),
			want{grpc: codes.Unauthenticated, http: 200, rpcCode: -31401, rpcID: `"x1"`}},
		{"extended card HTTP+JSON without token", httpCheck("GET", "/extendedAgentCard", map[string]string{"a2a-version": v1}, ""),
			want{grpc: codes.Unauthenticated, http: 401, status: 401, headers: map[string]string{"www-authenticate": "Bearer"}}},
		{"extended card with token", jsonrpc(rpcBody(`1`, "GetExtendedAgentCard", `{}`), map[string]string{"a2a-version": v1, "authorization": alice}),
			want{allow: true, headers: map[string]string{HeaderPrincipal: "alice", HeaderTenant: "acme"}}},
		{"extended card with a bad token", httpCheck("GET", "/extendedAgentCard", map[string]string{"a2a-version": v1, "authorization": "Bearer not.a.token"}, ""),
			want{grpc: codes.Unauthenticated, http: 401, status: 401, headers: map[string]string{"www-authenticate": `Bearer error="invalid_token", error_description="malformed token"`}}},
		{"send message with recon.run", jsonrpc(rpcBody(`2`, "SendMessage", `{"message":`+msgText+`}`), map[string]string{"a2a-version": v1, "authorization": alice}),
			want{allow: true, headers: map[string]string{HeaderPrincipal: "alice"}}},
		{"send message 0.3 name without version header", jsonrpc(rpcBody(`3`, "message/send", `{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}`), map[string]string{"authorization": alice}),
			want{allow: true}},
		{"send message anonymous", jsonrpc(rpcBody(`4`, "SendMessage", `{"message":`+msgText+`}`), map[string]string{"a2a-version": v1}),
			want{grpc: codes.Unauthenticated, http: 200, rpcCode: -31401, rpcID: `4`}},
		{"missing body with content-length", httpCheck("POST", "/", map[string]string{"content-type": "application/json", "content-length": "120", "a2a-version": v1}, ""),
			want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32603, contains: "configure with_request_body"}},
		{"partial body", jsonrpc(rpcBody(`5`, "SendMessage", `{"message":`+msgText+`}`), map[string]string{"a2a-version": v1, "authorization": alice, "x-envoy-auth-partial-body": "true"}),
			want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32603, contains: "truncated at max_request_bytes"}},
		{"body shorter than content-length", jsonrpc(`{"jsonrpc":"2.0"`, map[string]string{"content-length": "400", "a2a-version": v1}),
			want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32603, contains: "allow_partial_message must be false"}},
		{"duplicate keys", jsonrpc(`{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"SendMessage","params":{"id":"t"}}`, map[string]string{"a2a-version": v1, "authorization": alice}),
			want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32700, contains: "duplicate object key"}},
		{"unknown method", jsonrpc(rpcBody(`6`, "DropTables", `{}`), map[string]string{"a2a-version": v1, "authorization": alice}),
			want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32601, rpcID: `6`}},
		{"1.0 name without version header", jsonrpc(rpcBody(`8`, "SendMessage", `{"message":`+msgText+`}`), map[string]string{"authorization": alice}),
			want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32601, rpcID: `8`, contains: "not an A2A 0.3 method"}},
		{"unsupported version header", jsonrpc(rpcBody(`9`, "SendMessage", `{"message":`+msgText+`}`), map[string]string{"a2a-version": "2.0", "authorization": alice}),
			want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32009, rpcID: `9`}},
		{"own task", jsonrpc(sendTask, map[string]string{"a2a-version": v1, "authorization": alice}),
			want{allow: true}},
		{"task of another owner", jsonrpc(sendTask, map[string]string{"a2a-version": v1, "authorization": bob}),
			want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32001, rpcID: `7`, contains: `"task not found"`}},
		{"task that does not exist", jsonrpc(rpcBody(`7`, "GetTask", `{"id":"task-nobody"}`), map[string]string{"a2a-version": v1, "authorization": bob}),
			want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32001, rpcID: `7`, contains: `"task not found"`}},
		{"get own task over HTTP+JSON", httpCheck("GET", "/tasks/task-alice", map[string]string{"a2a-version": v1, "authorization": alice}, ""),
			want{allow: true}},
		{"get another's task over HTTP+JSON", httpCheck("GET", "/tasks/task-alice", map[string]string{"a2a-version": v1, "authorization": bob}, ""),
			want{grpc: codes.PermissionDenied, http: 404, status: 404, contains: "TASK_NOT_FOUND"}},
		{"list tasks anonymous", httpCheck("GET", "/tasks", map[string]string{"a2a-version": v1}, ""),
			want{grpc: codes.Unauthenticated, http: 401, status: 401}},
		{"unknown HTTP route", httpCheck("GET", "/admin", map[string]string{"a2a-version": v1, "authorization": alice}, ""),
			want{grpc: codes.PermissionDenied, http: 404, status: 404}},
		{"GET on the JSON-RPC endpoint", httpCheck("GET", "/", map[string]string{"authorization": alice}, ""),
			want{grpc: codes.PermissionDenied, http: 405, status: 405, headers: map[string]string{"allow": "POST"}}},
		{"spoofed principal on an anonymous request", httpCheck("GET", "/.well-known/agent-card.json", map[string]string{"x-capgate-principal": "admin", "X-Capgate-Tenant": "root"}, ""),
			want{allow: true, remove: []string{"x-capgate-principal", "x-capgate-tenant"}}},
		{"spoofed headers on an authenticated request", jsonrpc(rpcBody(`1`, "GetExtendedAgentCard", `{}`), map[string]string{"a2a-version": v1, "authorization": alice, "x-capgate-principal": "admin", "x-capgate-decision-id": "forged", "x-capgate-scopes": "all"}),
			want{allow: true, headers: map[string]string{HeaderPrincipal: "alice"}, remove: []string{"x-capgate-scopes"}}},
		{"gRPC extended card without token", grpcCheck("/lf.a2a.v1.A2AService/GetExtendedAgentCard", &a2apb.GetExtendedAgentCardRequest{}, nil),
			want{grpc: codes.Unauthenticated, http: 200, grpcStatus: strconv.Itoa(int(codes.Unauthenticated))}},
		{"gRPC send message", grpcCheck("/lf.a2a.v1.A2AService/SendMessage", &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m", Role: a2apb.Role_ROLE_USER,
			Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hi"}}}}}, map[string]string{"authorization": alice}),
			want{allow: true}},
		// A gRPC message is held to the JSON-RPC message rules (the same reader): parts are required.
		{"gRPC send message without parts", grpcCheck("/lf.a2a.v1.A2AService/SendMessage", &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m", Role: a2apb.Role_ROLE_USER}}, map[string]string{"authorization": alice}),
			want{grpc: codes.PermissionDenied, http: 200, grpcStatus: strconv.Itoa(int(codes.InvalidArgument)), contains: "parts"}},
		{"gRPC get another's task", grpcCheck("/lf.a2a.v1.A2AService/GetTask", &a2apb.GetTaskRequest{Id: "task-alice"}, map[string]string{"authorization": bob}),
			want{grpc: codes.PermissionDenied, http: 200, grpcStatus: strconv.Itoa(int(codes.NotFound)), contains: "task not found"}},
		{"gRPC get own task", grpcCheck("/lf.a2a.v1.A2AService/GetTask", &a2apb.GetTaskRequest{Id: "task-alice"}, map[string]string{"authorization": alice}),
			want{allow: true}},
		{"gRPC task operation without a body", grpcCheck("/lf.a2a.v1.A2AService/GetTask", nil, map[string]string{"authorization": alice}),
			want{grpc: codes.PermissionDenied, http: 200, grpcStatus: strconv.Itoa(int(codes.Internal)), contains: "with_request_body"}},
		{"gRPC unknown method", grpcCheck("/lf.a2a.v1.A2AService/Drop", nil, map[string]string{"authorization": alice}),
			want{grpc: codes.PermissionDenied, http: 200, grpcStatus: strconv.Itoa(int(codes.Unimplemented))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.Check(t.Context(), tc.req)
			require.NoError(t, err)
			requireOutcome(t, resp, tc.want)
		})
	}

	t.Run("health SERVING", func(t *testing.T) {
		hc := healthpb.NewHealthClient(conn)
		for _, svc := range []string{"", ServiceName} {
			r, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
			require.NoError(t, err)
			require.Equal(t, healthpb.HealthCheckResponse_SERVING, r.GetStatus())
		}
	})
}

// grpcCheck is a gRPC-binding request with msg framed as Envoy sends it with
// pack_as_bytes (nil: no body).
func grpcCheck(path string, msg proto.Message, headers map[string]string) *authv3.CheckRequest {
	h := map[string]string{"content-type": "application/grpc", "te": "trailers"}
	for k, v := range headers {
		h[k] = v
	}
	req := httpCheck("POST", path, h, "")
	if msg != nil {
		b, err := proto.Marshal(msg)
		if err != nil {
			panic(err)
		}
		frame := append([]byte{0, 0, 0, 0, 0}, b...)
		frame[1], frame[2], frame[3], frame[4] = byte(len(b)>>24), byte(len(b)>>16), byte(len(b)>>8), byte(len(b))
		req.Attributes.Request.Http.RawBody = frame
	}
	return req
}

func requireOutcome(t *testing.T, resp *authv3.CheckResponse, w want) {
	t.Helper()
	md := resp.GetDynamicMetadata().GetFields()
	require.NotEmpty(t, md[MetadataDecisionID].GetStringValue())
	if w.allow {
		require.Equal(t, int32(codes.OK), resp.GetStatus().GetCode(), "denied: %s", resp.GetDeniedResponse().GetBody())
		ok := resp.GetOkResponse()
		require.NotNil(t, ok)
		got := map[string]string{}
		for _, h := range ok.GetHeaders() {
			got[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		}
		require.Equal(t, md[MetadataDecisionID].GetStringValue(), got[HeaderDecisionID])
		for k, v := range w.headers {
			require.Equal(t, v, got[k], "header %s", k)
		}
		require.Equal(t, w.remove, ok.GetHeadersToRemove())
		for _, h := range ok.GetHeadersToRemove() {
			_, set := got[h]
			require.False(t, set, "%s is both set and removed", h)
		}
		return
	}
	require.Equal(t, int32(w.grpc), resp.GetStatus().GetCode())
	denied := resp.GetDeniedResponse()
	require.NotNil(t, denied)
	require.Equal(t, typev3.StatusCode(w.http), denied.GetStatus().GetCode())
	got := map[string]string{}
	for _, h := range denied.GetHeaders() {
		got[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
	}
	require.Equal(t, md[MetadataDecisionID].GetStringValue(), got[HeaderDecisionID])
	for k, v := range w.headers {
		require.Equal(t, v, got[k], "header %s", k)
	}
	switch {
	case w.rpcCode != 0:
		require.Equal(t, "application/json", got["content-type"])
		var body struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(denied.GetBody()), &body), denied.GetBody())
		require.Equal(t, "2.0", body.JSONRPC)
		require.Equal(t, w.rpcCode, body.Error.Code, denied.GetBody())
		if w.rpcID != "" {
			require.Equal(t, w.rpcID, string(body.ID))
		}
	case w.status != 0:
		require.Equal(t, "application/json", got["content-type"])
		var body struct {
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(denied.GetBody()), &body), denied.GetBody())
		require.Equal(t, w.status, body.Error.Code)
	case w.grpcStatus != "":
		require.Equal(t, "application/grpc", got["content-type"])
		require.Equal(t, w.grpcStatus, got["grpc-status"])
		require.NotEmpty(t, got["grpc-message"])
		require.Empty(t, denied.GetBody())
	default:
		t.Fatal("the case names no denial shape")
	}
	if w.contains != "" {
		require.Contains(t, denied.GetBody()+got["grpc-message"], w.contains)
	}
}

func TestCheckRequiredExtension(t *testing.T) {
	rev := editedRevision(t, func(c string) string {
		return strings.Replace(c, "required: false}", "required: true}", 1)
	})
	tok := newTokens(t)
	s := New(revision.NewHolder(rev), tasks.NewMemory(0))
	body := rpcBody(`1`, "SendMessage", `{"message":`+msgText+`}`)
	auth := tok.bearer("alice", "acme", "recon.run")

	resp, err := s.Check(t.Context(), jsonrpc(body, map[string]string{"a2a-version": v1, "authorization": auth}))
	require.NoError(t, err)
	requireOutcome(t, resp, want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32008, rpcID: `1`, contains: "https://example.com/ext/trace/v1"})

	resp, err = s.Check(t.Context(), jsonrpc(body, map[string]string{"a2a-version": v1, "authorization": auth, "a2a-extensions": "https://example.com/ext/trace/v1"}))
	require.NoError(t, err)
	requireOutcome(t, resp, want{allow: true})
}

func TestCheckNoEntitlement(t *testing.T) {
	// Only extended capabilities remain: a caller without their scopes has none.
	rev := editedRevision(t, func(c string) string { return strings.Replace(c, "version: 1.4.0", "version: 1.4.1", 1) },
		"extract-invoice-fields.yaml", "lookup-invoice.yaml", "lookup-invoice-v1.yaml")
	tok := newTokens(t)
	s := New(revision.NewHolder(rev), tasks.NewMemory(0))
	body := rpcBody(`1`, "SendMessage", `{"message":`+msgText+`}`)

	resp, err := s.Check(t.Context(), jsonrpc(body, map[string]string{"a2a-version": v1, "authorization": tok.bearer("bob", "acme")}))
	require.NoError(t, err)
	requireOutcome(t, resp, want{grpc: codes.PermissionDenied, http: 200, rpcCode: -31403, rpcID: `1`, contains: "no capability of this agent is available to the caller"})

	resp, err = s.Check(t.Context(), httpCheck("POST", "/message:send", map[string]string{"a2a-version": v1, "authorization": tok.bearer("bob", "acme"),
		"content-type": "application/json", "content-length": itoa(len(`{"message":` + msgText + `}`))}, `{"message":`+msgText+`}`))
	require.NoError(t, err)
	requireOutcome(t, resp, want{grpc: codes.PermissionDenied, http: 403, status: 403, headers: map[string]string{
		"www-authenticate": `Bearer error="insufficient_scope", error_description="no capability of this agent is available to the caller"`}})

	resp, err = s.Check(t.Context(), jsonrpc(body, map[string]string{"a2a-version": v1, "authorization": tok.bearer("alice", "acme", "recon.run")}))
	require.NoError(t, err)
	requireOutcome(t, resp, want{allow: true})
}

// failingOwners is a task store that is down.
type failingOwners struct{}

func (failingOwners) Lookup(context.Context, string) (tasks.Binding, bool, error) {
	return tasks.Binding{}, false, errors.Join(tasks.ErrUnavailable, errors.New("dial tcp: connection refused"))
}

func (failingOwners) ClaimContext(context.Context, tasks.Context) (tasks.Context, error) {
	return tasks.Context{}, errors.Join(tasks.ErrUnavailable, errors.New("dial tcp: connection refused"))
}

func (failingOwners) LookupContext(context.Context, string) (tasks.Context, bool, error) {
	return tasks.Context{}, false, errors.Join(tasks.ErrUnavailable, errors.New("dial tcp: connection refused"))
}

func TestCheckFailsClosed(t *testing.T) {
	rev := financeRevision(t)
	tok := newTokens(t)
	auth := tok.bearer("alice", "acme", "recon.run")

	t.Run("task store error", func(t *testing.T) {
		m := metrics.New()
		s := New(revision.NewHolder(rev), failingOwners{}, WithMetrics(m))
		resp, err := s.Check(t.Context(), jsonrpc(rpcBody(`1`, "GetTask", `{"id":"task-alice"}`), map[string]string{"a2a-version": v1, "authorization": auth}))
		require.NoError(t, err)
		requireOutcome(t, resp, want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32603, rpcID: `1`})
		require.NotContains(t, resp.GetDeniedResponse().GetBody(), "connection refused")
		// Counted as unavailability, not as a refusal of the caller.
		require.Equal(t, 1.0, counterValue(t, m.Decisions.WithLabelValues(component, "GetTask", "deny", "unavailable")))
		require.Equal(t, 0.0, counterValue(t, m.Decisions.WithLabelValues(component, "GetTask", "deny", "refused")))
		require.Equal(t, 0.0, counterValue(t, m.Decisions.WithLabelValues(component, "GetTask", "deny", "error")))
	})
	t.Run("task store error on a context", func(t *testing.T) {
		// A message in a conversation is never admitted without its context's owner.
		s := New(revision.NewHolder(rev), failingOwners{})
		msg := strings.Replace(msgText, `"messageId"`, `"contextId":"ctx-1","messageId"`, 1)
		resp, err := s.Check(t.Context(), jsonrpc(rpcBody(`1`, "SendMessage", `{"message":`+msg+`}`), map[string]string{"a2a-version": v1, "authorization": auth}))
		require.NoError(t, err)
		requireOutcome(t, resp, want{grpc: codes.PermissionDenied, http: 200, rpcCode: -32603, rpcID: `1`})
		require.NotContains(t, resp.GetDeniedResponse().GetBody(), "connection refused")
		// A filter is not looked up at the door: it narrows the caller's own tasks, which the
		// gateway lists from the store (and fails closed there when the store fails).
		resp, err = s.Check(t.Context(), httpCheck("GET", "/tasks?contextId=ctx-1", map[string]string{"a2a-version": v1, "authorization": auth}, ""))
		require.NoError(t, err)
		require.Equal(t, int32(codes.OK), resp.GetStatus().GetCode())
	})
	t.Run("no task store", func(t *testing.T) {
		m := metrics.New()
		s := New(revision.NewHolder(rev), nil, WithMetrics(m))
		resp, err := s.Check(t.Context(), httpCheck("GET", "/tasks/task-alice", map[string]string{"a2a-version": v1, "authorization": auth}, ""))
		require.NoError(t, err)
		requireOutcome(t, resp, want{grpc: codes.PermissionDenied, http: 500, status: 500})
		require.Equal(t, 1.0, counterValue(t, m.Decisions.WithLabelValues(component, "GetTask", "deny", "error")), "capgate's own failure")
	})
	t.Run("panic", func(t *testing.T) {
		s := New(revision.NewHolder(rev), tasks.NewMemory(0))
		s.hook = func() { panic("boom") }
		client, _ := startServer(t, s)
		resp, err := client.Check(t.Context(), jsonrpc(rpcBody(`1`, "SendMessage", `{"message":`+msgText+`}`), map[string]string{"a2a-version": v1, "authorization": auth}))
		require.NoError(t, err)
		requireOutcome(t, resp, want{grpc: codes.PermissionDenied, http: 500, status: 500, contains: "internal error"})
	})
	t.Run("no http attributes", func(t *testing.T) {
		s := New(revision.NewHolder(rev), tasks.NewMemory(0))
		resp, err := s.Check(t.Context(), &authv3.CheckRequest{})
		require.NoError(t, err)
		requireOutcome(t, resp, want{grpc: codes.PermissionDenied, http: 400, status: 400})
	})
}

func TestDeniedStatusesAreEnvoyStatusCodes(t *testing.T) {
	for _, c := range []protocol.Code{
		protocol.ParseError, protocol.InvalidRequest, protocol.MethodNotFound, protocol.InvalidParams, protocol.Internal,
		protocol.TaskNotFound, protocol.TaskNotCancelable, protocol.PushNotificationNotSupported, protocol.UnsupportedOperation,
		protocol.ContentTypeNotSupported, protocol.InvalidAgentResponse, protocol.ExtendedAgentCardNotConfigured,
		protocol.ExtensionSupportRequired, protocol.VersionNotSupported, protocol.Unauthenticated, protocol.Unauthorized,
		protocol.NotFound, protocol.MethodNotAllowed, protocol.PayloadTooLarge,
	} {
		e := protocol.Errorf(c, "x")
		_, ok := typev3.StatusCode_name[int32(e.HTTPStatus())]
		require.True(t, ok, "%s: HTTP %d is not an Envoy StatusCode", c, e.HTTPStatus())
		if c != protocol.Internal && c != protocol.InvalidAgentResponse {
			require.NotEqual(t, codes.Internal, grpcwire.Code(e), "%s", c)
		}
	}
}

func TestCheckMTLSPrincipal(t *testing.T) {
	const spiffe = "spiffe://example.org/ns/partners/sa/orchestrator"
	m := metrics.New()
	rev := financeRevision(t)
	rev.Peers = identity.PeerPrincipals(config.Auth{MTLSPrincipals: map[string]config.MTLSPrincipal{
		spiffe: {Subject: "orchestrator", Tenant: "partners", Scopes: []string{"recon.run"}}}})
	s := New(revision.NewHolder(rev), tasks.NewMemory(0), WithMetrics(m))
	peer := func(req *authv3.CheckRequest, id string) *authv3.CheckRequest {
		req.Attributes.Source.Principal = id
		return req
	}
	card := func(h map[string]string) *authv3.CheckRequest {
		return jsonrpc(rpcBody(`1`, "GetExtendedAgentCard", `{}`), h)
	}

	resp, err := s.Check(t.Context(), peer(card(map[string]string{"a2a-version": v1}), spiffe))
	require.NoError(t, err)
	requireOutcome(t, resp, want{allow: true, headers: map[string]string{HeaderPrincipal: "orchestrator", HeaderTenant: "partners"}})

	resp, err = s.Check(t.Context(), peer(card(map[string]string{"a2a-version": v1}), "spiffe://example.org/ns/other/sa/x"))
	require.NoError(t, err)
	requireOutcome(t, resp, want{grpc: codes.Unauthenticated, http: 200, rpcCode: -31401})

	// A bearer token wins over the certificate, even a bad one.
	resp, err = s.Check(t.Context(), peer(card(map[string]string{"a2a-version": v1, "authorization": "Bearer x.y.z"}), spiffe))
	require.NoError(t, err)
	requireOutcome(t, resp, want{grpc: codes.Unauthenticated, http: 200, rpcCode: -31401})

	require.Equal(t, 1.0, counterValue(t, m.Decisions.WithLabelValues(component, "GetExtendedAgentCard", "allow", "ok")))
	require.Equal(t, 2.0, counterValue(t, m.Decisions.WithLabelValues(component, "GetExtendedAgentCard", "deny", "refused")))
	require.Equal(t, 1.0, counterValue(t, m.CacheLookups.WithLabelValues("token", "miss")))
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

// TestCheckAnonymousOwnsNoTask: with anonymous_public, an anonymous caller
// may send messages, but owns no task: a task bound to "nobody" would be
// every anonymous caller's. Every task operation and every message that
// continues a task asks for a credential.
func TestCheckAnonymousOwnsNoTask(t *testing.T) {
	rev := editedRevision(t, func(c string) string {
		return strings.Replace(c, "anonymous_public: false", "anonymous_public: true", 1)
	})
	store := tasks.NewMemory(0)
	require.NoError(t, store.Bind(t.Context(), tasks.Binding{TaskID: "t-anon", Capability: "lookup-invoice", Handler: "invoices.lookup"}))
	s := New(revision.NewHolder(rev), store)
	anon := map[string]string{"a2a-version": v1}
	unauth := want{grpc: codes.Unauthenticated, http: 200, rpcCode: -31401, rpcID: `1`}
	for name, body := range map[string]string{
		"GetTask":                 rpcBody(`1`, "GetTask", `{"id":"t-anon"}`),
		"CancelTask":              rpcBody(`1`, "CancelTask", `{"id":"t-anon"}`),
		"ListTasks":               rpcBody(`1`, "ListTasks", `{}`),
		"SendMessage with taskId": rpcBody(`1`, "SendMessage", `{"message":{"messageId":"m-2","role":"ROLE_USER","taskId":"t-anon","parts":[{"text":"more"}]}}`),
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := s.Check(t.Context(), jsonrpc(body, anon))
			require.NoError(t, err)
			requireOutcome(t, resp, unauth)
		})
	}
	// A streaming operation is refused as an event stream, with the same error.
	resp, err := s.Check(t.Context(), jsonrpc(rpcBody(`1`, "SubscribeToTask", `{"id":"t-anon"}`), anon))
	require.NoError(t, err)
	require.Equal(t, int32(codes.Unauthenticated), resp.GetStatus().GetCode())
	require.Contains(t, resp.GetDeniedResponse().GetBody(), `"code":-31401`)

	resp, err = s.Check(t.Context(), jsonrpc(rpcBody(`1`, "SendMessage", `{"message":`+msgText+`}`), anon))
	require.NoError(t, err)
	requireOutcome(t, resp, want{allow: true})
}
