package delegation

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/tracing"
)

// Router sends each handler to its issuer: token exchange for the listed
// handlers (all of them when the list is empty), self-issued tokens
// otherwise.
type Router struct {
	self     *SelfIssued
	ex       *Exchange
	handlers map[string]bool // nil: every handler is exchanged
}

// NewRouter returns the Issuer for a deployment. With ex nil every token is
// self-issued.
func NewRouter(self *SelfIssued, ex *Exchange, handlers []string) Issuer {
	r := &Router{self: self, ex: ex}
	if len(handlers) > 0 {
		r.handlers = make(map[string]bool, len(handlers))
		for _, h := range handlers {
			r.handlers[h] = true
		}
	}
	return r
}

// AnonymousSubject is the subject of handler tokens issued for an
// unauthenticated caller.
const AnonymousSubject = "anonymous"

// Token issues the handler token. An anonymous caller (who reaches a
// handler only on a public capability that needs no scopes, with
// auth.anonymous_public) gets a self-issued token for the subject
// "anonymous" with no scopes — never an exchanged one (there is no caller
// token to exchange) and never the agent's own credential — so handlers
// verify every call the same way and can attribute it.
func (r *Router) Token(ctx context.Context, s Subject, t Target) (tok string, err error) {
	kind := "self_issued"
	if s.Principal.Authenticated && r.ex != nil && (r.handlers == nil || r.handlers[t.Handler]) {
		kind = "exchange"
	}
	ctx, span := tracing.Child(ctx, "capgate.token", attribute.String("capgate.token.kind", kind),
		attribute.String("capgate.handler", t.Handler), attribute.String("capgate.capability", t.Capability))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, "no token for the handler")
		}
		span.End()
	}()
	return r.token(ctx, s, t)
}

func (r *Router) token(ctx context.Context, s Subject, t Target) (string, error) {
	if !s.Principal.Authenticated {
		if r.self == nil {
			return "", fmt.Errorf("self-issued token for handler %s: %w", t.Handler, ErrAnonymous)
		}
		anon := Subject{Principal: identity.Principal{Authenticated: true, Subject: AnonymousSubject}, DecisionID: s.DecisionID}
		return r.self.Token(ctx, anon, Target{Capability: t.Capability, Handler: t.Handler, Limits: t.Limits})
	}
	if r.ex != nil && (r.handlers == nil || r.handlers[t.Handler]) {
		return r.ex.Token(ctx, s, t)
	}
	if r.self == nil {
		return "", fmt.Errorf("no token issuer for handler %s", t.Handler)
	}
	return r.self.Token(ctx, s, t)
}

// FromConfig builds the deployment's Issuer from cfg: the Minter (whose
// JWKS the gateway publishes), self-issued tokens, and token exchange when
// identity.token_exchange is set. opts configure the Exchange.
func FromConfig(ctx context.Context, cfg *config.Config, log *zap.Logger, opts ...ExchangeOption) (Issuer, *identity.Minter, error) {
	m, err := NewMinter(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	self := NewSelfIssued(m, cfg.Identity, cfg.Auth)
	x := cfg.Identity.TokenExchange
	if x == nil {
		return NewRouter(self, nil, nil), m, nil
	}
	secret, err := ReadClientSecret(cfg)
	if err != nil {
		return nil, nil, err
	}
	ex, err := NewExchange(ctx, *x, secret, append([]ExchangeOption{WithLogger(log)}, opts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("identity.token_exchange: %w", err)
	}
	return NewRouter(self, ex, x.Handlers), m, nil
}
