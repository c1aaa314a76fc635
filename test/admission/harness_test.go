// Package admission_test drives both doors — the gateway and the ext_authz server, one capgate
// sharing one task store — with every position of the request model (sidecar/protocol/positionstest)
// and every caller class, and requires that they give the same verdict and that only the owner
// gets through.
package admission_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/test/testutil"
)

// Issuers of the sweep's deployment: the finance example's, and a second one trusted beside it
// (same demo keys, another iss).
const (
	issuerA = "https://idp.example.com"
	issuerB = "https://idp-b.example.com"
	hook    = "https://hooks.example.com/a2a"
)

// class is a caller class of the sweep.
type class struct {
	name          string
	issuer        string
	subject       string
	tenant        string
	anonymous     bool
	token         string
	task          string // a task this caller owns ("" for anonymous)
	context       string // the context of task, which this caller owns
	authenticated bool
}

// env is one capgate with both doors.
type env struct {
	srv   *testutil.Server
	authz authv3.AuthorizationClient
	// setups numbers the tasks createTaskIn makes, each a new message (messageId).
	setups atomic.Int64
}

func startBoth(t *testing.T) *env {
	t.Helper()
	return startAllowing(t, "https://hooks.example.com/")
}

// startAllowing starts the sweep's deployment with push on and allowed as push.allowed_urls.
func startAllowing(t *testing.T, allowed string) *env {
	t.Helper()
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		s = strings.Replace(s, "  scopes_claim: scope", `    - issuer: `+issuerB+`
      audiences: [finance-agent]
      jwks_file: ./keys/demo.jwks.json
      algorithms: [RS256, ES256]
  scopes_claim: scope`, 1)
		return s + "\npush:\n  enabled: true\n  allowed_urls: [\"" + allowed + "\"]\n"
	})
	return connect(t, testutil.Start(t, testutil.LoadDeployment(t, cfg), testutil.StartOptions{ExtAuthz: true}))
}

// connect opens an ext_authz client to srv.
func connect(t *testing.T, srv *testutil.Server) *env {
	t.Helper()
	conn, err := grpc.NewClient(srv.Addrs.ExtAuthz, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &env{srv: srv, authz: authv3.NewAuthorizationClient(conn)}
}

// classes are the callers of the sweep; the first is the owner.
func classes(t *testing.T, e *env) []*class {
	t.Helper()
	cs := []*class{
		{name: "owner", issuer: issuerA, subject: "alice", tenant: "acme"},
		{name: "same subject, other tenant", issuer: issuerA, subject: "alice", tenant: "globex"},
		{name: "same subject and tenant, other issuer", issuer: issuerB, subject: "alice", tenant: "acme"},
		{name: "anonymous", anonymous: true},
	}
	for _, c := range cs {
		if c.anonymous {
			continue
		}
		c.authenticated = true
		c.token = testutil.Token(t, testutil.TokenOptions{Issuer: c.issuer, Subject: c.subject, Tenant: c.tenant, Scopes: []string{"recon.run"}})
		c.task, c.context = e.createTask(t, c)
	}
	return cs
}

// createTask sends a message routed to lookup-invoice (by hint) and returns the task it made,
// with a push config "c-1" on it, and the task's context.
func (e *env) createTask(t *testing.T, c *class) (task, context string) {
	t.Helper()
	task, context = e.createTaskIn(t, c, "")
	e.pushConfig(t, c, task)
	return task, context
}

// createTaskNoPush sends a message routed to lookup-invoice (by hint) and returns its task.
func (e *env) createTaskNoPush(t *testing.T, c *class) string {
	t.Helper()
	task, _ := e.createTaskIn(t, c, "")
	return task
}

// createTaskIn sends a message routed to lookup-invoice (by hint), in context contextID when
// one is given, and returns the task it made and the task's context.
func (e *env) createTaskIn(t *testing.T, c *class, contextID string) (task, context string) {
	t.Helper()
	inContext := ""
	if contextID != "" {
		inContext = `"contextId":"` + contextID + `",`
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"setup-` + c.name + `-` + strconv.FormatInt(e.setups.Add(1), 10) + `","role":"ROLE_USER",` + inContext +
		`"parts":[{"text":"look up invoice INV-1"}],"metadata":{"skillId":"lookup-invoice"}}}}`
	r := e.srv.JSONRPC(t, body, "Authorization", "Bearer "+c.token, "A2A-Version", "1.0")
	var out struct {
		Result struct {
			Task struct {
				ID        string `json:"id"`
				ContextID string `json:"contextId"`
			} `json:"task"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &out), "%s", r.Body)
	require.NotEmpty(t, out.Result.Task.ID, "%s", r.Body)
	require.NotEmpty(t, out.Result.Task.ContextID, "%s", r.Body)
	return out.Result.Task.ID, out.Result.Task.ContextID
}

// pushConfig (re)creates push config c-1 on a task of c.
func (e *env) pushConfig(t *testing.T, c *class, task string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"` + task + `","id":"c-1","url":"` + hook + `"}}`
	r := e.srv.JSONRPC(t, body, "Authorization", "Bearer "+c.token, "A2A-Version", "1.0")
	require.Equal(t, "", reasonOf(r.Body), "%s", r.Body)
}

// outcome is what one door answered.
type outcome struct {
	allowed bool
	reason  string // the A2A ErrorInfo reason of a refusal
	status  int
	body    string
	// decision is the door's decision id (X-Capgate-Decision-Id; ext_authz: of a denial).
	decision string
	// header holds the answer's headers (ext_authz: a denial's, or an allow's response headers
	// to add).
	header http.Header
}

func (o outcome) String() string {
	if o.allowed {
		return "allowed"
	}
	return "refused " + o.reason
}

// gateway sends the request to the gateway and reads the whole answer; a gRPC request goes
// over h2c (see gatewayGRPC).
func (e *env) gateway(t *testing.T, method, target string, h http.Header, body []byte) outcome {
	t.Helper()
	if strings.HasPrefix(h.Get("Content-Type"), "application/grpc") {
		return e.gatewayGRPC(t, method, target, h, body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+target, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header = h
	resp, err := e.srv.HTTP.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	require.NoError(t, err)
	r := reasonOf(b)
	return outcome{allowed: resp.StatusCode/100 == 2 && r == "", reason: r, status: resp.StatusCode, body: string(b),
		decision: resp.Header.Get("X-Capgate-Decision-Id"), header: resp.Header}
}

// extauthz sends the CheckRequest Envoy would send for the request.
func (e *env) extauthz(t *testing.T, method, target string, h http.Header, body []byte) outcome {
	t.Helper()
	hm := map[string]string{":method": method, ":path": target, ":authority": "finance.example.com", ":scheme": "https"}
	for k, vs := range h {
		hm[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	if len(body) > 0 && !strings.HasPrefix(h.Get("Content-Type"), "application/grpc") {
		hm["content-length"] = strconv.Itoa(len(body))
	}
	_, query, _ := strings.Cut(target, "?")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := e.authz.Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "10.0.0.7", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: method, Path: target, Host: "finance.example.com", Scheme: "https", Query: query,
			Protocol: "HTTP/2", Headers: hm, RawBody: body, Size: int64(len(body)),
		}},
	}})
	require.NoError(t, err)
	if codes.Code(resp.GetStatus().GetCode()) == codes.OK {
		added := http.Header{}
		for _, hv := range resp.GetOkResponse().GetResponseHeadersToAdd() {
			added.Set(hv.GetHeader().GetKey(), hv.GetHeader().GetValue())
		}
		return outcome{allowed: true, status: http.StatusOK, header: added}
	}
	d := resp.GetDeniedResponse()
	require.NotNil(t, d)
	o := outcome{reason: reasonOf([]byte(d.GetBody())), status: int(d.GetStatus().GetCode()), body: d.GetBody()}
	grpcStatus := http.Header{}
	for _, hv := range d.GetHeaders() {
		grpcStatus.Set(hv.GetHeader().GetKey(), hv.GetHeader().GetValue())
	}
	o.decision, o.header = grpcStatus.Get("X-Capgate-Decision-Id"), grpcStatus
	if grpcStatus.Get("grpc-status") != "" {
		o.reason, o.status = grpcReason(t, grpcStatus)
	}
	return o
}

// gatewayGRPC sends a gRPC request to the gateway over h2c (HTTP/2 with prior knowledge) and
// reads the answer: admitted when the call ends with grpc-status 0.
func (e *env) gatewayGRPC(t *testing.T, method, target string, h http.Header, body []byte) outcome {
	t.Helper()
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &h2c}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+target, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header = h
	req.Header.Set("TE", "trailers")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	require.NoError(t, err)
	st := resp.Header.Clone() // trailers-only: the status is in the headers
	for k, vs := range resp.Trailer {
		st[k] = vs
	}
	o := outcome{status: http.StatusOK, body: string(b), decision: resp.Header.Get("X-Capgate-Decision-Id"), header: st}
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, st.Get("grpc-status"), "a gRPC answer without grpc-status")
	if st.Get("grpc-status") == "0" {
		o.allowed = true
		return o
	}
	o.reason, o.status = grpcReason(t, st)
	return o
}

// grpcReason reads a gRPC error: the A2A ErrorInfo reason in grpc-status-details-bin, and the
// gRPC status code (which must agree with the details').
func grpcReason(t *testing.T, h http.Header) (string, int) {
	t.Helper()
	code, err := strconv.Atoi(h.Get("grpc-status"))
	require.NoError(t, err)
	raw := h.Get("grpc-status-details-bin")
	require.NotEmpty(t, raw, "a gRPC error without google.rpc.Status details")
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(raw, "="))
	require.NoError(t, err)
	var st spb.Status
	require.NoError(t, proto.Unmarshal(b, &st))
	require.Equal(t, int32(code), st.GetCode(), "grpc-status and its details disagree")
	for _, d := range st.GetDetails() {
		var info errdetails.ErrorInfo
		if d.UnmarshalTo(&info) == nil {
			return info.GetReason(), code
		}
	}
	return fmt.Sprintf("grpc-status %d", code), code
}

// reasonOf reads the A2A error reason of a JSON-RPC or HTTP+JSON answer, or of the first error
// event of a stream; "" when the answer is not an error.
func reasonOf(body []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	var docs [][]byte
	sse := false
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
			sse = true
			docs = append(docs, bytes.Clone(bytes.TrimSpace(d)))
		}
	}
	if !sse {
		docs = [][]byte{body}
	}
	for _, d := range docs {
		var env struct {
			Error *struct {
				Code    int                       `json:"code"`
				Data    testutil.ErrorData        `json:"data"` // a list in 1.0, one object in 0.3
				Details []struct{ Reason string } `json:"details"`
			} `json:"error"`
		}
		if json.Unmarshal(d, &env) != nil || env.Error == nil {
			continue
		}
		for _, i := range env.Error.Data {
			if i.Reason != "" {
				return i.Reason
			}
		}
		for _, i := range env.Error.Details {
			if i.Reason != "" {
				return i.Reason
			}
		}
		return fmt.Sprintf("code %d", env.Error.Code)
	}
	return ""
}

// forwarded reports whether the gateway called a handler for a decision: the audit stream has a
// line for every handler invocation, with its decision id.
func (e *env) forwarded(decision string) bool {
	for _, l := range e.srv.Audit.Lines() {
		if strings.Contains(l, `"decision_id":"`+decision+`"`) {
			return true
		}
	}
	return false
}
