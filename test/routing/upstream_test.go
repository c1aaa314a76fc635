package routing_test

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/handler/echo"
	"github.com/capgate/capgate/sidecar/handlerauth"
	"github.com/capgate/capgate/test/testutil"
)

// upstream is a real a2a-go v2 server standing in for a skill handler
// outside capgate. It verifies capgate's handler tokens with handlerauth
// against the keys capgate publishes, records every request's headers, and
// answers each message with an artifact reporting the verified claims (the
// echo's Report), then a status update to final.
type upstream struct {
	URL string
	// final is the state each turn ends in; a non-terminal state
	// (input-required) lets the caller continue the task.
	final a2a.TaskState
	// pace, when set, is received from before every event after the first,
	// so a test decides when each event is produced.
	pace chan struct{}

	verifier atomic.Pointer[handlerauth.Verifier]
	mu       sync.Mutex
	headers  []http.Header
	claims   []handlerauth.Claims
}

func newUpstream(t testing.TB, final a2a.TaskState) *upstream {
	t.Helper()
	u := &upstream{final: final}
	auth := handlerauth.VerifyFunc(func(ctx context.Context, bearer string) (handlerauth.Claims, error) {
		v := u.verifier.Load()
		if v == nil {
			return handlerauth.Claims{}, errors.New("upstream: capgate's keys are not known yet")
		}
		c, err := v.Verify(ctx, bearer)
		if err == nil {
			u.mu.Lock()
			u.claims = append(u.claims, c)
			u.mu.Unlock()
		}
		return c, err
	})
	rh := a2asrv.NewHandler(reporter{u}, a2asrv.WithCallInterceptors(handlerauth.NewServerInterceptor(auth)))
	h := a2asrv.NewJSONRPCHandler(rh)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.headers = append(u.headers, r.Header.Clone())
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.URL = srv.URL + "/"
	return u
}

// trust makes u accept the tokens srv issues for the handler names.
func (u *upstream) trust(t testing.TB, srv *testutil.Server, handlers ...string) {
	t.Helper()
	v, err := handlerauth.NewVerifier(t.Context(), handlerauth.Config{
		Issuer:    srv.Deployment.Config.Identity.Issuer,
		Audiences: handlers,
		JWKSURL:   srv.Admin("/.well-known/jwks.json"),
	})
	require.NoError(t, err)
	u.verifier.Store(v)
}

// seen returns the headers and verified claims of the requests so far.
func (u *upstream) seen() ([]http.Header, []handlerauth.Claims) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.headers...), append([]handlerauth.Claims(nil), u.claims...)
}

type reporter struct{ u *upstream }

var _ a2asrv.AgentExecutor = reporter{}

func (r reporter) Execute(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		c, ok := handlerauth.FromContext(ctx)
		if !ok {
			yield(nil, a2a.ErrUnauthenticated)
			return
		}
		wait := func() bool {
			if r.u.pace == nil {
				return true
			}
			select {
			case <-r.u.pace:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if execCtx.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) {
				return
			}
		}
		rep := echo.ReportOf(c, execCtx.Message)
		art := a2a.NewArtifactEvent(execCtx, a2a.NewDataPart(map[string]any{
			"capability": rep.Capability, "handler": rep.Handler, "principal": rep.Principal,
			"tenant": rep.Tenant, "scopes": rep.Scopes, "mediaTypes": rep.MediaTypes,
		}))
		if !wait() || !yield(art, nil) {
			return
		}
		if !wait() {
			return
		}
		yield(a2a.NewStatusUpdateEvent(execCtx, r.u.final, nil), nil)
	}
}

func (reporter) Cancel(_ context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCanceled, nil), nil)
	}
}
