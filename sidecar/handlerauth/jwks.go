package handlerauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
)

// MaxJWKSBytes is the largest key set read.
const MaxJWKSBytes = 1 << 20

const minRSABits = 2048

// jwk is one usable verification key.
type jwk struct {
	key any // *ecdsa.PublicKey or *rsa.PublicKey
	alg string
}

func (k jwk) allows(alg string) bool { return k.alg == alg }

// keySet maps kid to key.
type keySet map[string]jwk

type rawJWK struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	N   string `json:"n"`
	E   string `json:"e"`
}

// parseJWKS reads the keys usable for ES256 (EC P-256) and RS256 (RSA of at
// least 2048 bits) that carry a kid; other keys are skipped. A set without a
// usable key is an error.
func parseJWKS(data []byte) (keySet, error) {
	var doc struct {
		Keys []rawJWK `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("JWKS is not valid JSON: %w", err)
	}
	set := keySet{}
	for _, r := range doc.Keys {
		if r.Kid == "" || (r.Use != "" && r.Use != "sig") {
			continue
		}
		k, err := r.key()
		if err != nil {
			continue
		}
		if _, dup := set[r.Kid]; dup {
			return nil, fmt.Errorf("JWKS has two keys with kid %q", r.Kid)
		}
		set[r.Kid] = k
	}
	if len(set) == 0 {
		return nil, errors.New("JWKS has no usable ES256 or RS256 key")
	}
	return set, nil
}

func (r rawJWK) key() (jwk, error) {
	switch r.Kty {
	case "EC":
		if r.Crv != "P-256" || (r.Alg != "" && r.Alg != "ES256") {
			return jwk{}, errors.New("unsupported EC key")
		}
		x, err1 := base64.RawURLEncoding.DecodeString(r.X)
		y, err2 := base64.RawURLEncoding.DecodeString(r.Y)
		if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			return jwk{}, errors.New("malformed EC key")
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return jwk{}, err
		}
		return jwk{key: pub, alg: "ES256"}, nil
	case "RSA":
		if r.Alg != "" && r.Alg != "RS256" {
			return jwk{}, errors.New("unsupported RSA key")
		}
		n, err1 := base64.RawURLEncoding.DecodeString(r.N)
		e, err2 := base64.RawURLEncoding.DecodeString(r.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			return jwk{}, errors.New("malformed RSA key")
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < minRSABits || pub.E < 3 || pub.E%2 == 0 {
			return jwk{}, errors.New("weak RSA key")
		}
		return jwk{key: pub, alg: "RS256"}, nil
	default:
		return jwk{}, errors.New("unsupported key type")
	}
}

// fetch gets and parses the key set at v.jwksURL.
func (v *Verifier) fetch(ctx context.Context) (keySet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.jwksURL, nil)
	if err != nil {
		return nil, fmt.Errorf("JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get JWKS: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get JWKS: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read JWKS: %w", err)
	}
	if len(body) > MaxJWKSBytes {
		return nil, errors.New("JWKS larger than 1 MiB")
	}
	return parseJWKS(body)
}
