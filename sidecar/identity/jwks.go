package identity

import (
	"crypto"

	"github.com/capgate/capgate/sidecar/jwks"
)

// The JWKS parser lives in sidecar/jwks, shared with sidecar/handlerauth;
// these names keep the verifier's code short.
type (
	keySet     = jwks.Set
	verifyKey  = jwks.Key
	skippedKey = jwks.Skipped
	// PublicJWK is a public key to publish in a JWKS (see MarshalJWKS).
	PublicJWK = jwks.PublicJWK
)

func parseJWKS(data []byte) (keySet, []skippedKey, error) { return jwks.Parse(data) }

// MarshalJWKS renders public keys as a JWKS document.
func MarshalJWKS(keys ...PublicJWK) ([]byte, error) { return jwks.MarshalJWKS(keys...) }

// Thumbprint is the RFC 7638 JWK thumbprint of a public key.
func Thumbprint(pub crypto.PublicKey) (string, error) { return jwks.Thumbprint(pub) }
