// Package tracing_test runs capgate with tracing on against in-process OTLP
// receivers (OTLP/HTTP and OTLP/gRPC, decoded with the OTLP protos) and
// checks the spans of one request, their parentage, the trace context a
// handler receives, and the trace id in the decision log and audit lines.
package tracing_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/extauthz"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tracing"
	"github.com/capgate/capgate/test/testutil"
)

// The caller's trace: what a client (or Envoy) sends in traceparent.
const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// receiver is an OTLP trace receiver: it keeps every span it is sent.
type receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []*tracepb.Span
	service []string
}

func (r *receiver) add(req *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				r.service = append(r.service, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
}

// Export is OTLP/gRPC.
func (r *receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is OTLP/HTTP (protobuf, optionally gzip'd).
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// startReceiver serves a receiver over protocol on 127.0.0.1 and returns
// the tracing config that exports to it.
func startReceiver(t *testing.T, protocol string) (*receiver, config.Tracing) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &receiver{}
	switch protocol {
	case config.TracingGRPC:
		g := grpc.NewServer()
		collectortrace.RegisterTraceServiceServer(g, r)
		go func() { _ = g.Serve(ln) }()
		t.Cleanup(g.Stop)
	default:
		srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	return r, config.Tracing{OTLPEndpoint: "http://" + ln.Addr().String(), Protocol: protocol, SampleRatio: 1, ServiceName: "capgate"}
}

func (r *receiver) all() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

func hexID(b []byte) string { return hex.EncodeToString(b) }

func attr(s *tracepb.Span, key string) any {
	for _, a := range s.GetAttributes() {
		if a.GetKey() != key {
			continue
		}
		v := a.GetValue()
		switch {
		case v.GetStringValue() != "":
			return v.GetStringValue()
		case v.GetIntValue() != 0:
			return v.GetIntValue()
		case v.GetDoubleValue() != 0:
			return v.GetDoubleValue()
		default:
			return v.GetBoolValue()
		}
	}
	return nil
}

// byName returns the spans named name (at least one).
func byName(t *testing.T, spans []*tracepb.Span, name string) []*tracepb.Span {
	t.Helper()
	var found []*tracepb.Span
	for _, s := range spans {
		if s.GetName() == name {
			found = append(found, s)
		}
	}
	require.NotEmpty(t, found, "a span named %s among %v", name, names(spans))
	return found
}

// one returns the one span named name.
func one(t *testing.T, spans []*tracepb.Span, name string) *tracepb.Span {
	t.Helper()
	found := byName(t, spans, name)
	require.Len(t, found, 1, "one span named %s", name)
	return found[0]
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.GetName())
	}
	return out
}

// logTree logs spans as an indented tree with their attributes.
func logTree(t *testing.T, spans []*tracepb.Span) {
	t.Helper()
	children := map[string][]*tracepb.Span{}
	for _, s := range spans {
		children[hexID(s.GetParentSpanId())] = append(children[hexID(s.GetParentSpanId())], s)
	}
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range children[parent] {
			var attrs []string
			for _, a := range s.GetAttributes() {
				v := a.GetValue()
				val := v.GetStringValue()
				switch {
				case val != "":
				case v.GetIntValue() != 0:
					val = strconv.FormatInt(v.GetIntValue(), 10)
				case v.GetDoubleValue() != 0:
					val = strconv.FormatFloat(v.GetDoubleValue(), 'g', 4, 64)
				default:
					val = strconv.FormatBool(v.GetBoolValue())
				}
				attrs = append(attrs, a.GetKey()+"="+val)
			}
			t.Logf("%s%s [%s] span=%s %.2fms %s", strings.Repeat("  ", depth), s.GetName(), strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_"),
				hexID(s.GetSpanId()), float64(s.GetEndTimeUnixNano()-s.GetStartTimeUnixNano())/1e6, strings.Join(attrs, " "))
			walk(hexID(s.GetSpanId()), depth+1)
		}
	}
	walk(callerSpan, 0)
}

// upstream is a handler that records the trace context it receives.
type upstream struct {
	mu          sync.Mutex
	traceparent []string
	baggage     []string
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	_ = json.Unmarshal(body, &req)
	u.mu.Lock()
	u.traceparent = append(u.traceparent, r.Header.Get("Traceparent"))
	u.baggage = append(u.baggage, r.Header.Get("Baggage"))
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"task":{"id":"up-1","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}}`))
}

// TestGatewayTrace: one SendMessage carrying the caller's traceparent; the
// spans of capgate reach the receiver (both OTLP protocols) with correct
// parentage, the handler sees the caller's trace, and the decision log and
// the audit line carry the trace id.
func TestGatewayTrace(t *testing.T) {
	for _, protocol := range []string{config.TracingHTTP, config.TracingGRPC} {
		t.Run(protocol, func(t *testing.T) {
			rcv, tc := startReceiver(t, protocol)
			up := &upstream{}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			hs := &http.Server{Handler: up, ReadHeaderTimeout: 5 * time.Second}
			go func() { _ = hs.Serve(ln) }()
			t.Cleanup(func() { _ = hs.Close() })

			d := testutil.LoadDeployment(t, "")
			d.Config.Handlers["invoices.lookup.v1"] = "http://" + ln.Addr().String() + "/"
			d.Config.Tracing = tc
			srv := testutil.Start(t, d)
			tok := testutil.Token(t, testutil.TokenOptions{})
			const secret = "Show me invoice INV-20931"
			body := `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER",` +
				`"parts":[{"text":"` + secret + `"}],"metadata":{"skillId":"lookup-invoice-v1"}}}}`
			resp := srv.JSONRPC(t, body, "Authorization", "Bearer "+tok, "A2A-Version", "1.0",
				"Traceparent", traceparent, "Baggage", "tenant.tier=gold")
			require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
			require.NotContains(t, string(resp.Body), `"error"`)
			decisionID := resp.Header.Get("X-Capgate-Decision-Id")
			require.NotEmpty(t, decisionID)
			dec := srv.WaitDecision(t, decisionID)
			require.NoError(t, srv.Stop()) // flushes the spans

			spans := rcv.all()
			logTree(t, spans) // go test -v shows the trace (docs/observability.md)
			for _, s := range spans {
				require.Equal(t, callerTrace, hexID(s.GetTraceId()), "every span is in the caller's trace: %s", s.GetName())
				for _, a := range s.GetAttributes() {
					require.NotContains(t, a.GetValue().GetStringValue(), "INV-20931", "no message text on %s", s.GetName())
					require.NotContains(t, a.GetValue().GetStringValue(), tok, "no token on %s", s.GetName())
				}
			}
			server := one(t, spans, "POST /")
			require.Equal(t, callerSpan, hexID(server.GetParentSpanId()), "the server span continues the caller's")
			require.Equal(t, tracepb.Span_SPAN_KIND_SERVER, server.GetKind())
			require.Equal(t, "POST", attr(server, "http.request.method"))
			require.Equal(t, "/", attr(server, "http.route"), "the JSON-RPC endpoint")
			require.EqualValues(t, 200, attr(server, "http.response.status_code"))
			require.Equal(t, decisionID, attr(server, "capgate.decision_id"))
			require.Equal(t, "SendMessage", attr(server, "rpc.method"))
			require.Equal(t, "lookup-invoice-v1", attr(server, "capgate.capability"))
			require.Equal(t, srv.Deployment.Snapshot.Revision, attr(server, "capgate.policy.revision"))
			require.Equal(t, "hint", attr(server, "capgate.routing.layer"))

			route := one(t, spans, "capgate.route")
			require.Equal(t, server.GetSpanId(), route.GetParentSpanId())
			require.Equal(t, "hint", attr(route, "capgate.routing.layer"))
			for _, name := range []string{"capgate.policy.view", "capgate.policy.decide"} {
				for _, s := range byName(t, spans, name) {
					require.Equal(t, server.GetSpanId(), s.GetParentSpanId(), name)
					require.Equal(t, srv.Deployment.Snapshot.Revision, attr(s, "capgate.policy.revision"), name)
				}
			}
			entitled := map[any]any{}
			for _, s := range byName(t, spans, "capgate.policy.decide") {
				entitled[attr(s, "capgate.capability")] = attr(s, "capgate.policy.entitled")
			}
			require.Equal(t, true, entitled["lookup-invoice-v1"], "the handler-call re-check: %v", entitled)
			token := one(t, spans, "capgate.token")
			require.Equal(t, server.GetSpanId(), token.GetParentSpanId())
			require.Equal(t, "self_issued", attr(token, "capgate.token.kind"))
			call := one(t, spans, "handler POST")
			require.Equal(t, server.GetSpanId(), call.GetParentSpanId())
			require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, call.GetKind())
			require.EqualValues(t, 200, attr(call, "http.response.status_code"))

			// The handler saw the caller's trace, as a child of the call.
			up.mu.Lock()
			require.Equal(t, []string{"00-" + callerTrace + "-" + hexID(call.GetSpanId()) + "-01"}, up.traceparent)
			require.Equal(t, []string{"tenant.tier=gold"}, up.baggage, "baggage is passed on")
			up.mu.Unlock()

			// The decision log and the audit line carry the trace.
			require.Equal(t, callerTrace, dec[0]["trace_id"])
			require.Equal(t, hexID(server.GetSpanId()), dec[0]["span_id"])
			var auditLine map[string]any
			for _, l := range srv.Audit.Lines() {
				if strings.Contains(l, decisionID) {
					require.NoError(t, json.Unmarshal([]byte(l), &auditLine))
				}
			}
			require.NotNil(t, auditLine, "an audit line for the call")
			require.Equal(t, callerTrace, auditLine["trace_id"])
		})
	}
}

// TestUnsampledCallerIsNotTraced: a caller's traceparent with the sampled
// flag off is followed (parent-based): no span is exported.
func TestUnsampledCallerIsNotTraced(t *testing.T) {
	rcv, tc := startReceiver(t, config.TracingHTTP)
	d := testutil.LoadDeployment(t, "")
	d.Config.Tracing = tc
	srv := testutil.Start(t, d)
	resp := srv.Do(t, http.MethodGet, "/.well-known/agent-card.json", "", "Traceparent", "00-"+callerTrace+"-"+callerSpan+"-00")
	require.Equal(t, http.StatusOK, resp.Status)
	require.NoError(t, srv.Stop())
	require.Empty(t, rcv.all())
}

// TestExtAuthzTrace: a Check whose HTTP request carries traceparent (as
// Envoy forwards it) is a server span in that trace, with the policy view
// under it.
func TestExtAuthzTrace(t *testing.T) {
	rcv, tc := startReceiver(t, config.TracingGRPC)
	tp, err := tracing.Setup(t.Context(), tc, "test")
	require.NoError(t, err)
	d := testutil.LoadDeployment(t, "")
	rev, err := revision.Build(t.Context(), d, revision.Options{NoGateway: true})
	require.NoError(t, err)
	az := extauthz.New(revision.NewHolder(rev), tasks.NewMemory(0), extauthz.WithGRPCOptions(tp.ServerOptions()...))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- extauthz.Serve(ctx, ln, az, false) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	tok := testutil.Token(t, testutil.TokenOptions{})
	resp, err := authv3.NewAuthorizationClient(conn).Check(t.Context(), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: http.MethodPost, Path: "/", Host: "127.0.0.1:8080", Scheme: "http",
			Headers: map[string]string{"authorization": "Bearer " + tok, "a2a-version": "1.0", "content-type": "application/json", "traceparent": traceparent},
			Body:    `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"Show me invoice INV-1"}]}}}`,
		}},
	}})
	require.NoError(t, err)
	require.Zero(t, resp.GetStatus().GetCode(), "allowed")
	var decisionID string
	for _, h := range resp.GetOkResponse().GetHeaders() {
		if h.GetHeader().GetKey() == extauthz.HeaderDecisionID {
			decisionID = h.GetHeader().GetValue()
		}
	}
	require.NotEmpty(t, decisionID)
	require.NoError(t, tp.Shutdown(t.Context()))

	spans := rcv.all()
	check := one(t, spans, "envoy.service.auth.v3.Authorization/Check")
	require.Equal(t, callerTrace, hexID(check.GetTraceId()))
	require.Equal(t, callerSpan, hexID(check.GetParentSpanId()))
	require.Equal(t, "grpc", attr(check, "rpc.system"))
	require.Equal(t, "Check", attr(check, "rpc.method"))
	require.Equal(t, decisionID, attr(check, "capgate.decision_id"))
	require.Equal(t, "extauthz", attr(check, "capgate.component"))
	view := one(t, spans, "capgate.policy.view")
	require.Equal(t, check.GetSpanId(), view.GetParentSpanId())
}
