package delegation

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/identity"
)

// maxPriorActDepth bounds the caller's own act chain: the verifier follows
// 32 levels and the handler token adds one, so a deeper chain would reach
// the handler truncated. It is refused instead.
const maxPriorActDepth = 31

// SelfIssued mints capgate's own handler tokens: sub = the caller, tenant,
// scope = the narrowed scopes, aud = the handler, act = the agent over the
// caller token's own act chain, capability, decision_id, limits (when the
// capability has any), jti, and a TTL of at most 60s. It is safe for concurrent use.
type SelfIssued struct {
	m    *identity.Minter
	id   config.Identity
	auth config.Auth
}

// NewSelfIssued returns an issuer minting with m for the identity settings
// id and the claim names of auth.
func NewSelfIssued(m *identity.Minter, id config.Identity, auth config.Auth) *SelfIssued {
	return &SelfIssued{m: m, id: id, auth: auth}
}

// Token mints the handler token for s and t.
func (si *SelfIssued) Token(ctx context.Context, s Subject, t Target) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if si == nil || si.m == nil {
		return "", errors.New("self-issued token: no minter")
	}
	p := s.Principal
	if !p.Authenticated || p.Subject == "" {
		return "", fmt.Errorf("self-issued token for handler %s: %w", t.Handler, ErrAnonymous)
	}
	if t.Handler == "" {
		return "", errors.New("self-issued token: no handler (audience)")
	}
	if si.id.AgentID == "" {
		return "", errors.New("self-issued token: identity.agent_id is empty")
	}
	prior, err := priorAct(p)
	if err != nil {
		return "", fmt.Errorf("self-issued token for handler %s: %w", t.Handler, err)
	}
	var extra map[string]any
	if len(t.Limits) > 0 {
		extra = map[string]any{identity.ClaimLimits: t.Limits}
	}
	tok, err := si.m.Mint(identity.MintClaims{
		Subject:     p.Subject,
		Tenant:      p.Tenant,
		Audience:    t.Handler,
		Scopes:      Narrow(p.Scopes, t.Scopes),
		Capability:  t.Capability,
		DecisionID:  s.DecisionID,
		Actor:       si.id.AgentID,
		PriorAct:    prior,
		TTL:         si.id.TTL,
		TenantClaim: si.auth.TenantClaim,
		ScopesClaim: si.auth.ScopesClaim,
		Extra:       extra,
	})
	if err != nil {
		return "", fmt.Errorf("self-issued token for handler %s: %w", t.Handler, err)
	}
	return tok, nil
}

// priorAct rebuilds the caller token's act chain with only its sub (and
// iss) members, as far as the verifier followed it (Principal.Actor and
// ActorIssuers), so the handler sees [agent] + Principal.Actor.
func priorAct(p identity.Principal) (map[string]any, error) {
	if len(p.Actor) > maxPriorActDepth {
		return nil, fmt.Errorf("the caller's actor chain is deeper than %d", maxPriorActDepth)
	}
	var chain []map[string]any
	for i, sub := range p.Actor {
		if sub == "" {
			break
		}
		lvl := map[string]any{"sub": sub}
		if i < len(p.ActorIssuers) && p.ActorIssuers[i] != "" {
			lvl["iss"] = p.ActorIssuers[i]
		}
		chain = append(chain, lvl)
	}
	if len(chain) == 0 {
		return nil, nil
	}
	for i := len(chain) - 2; i >= 0; i-- {
		chain[i]["act"] = chain[i+1]
	}
	return chain[0], nil
}

// EphemeralKeyWarning is logged when no signing key is configured.
const EphemeralKeyWarning = "identity.signing_key_file not set: generated an ephemeral signing key; handler tokens will not verify after a restart"

// NewMinter returns the Minter for cfg.Identity: its signing_key_file (a
// P-256 PEM key, read relative to the config file), or, when none is set, a
// generated key, with a warning logged to log.
func NewMinter(cfg *config.Config, log *zap.Logger, opts ...identity.MinterOption) (*identity.Minter, error) {
	if cfg == nil {
		return nil, errors.New("minter: no config")
	}
	if log == nil {
		log = zap.NewNop()
	}
	id := cfg.Identity
	if id.SigningKeyFile == "" {
		m, err := identity.GenerateMinter(id.Issuer, opts...)
		if err != nil {
			return nil, err
		}
		log.Named("delegation").Warn(EphemeralKeyWarning, zap.String("kid", m.KeyID()))
		return m, nil
	}
	pemBytes, err := cfg.ReadFile(id.SigningKeyFile)
	if err != nil {
		return nil, fmt.Errorf("identity.signing_key_file: %w", err)
	}
	key, _, err := identity.LoadSigningKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("identity.signing_key_file: %w", err)
	}
	m, err := identity.NewMinter(id.Issuer, key, opts...)
	if err != nil {
		return nil, fmt.Errorf("identity.signing_key_file: %w", err)
	}
	return m, nil
}
