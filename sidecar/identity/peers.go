package identity

import (
	"slices"

	"github.com/capgate/capgate/policy/config"
)

// MTLSIssuer is the Issuer of every principal mapped from auth.mtls_principals: an mTLS peer
// and a token holder with the same subject are different owners.
const MTLSIssuer = "urn:capgate:mtls"

// PeerPrincipals turns auth.mtls_principals into the principals the peers are: authenticated,
// issued by MTLSIssuer, scopes sorted and deduplicated, the subject defaulting to the peer id.
func PeerPrincipals(auth config.Auth) map[string]Principal {
	m := make(map[string]Principal, len(auth.MTLSPrincipals))
	for peer, c := range auth.MTLSPrincipals {
		p := Principal{Authenticated: true, Subject: c.Subject, Tenant: c.Tenant, Issuer: MTLSIssuer}
		if p.Subject == "" {
			p.Subject = peer
		}
		if len(c.Scopes) > 0 {
			p.Scopes = slices.Clip(slices.Compact(slices.Sorted(slices.Values(c.Scopes))))
		}
		m[peer] = p
	}
	return m
}

// LegacyTaskIssuer is the issuer that owns task bindings written before bindings recorded their
// issuer: the one JWT issuer when exactly one is configured and no mTLS principal is, for then
// no other credential could have written them; "" otherwise (such bindings are owned by nobody).
func LegacyTaskIssuer(auth config.Auth) string {
	if len(auth.Issuers) != 1 || len(auth.MTLSPrincipals) > 0 {
		return ""
	}
	return auth.Issuers[0].Issuer
}
