package testutil

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/sidecar/identity"
)

// Demo key ids of the finance example (manifests/finance/keys).
const (
	KeyRS256 = "demo-rs256"
	KeyES256 = "demo-es256"
)

// Partner is the finance example's partner caller: tenant acme, recon.run
// (it may reconcile invoices). The suites share it, and OtherPartner, as
// their callers.
func Partner() TokenOptions {
	return TokenOptions{Subject: "partner-1", Tenant: "acme", Scopes: []string{"recon.run"}}
}

// OtherPartner has Partner's tenant and scopes but another subject: it may
// call the same capabilities and must never reach Partner's tasks.
func OtherPartner() TokenOptions {
	return TokenOptions{Subject: "partner-2", Tenant: "acme", Scopes: []string{"recon.run"}}
}

// PublicCaller is Partner without recon.run: public skills only.
func PublicCaller() TokenOptions {
	return TokenOptions{Subject: "partner-1", Tenant: "acme", Scopes: []string{"invoices.read"}}
}

// TokenOptions describe a token. The zero value is a valid RS256 token of
// the finance example's issuer and audience for subject "partner-1", valid
// for an hour, without scopes or tenant.
type TokenOptions struct {
	Subject string   // default "partner-1"
	Scopes  []string // the space-separated "scope" claim when not empty
	Tenant  string   // the "tenant" claim when not empty
	// Issuer and Audience default to the finance example's.
	Issuer, Audience string
	// TTL is the lifetime from now (default 1h); a negative TTL makes a token
	// that expired -TTL ago.
	TTL time.Duration
	// ES256 signs with the demo P-256 key instead of the demo RSA key.
	ES256 bool
	// Key and KeyID sign with another key (for example UnknownKey); Key must
	// be an RSA or P-256 key.
	Key   crypto.Signer
	KeyID string
	// Claims are extra claims, set last (they may override the others).
	Claims map[string]any
}

// Token mints a JWT the finance example's verifier accepts (unless the
// options make it wrong on purpose).
func Token(t testing.TB, o TokenOptions) string {
	t.Helper()
	now := time.Now()
	ttl := o.TTL
	if ttl == 0 {
		ttl = time.Hour
	}
	iat := now
	if ttl < 0 {
		iat = now.Add(2 * ttl) // issued before it expired
	}
	claims := map[string]any{
		"iss": or(o.Issuer, Issuer),
		"aud": or(o.Audience, Audience),
		"sub": or(o.Subject, "partner-1"),
		"iat": iat.Unix(),
		"nbf": iat.Unix(),
		"exp": now.Add(ttl).Unix(),
	}
	if len(o.Scopes) > 0 {
		claims[ScopesClaim] = strings.Join(o.Scopes, " ")
	}
	if o.Tenant != "" {
		claims[TenantClaim] = o.Tenant
	}
	for k, v := range o.Claims {
		claims[k] = v
	}
	key, kid := o.Key, o.KeyID
	if key == nil {
		file, id := "finance/keys/demo-rs256.key.pem", KeyRS256
		if o.ES256 {
			file, id = "finance/keys/demo-es256.key.pem", KeyES256
		}
		pemBytes, err := manifests.FS.ReadFile(file)
		require.NoError(t, err)
		key, _, err = identity.LoadSigningKey(pemBytes)
		require.NoError(t, err)
		if kid == "" {
			kid = id
		}
	}
	alg := "RS256"
	if _, isRSA := key.Public().(*rsa.PublicKey); !isRSA {
		alg = "ES256"
	}
	tok, err := identity.SignDemoToken(key, alg, kid, claims)
	require.NoError(t, err)
	return tok
}

// UnknownKey returns a fresh RSA key no JWKS of the example holds.
func UnknownKey(t testing.TB) crypto.Signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return k
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
