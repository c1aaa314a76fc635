package handlerauth

import (
	"context"

	"github.com/capgate/capgate/sidecar/jwks"
)

// MaxJWKSBytes is the largest key set read.
const MaxJWKSBytes = jwks.MaxBytes

// The key set is parsed by sidecar/jwks, the same strict parser capgate
// uses for its callers' issuers (standard library only, no OPA).
type (
	keySet = jwks.Set
	jwk    = jwks.Key
)

// parseJWKS reads the usable verification keys of a JWKS document; the
// token's algorithm is restricted further by the parser's allow-list.
func parseJWKS(data []byte) (keySet, error) {
	set, _, err := jwks.Parse(data)
	return set, err
}

// fetch gets and parses the key set at v.jwksURL.
func (v *Verifier) fetch(ctx context.Context) (keySet, error) {
	body, err := jwks.Fetch(ctx, v.client, v.jwksURL)
	if err != nil {
		return nil, err
	}
	return parseJWKS(body)
}
