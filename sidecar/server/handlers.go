package server

import (
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/delegation"
	"github.com/capgate/capgate/sidecar/dispatch"
	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/handler/echo"
	"github.com/capgate/capgate/sidecar/handlerauth"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tracing"
)

// tokens adapts the delegation issuer to the dispatcher: each handler call
// gets a credential for this caller and this capability only.
type tokens struct{ issuer delegation.Issuer }

var _ dispatch.Tokens = tokens{}

func (t tokens) HandlerToken(ctx context.Context, g dispatch.Grant) (string, error) {
	return t.issuer.Token(ctx,
		delegation.Subject{Principal: g.Call.Principal, Authorization: g.Call.Header.Get("Authorization"), DecisionID: g.Call.DecisionID},
		delegation.Target{Capability: g.Capability.ID, Handler: g.Capability.Handler, Scopes: g.Scopes, Limits: g.Limits})
}

// newInvoker builds the handler invoker. The builtin echo verifies capgate's
// own tokens exactly as an upstream handler would (handlerauth, audience =
// the handler names mapped to builtin:echo).
func newInvoker(ctx context.Context, cfg *config.Config, m *identity.Minter, log *zap.Logger, tp *tracing.Provider) (*handler.Invoker, error) {
	var echoNames []string
	for name, target := range cfg.Handlers {
		if target == handler.BuiltinPrefix+"echo" {
			echoNames = append(echoNames, name)
		}
	}
	slices.Sort(echoNames)
	opts := []handler.Option{handler.WithLogger(log.Named("handler")), handler.WithTimeout(cfg.Limits.HandlerTimeout),
		handler.WithStreamIdleTimeout(cfg.Limits.StreamIdleTimeout), handler.WithRoundTripper(tp.Transport)}
	if len(echoNames) > 0 {
		v, err := handlerauth.NewVerifier(ctx, handlerauth.Config{Issuer: m.Issuer(), Audiences: echoNames, JWKS: m.JWKS()})
		if err != nil {
			return nil, fmt.Errorf("builtin echo: %w", err)
		}
		opts = append(opts, handler.WithBuiltin("echo", echo.New(v.Verify, echo.WithLogger(log.Named("echo")))))
	}
	if len(cfg.HandlerBindings) > 0 {
		bindings := map[string]protocol.Binding{}
		for name, b := range cfg.HandlerBindings {
			pb, ok := handler.ParseBinding(b)
			if !ok {
				return nil, fmt.Errorf("handlers.%s.binding: %q is not a binding", name, b)
			}
			bindings[name] = pb
		}
		opts = append(opts, handler.WithBindings(bindings))
	}
	if len(cfg.HandlerExposeErrors) > 0 {
		opts = append(opts, handler.WithExposedErrors(cfg.HandlerExposeErrors))
	}
	inv, err := handler.NewInvoker(cfg.Handlers, opts...)
	if err != nil {
		return nil, fmt.Errorf("handlers: %w", err)
	}
	return inv, nil
}
