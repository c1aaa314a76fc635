package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/handler/echo"
	"github.com/capgate/capgate/sidecar/handlerauth"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/test/testutil"
)

// bindingUpstream serves the echo (a2a-go v2's request handler, verifying
// capgate's handler tokens for handler) over one binding on 127.0.0.1, signs
// d's handler tokens with its key, and points handler at it with that
// binding. calls counts the requests it served.
func bindingUpstream(t *testing.T, d *deployment.Deployment, handler, binding string) *sync.Map {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "capgate-signing.pem")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	d.Config.Identity.SigningKeyFile = keyFile
	minter, err := identity.NewMinter(d.Config.Identity.Issuer, key)
	require.NoError(t, err)
	v, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{Issuer: minter.Issuer(), Audience: handler, JWKS: minter.JWKS()})
	require.NoError(t, err)
	rh := echo.NewRequestHandler(v.Verify)

	var seen sync.Map // binding → true once a call arrived over it
	var url string
	switch binding {
	case config.BindingGRPC:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
			seen.Store(binding, true)
			return next(ctx, req)
		}), grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
			seen.Store(binding, true)
			return next(srv, ss)
		}))
		grpcv1.NewHandler(rh).RegisterWith(s)
		go func() { _ = s.Serve(ln) }()
		t.Cleanup(s.Stop)
		url = "http://" + ln.Addr().String()
	case config.BindingHTTPJSON:
		h := a2asrv.NewRESTHandler(rh)
		srv := httptest.NewServer(http.StripPrefix("/a2a", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Store(binding, true)
			h.ServeHTTP(w, r)
		})))
		t.Cleanup(srv.Close)
		url = srv.URL + "/a2a"
	default:
		h := echo.New(v.Verify)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Store(binding, true)
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		url = srv.URL + "/"
	}
	d.Config.Handlers[handler] = url
	d.Config.HandlerBindings = map[string]string{handler: binding}
	return &seen
}

// unsupported checks that err is UnsupportedOperation as a2a-go's client of caller's binding
// reads it. Over gRPC capgate writes the A2A 1.0 mapping (UNIMPLEMENTED, reason
// UNSUPPORTED_OPERATION), which a2a-go v2.3.1's client takes as an internal error (it pairs the
// reason with FAILED_PRECONDITION only); the reason is checked in the gateway's gRPC tests.
func unsupported(t *testing.T, caller a2a.TransportProtocol, err error) {
	t.Helper()
	require.Error(t, err)
	if caller != a2a.TransportProtocolGRPC {
		require.ErrorIs(t, err, a2a.ErrUnsupportedOperation)
	}
}

// TestHandlerBindings: capgate fronts an a2a-go v2 upstream over each of the
// handler's bindings, and an a2a-go v2 client calls capgate over each of its
// own (3 × 3). The upstream verifies capgate's downscoped token and reports
// its claims: the caller, the tenant, the capability and the narrowed scopes.
func TestHandlerBindings(t *testing.T) {
	const handler = "recon.v3.reconcile"
	for _, upstream := range []string{config.BindingJSONRPC, config.BindingHTTPJSON, config.BindingGRPC} {
		t.Run("handler over "+upstream, func(t *testing.T) {
			d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
			seen := bindingUpstream(t, d, handler, upstream)
			srv := testutil.Start(t, d)
			for _, caller := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC} {
				t.Run("caller over "+string(caller), func(t *testing.T) {
					c := srv.Client(t, caller, testutil.Bearer(testutil.Token(t, grpcCaller)))
					res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: reconcileMessage()})
					require.NoError(t, err)
					task, ok := res.(*a2a.Task)
					require.True(t, ok, "want a task, got %T", res)
					r := echoReport(t, task)
					require.Equal(t, "reconcile-invoice", r.Capability)
					require.Equal(t, handler, r.Handler)
					require.Equal(t, "partner-1", r.Principal)
					require.Equal(t, "acme", r.Tenant)
					require.Equal(t, []string{"recon.run"}, r.Scopes)
					require.Equal(t, []string{"application/pdf", "text/plain"}, r.MediaTypes)
					_, ok = seen.Load(upstream)
					require.True(t, ok, "the handler was not called over %s", upstream)

					got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
					require.NoError(t, err)
					require.Equal(t, task.ID, got.ID)
					require.Equal(t, a2a.TaskStateCompleted, got.Status.State)

					// The handler's refusal reaches the caller as its code with capgate's message.
					_, err = c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID})
					require.ErrorIs(t, err, a2a.ErrTaskNotCancelable)
					require.Contains(t, err.Error(), "the task cannot be canceled in its current state (decision ")

					// A reply to the completed task, unary and streamed: capgate's
					// UnsupportedOperation (A2A 1.0 §3.1.1), never a2a-go's executor internals.
					reply := reconcileMessage()
					reply.TaskID = task.ID
					_, err = c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: reply})
					unsupported(t, caller, err)
					require.Contains(t, err.Error(), "the task is in a terminal state (TASK_STATE_COMPLETED) and accepts no further messages")
					require.NotContains(t, err.Error(), "exec")
					for _, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: reply}) {
						if caller == a2a.TransportProtocolJSONRPC {
							// A plain JSON-RPC error with HTTP 400 before any stream, which
							// a2a-go's JSON-RPC stream reader reports by its status only
							// (docs/interop.md, "Stream errors have one form per caller binding").
							require.ErrorContains(t, err, "400 Bad Request")
							break
						}
						unsupported(t, caller, err)
						require.Contains(t, err.Error(), "terminal state")
						require.NotContains(t, err.Error(), "exec")
						break
					}

					var last *a2a.TaskStatusUpdateEvent
					for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: reconcileMessage()}) {
						require.NoError(t, err)
						if s, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
							last = s
						}
					}
					require.NotNil(t, last)
					require.Equal(t, a2a.TaskStateCompleted, last.Status.State)
				})
			}
		})
	}
}

// TestUnknownMembersAnyHandler: a member the A2A request message does not define is refused at
// admission (InvalidParams, nothing forwarded), the same whatever binding the handler is called
// over; the same request without it is served (issue 24: a gRPC handler refused what a JSON-RPC
// one was sent).
func TestUnknownMembersAnyHandler(t *testing.T) {
	const handler = "recon.v3.reconcile"
	const msg = `{"messageId":"m-1","role":"ROLE_USER","parts":[{"raw":"JVBERi0xLjQK","mediaType":"application/pdf"},{"text":"reconcile this against the PO"}]}`
	for _, upstream := range []string{config.BindingJSONRPC, config.BindingHTTPJSON, config.BindingGRPC} {
		t.Run("handler over "+upstream, func(t *testing.T) {
			d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
			seen := bindingUpstream(t, d, handler, upstream)
			srv := testutil.Start(t, d)
			auth := []string{"A2A-Version", "1.0", "Authorization", "Bearer " + testutil.Token(t, grpcCaller)}
			send := func(caller, params string) *testutil.Response {
				if caller == "JSONRPC" {
					return srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":`+params+`}`, auth...)
				}
				return srv.Do(t, http.MethodPost, "/message:send", params, append([]string{"Content-Type", "application/json"}, auth...)...)
			}
			for _, caller := range []string{"JSONRPC", "HTTP+JSON"} {
				for _, tc := range []struct{ name, params, msg string }{
					{"top-level taskId", `{"taskId":"t-1","message":` + msg + `}`, "taskId is not a field of the A2A 1.0 SendMessageRequest message"},
					{"a 0.3 member in a 1.0 message", `{"message":` + msg[:len(msg)-1] + `,"kind":"message"}}`, "message.kind is not a field of the A2A 1.0 Message message"},
					{"a field in another case", `{"message":` + strings.Replace(msg, "messageId", "MessageId", 1) + `}`, "message.MessageId is not a field of the A2A 1.0 Message message"},
				} {
					t.Run(caller+"/"+tc.name, func(t *testing.T) {
						seen.Delete(upstream)
						r := send(caller, tc.params)
						require.Contains(t, string(r.Body), tc.msg)
						require.Contains(t, string(r.Body), "INVALID_PARAMS")
						_, called := seen.Load(upstream)
						require.False(t, called, "a refused request reached the handler")
					})
				}
				t.Run(caller+"/known members only", func(t *testing.T) {
					seen.Delete(upstream)
					r := send(caller, `{"message":`+msg+`}`)
					require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
					require.NotContains(t, string(r.Body), "error")
					_, called := seen.Load(upstream)
					require.True(t, called)
				})
			}
		})
	}
}
