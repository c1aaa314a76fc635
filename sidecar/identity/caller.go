package identity

import "github.com/capgate/capgate/policy/engine"

// Caller is the principal as the policy sees it. Preview opt-in is decided
// by the policy from scopes and tenant, not here.
func (p Principal) Caller() engine.Caller {
	if !p.Authenticated {
		return engine.Caller{}
	}
	return engine.Caller{Authenticated: true, Issuer: p.Issuer, Subject: p.Subject, Tenant: p.Tenant, Scopes: p.Scopes}
}
