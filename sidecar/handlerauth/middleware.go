package handlerauth

import (
	"context"
	"errors"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Middleware verifies every request's Authorization header and passes the
// claims to next in the request context (see FromContext). A request that
// fails gets 401 with a JSON body and a Bearer WWW-Authenticate challenge.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return middleware(v, next)
}

func middleware(a Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values := r.Header.Values("Authorization")
		var c Claims
		err := ErrMissingToken
		if len(values) == 1 {
			c, err = a.Verify(r.Context(), values[0])
		} else if len(values) > 1 {
			err = ErrInvalidToken
		}
		if err != nil {
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "no-store")
			if errors.Is(err, ErrMissingToken) {
				h.Set("WWW-Authenticate", "Bearer")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":"unauthenticated","error_description":"a bearer token is required"}` + "\n"))
				return
			}
			h.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_token","error_description":"the bearer token is not valid"}` + "\n"))
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), c)))
	})
}

// NewServerInterceptor returns an a2a-go server interceptor that verifies
// the Authorization service parameter of every call. A call that fails is
// refused with an UNAUTHENTICATED A2A error (JSON-RPC -31401) before the
// handler runs; on success the claims are in the context (FromContext, also
// in the AgentExecutor's context) and CallContext.User is the subject, with
// the tenant and capability as attributes.
func NewServerInterceptor(a Authenticator) a2asrv.CallInterceptor {
	return interceptor{auth: a}
}

type interceptor struct{ auth Authenticator }

func (i interceptor) Before(ctx context.Context, callCtx *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	var values []string
	if callCtx != nil {
		values, _ = callCtx.ServiceParams().Get("Authorization")
	}
	if len(values) != 1 {
		return ctx, nil, a2a.NewError(a2a.ErrUnauthenticated, "authentication required")
	}
	c, err := i.auth.Verify(ctx, values[0])
	if err != nil {
		if errors.Is(err, ErrMissingToken) {
			return ctx, nil, a2a.NewError(a2a.ErrUnauthenticated, "authentication required")
		}
		return ctx, nil, a2a.NewError(a2a.ErrUnauthenticated, "the bearer token is not valid")
	}
	callCtx.User = a2asrv.NewAuthenticatedUser(c.Subject, map[string]any{
		"tenant":     c.Tenant,
		"capability": c.Capability,
	})
	return NewContext(ctx, c), nil, nil
}

func (interceptor) After(context.Context, *a2asrv.CallContext, *a2asrv.Response) error { return nil }
