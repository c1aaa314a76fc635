// Package jwks is capgate's one strict JWKS parser and bounded fetch, shared
// by caller authentication (sidecar/identity) and the verifier handler
// authors import (sidecar/handlerauth). It depends on the standard library
// only.
package jwks

// JWKS handling is a small strict parser written here rather than
// lestrrat-go/jwx's jwk package. We need exactly one thing from a JWKS: the
// public verification keys of three families (RSA, EC P-256/384/521,
// Ed25519), keyed by kid. jwx is only an indirect dependency (through OPA):
// using it would pin our security-relevant parsing to OPA's upgrade cadence,
// and it accepts far more than we want (symmetric "oct" keys, private
// members, x5c/x5u chains, other curves) which we would then have to filter
// out again. The standard library validates the hard parts: EC points are
// checked to be on the curve by ecdsa.ParseUncompressedPublicKey, and we
// bound RSA sizes and exponents ourselves. Everything not understood is
// ignored, never guessed at.

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
)

// Key size bounds for RSA verification keys.
const (
	MinRSABits = 2048 // smallest RSA verification or signing key accepted
	maxRSABits = 8192
)

var b64 = base64.RawURLEncoding.Strict()

// family is the key family an algorithm needs.
type family int

const (
	familyNone family = iota
	familyRSA
	familyEC
	familyOKP
)

// algFamily returns the key family of every asymmetric algorithm capgate
// verifies, and familyNone for anything else. HMAC and "none" are
// deliberately absent: they are never accepted.
func algFamily(alg string) family {
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		return familyRSA
	case "ES256", "ES384", "ES512":
		return familyEC
	case "EdDSA":
		return familyOKP
	}
	return familyNone
}

// algCurve is the one curve each ECDSA algorithm may be used with (RFC 7518 §3.4).
func algCurve(alg string) string {
	switch alg {
	case "ES256":
		return "P-256"
	case "ES384":
		return "P-384"
	case "ES512":
		return "P-521"
	}
	return ""
}

// Key is one usable public key from a JWKS.
type Key struct {
	kid string
	alg string // the JWK's "alg" if it had one; then only this alg may use the key
	fam family
	crv string // EC/OKP curve name
	key crypto.PublicKey
}

// Set maps kid → key. It is immutable once built.
type Set map[string]Key

// rawJWK holds the members we read; private and symmetric members are
// decoded only to detect (and refuse) them.
type rawJWK struct {
	Kty    string   `json:"kty"`
	Use    string   `json:"use"`
	KeyOps []string `json:"key_ops"`
	Alg    string   `json:"alg"`
	Kid    string   `json:"kid"`
	Crv    string   `json:"crv"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	D      string   `json:"d"`
	K      string   `json:"k"`
}

// Skipped says why a JWK was left out of a key set.
type Skipped struct {
	Kid    string
	Reason string
}

// ErrTooLarge is Check's answer for a key set larger than MaxBytes.
var ErrTooLarge = fmt.Errorf("larger than %d bytes", MaxBytes)

// Check reports what is wrong with a key set file as the verifier would
// read it: no larger than MaxBytes, and Parse finds a usable key. It is the
// rule for an issuer's jwks_file (policy/config holds the setting;
// sidecar/settings applies this check to it).
func Check(data []byte) error {
	if len(data) > MaxBytes {
		return ErrTooLarge
	}
	_, _, err := Parse(data)
	return err
}

// Parse parses a JWKS document. Keys that are not usable for signature
// verification (other use, unsupported type, invalid parameters, private
// material, duplicate kid) are left out and reported in skipped; only an
// unparseable document or one with no usable key is an error.
func Parse(data []byte) (Set, []Skipped, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if kind := pemKind(data); kind != "" {
		return nil, nil, fmt.Errorf("parse JWKS: this is a PEM %s, not a JWKS: give the issuer's public keys as a JSON Web Key Set ({\"keys\": [...]}, RFC 7517; capgate keys generate writes one beside its key), never a private key", kind)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("parse JWKS: %w", err)
	}
	if doc.Keys == nil {
		return nil, nil, errors.New("parse JWKS: no \"keys\" array")
	}
	set := make(Set, len(doc.Keys))
	var skipped []Skipped
	dup := map[string]bool{}
	for i, raw := range doc.Keys {
		var j rawJWK
		if err := json.Unmarshal(raw, &j); err != nil {
			skipped = append(skipped, Skipped{Reason: fmt.Sprintf("key %d: %v", i, err)})
			continue
		}
		k, err := j.verifyKey()
		if err != nil {
			skipped = append(skipped, Skipped{Kid: j.Kid, Reason: err.Error()})
			continue
		}
		if _, ok := set[k.kid]; ok || dup[k.kid] {
			// Two keys under one kid: which one a token means is ambiguous,
			// so neither is used.
			delete(set, k.kid)
			dup[k.kid] = true
			skipped = append(skipped, Skipped{Kid: j.Kid, Reason: "duplicate kid"})
			continue
		}
		set[k.kid] = k
	}
	if len(set) == 0 {
		return nil, skipped, errors.New("parse JWKS: no usable signature verification key")
	}
	return set, skipped, nil
}

func (j rawJWK) verifyKey() (Key, error) {
	if j.Kid == "" {
		return Key{}, errors.New("no kid")
	}
	// "use" is optional (RFC 7517 §4.2); when present it must be "sig".
	if j.Use != "" && j.Use != "sig" {
		return Key{}, fmt.Errorf("use %q is not sig", j.Use)
	}
	if j.KeyOps != nil && !slices.Contains(j.KeyOps, "verify") {
		return Key{}, errors.New("key_ops does not include verify")
	}
	if j.D != "" || j.K != "" {
		return Key{}, errors.New("contains private or symmetric key material")
	}
	k := Key{kid: j.Kid, alg: j.Alg, crv: j.Crv}
	switch j.Kty {
	case "RSA":
		k.fam = familyRSA
		pub, err := parseRSA(j.N, j.E)
		if err != nil {
			return Key{}, err
		}
		k.key = pub
	case "EC":
		k.fam = familyEC
		pub, err := parseEC(j.Crv, j.X, j.Y)
		if err != nil {
			return Key{}, err
		}
		k.key = pub
	case "OKP":
		k.fam = familyOKP
		if j.Crv != "Ed25519" {
			return Key{}, fmt.Errorf("OKP curve %q not supported", j.Crv)
		}
		x, err := b64.DecodeString(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return Key{}, errors.New("invalid Ed25519 x")
		}
		k.key = ed25519.PublicKey(x)
	default:
		return Key{}, fmt.Errorf("key type %q not supported", j.Kty)
	}
	if j.Alg != "" && !k.Allows(j.Alg) {
		return Key{}, fmt.Errorf("alg %q does not fit the key", j.Alg)
	}
	return k, nil
}

// allows reports whether alg may be used with this key: the key family and
// (for ECDSA) curve must match the algorithm, and a JWK "alg" pins it.
// Allows reports whether the key may verify a token signed with alg.
func (k Key) Allows(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	if f := algFamily(alg); f == familyNone || f != k.fam {
		return false
	}
	if k.fam == familyEC {
		return algCurve(alg) == k.crv
	}
	return true
}

func parseRSA(n, e string) (*rsa.PublicKey, error) {
	nb, err := b64.DecodeString(n)
	if err != nil || len(nb) == 0 || nb[0] == 0 {
		return nil, errors.New("invalid RSA n")
	}
	eb, err := b64.DecodeString(e)
	if err != nil || len(eb) == 0 || len(eb) > 4 || eb[0] == 0 {
		return nil, errors.New("invalid RSA e")
	}
	mod := new(big.Int).SetBytes(nb)
	if bits := mod.BitLen(); bits < MinRSABits || bits > maxRSABits {
		return nil, fmt.Errorf("RSA key of %d bits (need %d..%d)", bits, MinRSABits, maxRSABits)
	}
	var exp int64
	for _, b := range eb {
		exp = exp<<8 | int64(b)
	}
	if exp < 3 || exp%2 == 0 || exp > 1<<31-1 {
		return nil, errors.New("invalid RSA e")
	}
	return &rsa.PublicKey{N: mod, E: int(exp)}, nil
}

func curveByName(crv string) (elliptic.Curve, int) {
	switch crv {
	case "P-256":
		return elliptic.P256(), 32
	case "P-384":
		return elliptic.P384(), 48
	case "P-521":
		return elliptic.P521(), 66
	}
	return nil, 0
}

func parseEC(crv, x, y string) (*ecdsa.PublicKey, error) {
	curve, size := curveByName(crv)
	if curve == nil {
		return nil, fmt.Errorf("EC curve %q not supported", crv)
	}
	xb, err := b64.DecodeString(x)
	if err != nil || len(xb) != size {
		return nil, errors.New("invalid EC x")
	}
	yb, err := b64.DecodeString(y)
	if err != nil || len(yb) != size {
		return nil, errors.New("invalid EC y")
	}
	point := make([]byte, 0, 1+2*size)
	point = append(point, 4)
	point = append(point, xb...)
	point = append(point, yb...)
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, fmt.Errorf("invalid EC point: %w", err)
	}
	return pub, nil
}

// publicJWK is the JSON form of a public key. Field order is irrelevant
// here; Thumbprint builds its own canonical form.
type publicJWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
}

// jwkMembers returns the required public members of pub (RFC 7638 §3.2).
func jwkMembers(pub crypto.PublicKey) (publicJWK, error) {
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		crv, size := "", 0
		switch p.Curve {
		case elliptic.P256():
			crv, size = "P-256", 32
		case elliptic.P384():
			crv, size = "P-384", 48
		case elliptic.P521():
			crv, size = "P-521", 66
		default:
			return publicJWK{}, errors.New("unsupported EC curve")
		}
		pt, err := p.Bytes()
		if err != nil {
			return publicJWK{}, fmt.Errorf("encode EC key: %w", err)
		}
		return publicJWK{Kty: "EC", Crv: crv, X: b64.EncodeToString(pt[1 : 1+size]), Y: b64.EncodeToString(pt[1+size:])}, nil
	case *rsa.PublicKey:
		e := big.NewInt(int64(p.E))
		return publicJWK{Kty: "RSA", N: b64.EncodeToString(p.N.Bytes()), E: b64.EncodeToString(e.Bytes())}, nil
	case ed25519.PublicKey:
		return publicJWK{Kty: "OKP", Crv: "Ed25519", X: b64.EncodeToString(p)}, nil
	}
	return publicJWK{}, fmt.Errorf("unsupported public key type %T", pub)
}

// Thumbprint returns the RFC 7638 JWK SHA-256 thumbprint of an RSA, EC or
// Ed25519 public key, base64url without padding. capgate uses it as kid.
func Thumbprint(pub crypto.PublicKey) (string, error) {
	m, err := jwkMembers(pub)
	if err != nil {
		return "", err
	}
	// Required members only, lexicographic order, no whitespace. The values
	// are base64url or fixed names, so no JSON escaping is ever needed.
	var buf bytes.Buffer
	switch m.Kty {
	case "EC":
		fmt.Fprintf(&buf, `{"crv":%q,"kty":"EC","x":%q,"y":%q}`, m.Crv, m.X, m.Y)
	case "RSA":
		fmt.Fprintf(&buf, `{"e":%q,"kty":"RSA","n":%q}`, m.E, m.N)
	case "OKP":
		fmt.Fprintf(&buf, `{"crv":%q,"kty":"OKP","x":%q}`, m.Crv, m.X)
	}
	sum := sha256.Sum256(buf.Bytes())
	return b64.EncodeToString(sum[:]), nil
}

// PublicJWK describes one verification key for MarshalJWKS.
type PublicJWK struct {
	Key crypto.PublicKey // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	Alg string           // e.g. "RS256", "ES256"
	Kid string           // empty: the RFC 7638 thumbprint
}

// MarshalJWKS renders public keys as a JWKS document ({"keys":[…]}, every
// key with use "sig"), e.g. for publishing capgate's own keys or writing a
// jwks_file for demo keys.
func MarshalJWKS(keys ...PublicJWK) ([]byte, error) {
	out := struct {
		Keys []publicJWK `json:"keys"`
	}{Keys: make([]publicJWK, 0, len(keys))}
	for _, k := range keys {
		m, err := jwkMembers(k.Key)
		if err != nil {
			return nil, err
		}
		if !(Key{fam: familyOf(m.Kty), crv: m.Crv}).Allows(k.Alg) {
			return nil, fmt.Errorf("alg %q does not fit a %s key", k.Alg, m.Kty)
		}
		m.Kid = k.Kid
		if m.Kid == "" {
			if m.Kid, err = Thumbprint(k.Key); err != nil {
				return nil, err
			}
		}
		m.Use, m.Alg = "sig", k.Alg
		out.Keys = append(out.Keys, m)
	}
	return json.Marshal(out)
}

func familyOf(kty string) family {
	switch kty {
	case "RSA":
		return familyRSA
	case "EC":
		return familyEC
	case "OKP":
		return familyOKP
	}
	return familyNone
}

// ID is the key's kid.
func (k Key) ID() string { return k.kid }

// Alg is the JWK's "alg" member ("" when it had none).
func (k Key) Alg() string { return k.alg }

// PublicKey is the verification key (*rsa.PublicKey, *ecdsa.PublicKey or
// ed25519.PublicKey).
func (k Key) PublicKey() crypto.PublicKey { return k.key }

// Same reports whether two keys have the same alg restriction and public key.
func (k Key) Same(o Key) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := k.key.(equaler)
	return ok && k.alg == o.alg && e.Equal(o.key)
}

// Supported reports whether alg is an asymmetric algorithm capgate
// verifies; HMAC and "none" never are.
func Supported(alg string) bool { return algFamily(alg) != familyNone }

// MaxBytes is the largest key set read.
const MaxBytes = 1 << 20

// Fetch gets the key set document at url: HTTP 200 only, at most MaxBytes.
func Fetch(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get JWKS: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get JWKS: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read JWKS: %w", err)
	}
	if len(body) > MaxBytes {
		return nil, errors.New("JWKS larger than 1 MiB")
	}
	return body, nil
}

// pemKind names what a PEM file holds ("private key", "certificate",
// "public key"), or "" when data is not PEM: a PEM where a JWKS belongs is
// a common mistake, and the JSON parser's message for it ("invalid
// character '-' in numeric literal") names neither.
func pemKind(data []byte) string {
	block, _ := pem.Decode(data)
	if block == nil {
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("-----BEGIN ")) {
			return "block"
		}
		return ""
	}
	switch t := block.Type; {
	case strings.Contains(t, "PRIVATE KEY"):
		return "private key"
	case strings.Contains(t, "CERTIFICATE"):
		return "certificate"
	case strings.Contains(t, "PUBLIC KEY"):
		return "public key"
	}
	return "block (" + block.Type + ")"
}
