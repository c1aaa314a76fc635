package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/capgate/capgate/sidecar/jwks"

	"github.com/golang-jwt/jwt/v5"
)

// LoadSigningKey parses a PEM private key (PKCS#8 "PRIVATE KEY", SEC 1
// "EC PRIVATE KEY" or PKCS#1 "RSA PRIVATE KEY") and returns it with its JWS
// algorithm: RSA (at least 2048 bits) → RS256, ECDSA P-256 → ES256. Other
// key types, curves and encrypted keys are refused.
func LoadSigningKey(pemBytes []byte) (crypto.Signer, string, error) {
	rest := pemBytes
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, "", errors.New("signing key: no PEM private key found")
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "EC PARAMETERS": // openssl ecparam -genkey writes this first
			continue
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, "", errors.New("signing key: encrypted keys are not supported")
		default:
			return nil, "", fmt.Errorf("signing key: unsupported PEM block %q", block.Type)
		}
		if err != nil {
			return nil, "", fmt.Errorf("signing key: parse %s: %w", block.Type, err)
		}
		return signerAlg(key)
	}
}

func signerAlg(key any) (crypto.Signer, string, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if k == nil || k.N == nil {
			return nil, "", errors.New("signing key: nil RSA key")
		}
		if k.N.BitLen() < jwks.MinRSABits {
			return nil, "", fmt.Errorf("signing key: RSA key of %d bits (need at least %d)", k.N.BitLen(), jwks.MinRSABits)
		}
		return k, "RS256", nil
	case *ecdsa.PrivateKey:
		if k == nil || k.Curve == nil {
			return nil, "", errors.New("signing key: nil ECDSA key")
		}
		if k.Curve != elliptic.P256() {
			return nil, "", fmt.Errorf("signing key: ECDSA curve %s not supported (need P-256)", k.Curve.Params().Name)
		}
		return k, "ES256", nil
	}
	return nil, "", fmt.Errorf("signing key: unsupported key type %T", key)
}

// SignDemoToken signs claims as they are with key (RS256 with an RSA key,
// ES256 with a P-256 key), setting kid in the header when it is not empty.
// `capgate token` uses it to mint demo tokens from the demo keys.
func SignDemoToken(key crypto.Signer, alg, kid string, claims map[string]any) (string, error) {
	_, want, err := signerAlg(key)
	if err != nil {
		return "", err
	}
	if alg != want {
		return "", fmt.Errorf("sign: algorithm %q does not fit the key (want %s)", alg, want)
	}
	if claims == nil {
		return "", errors.New("sign: no claims")
	}
	t := jwt.NewWithClaims(jwt.GetSigningMethod(alg), jwt.MapClaims(claims))
	if kid != "" {
		t.Header["kid"] = kid
	}
	s, err := t.SignedString(key)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return s, nil
}
