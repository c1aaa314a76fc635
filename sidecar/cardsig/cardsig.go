// Package cardsig signs and verifies A2A agent cards as A2A's
// AgentCard.signatures specifies: each signature is a JWS (RFC 7515) with a
// detached payload, and the payload is the RFC 8785 (JCS) canonical form of
// the card without its "signatures" member. It works on the card's JSON, not
// on a Go type, so it signs and verifies any card shape (1.0, 0.3) and any
// agent's card, not only capgate's.
//
// Canonicalization is go-json-experiment's jsontext.Value.Canonicalize
// (RFC 8785), tested here against the RFC's published test vectors. The
// signature algorithms are golang-jwt/v5's signing methods; the JWS framing
// (base64url protected header "." base64url payload) is the few lines below.
package cardsig

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"

	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/jwks"
)

// Member is the card member that holds the signatures.
const Member = "signatures"

// Type is the typ of capgate's card signatures, as in the A2A
// specification's example.
const Type = "JOSE"

var b64 = base64.RawURLEncoding.Strict()

// Signature is one element of AgentCard.signatures.
type Signature struct {
	Protected string         `json:"protected"`
	Signature string         `json:"signature"`
	Header    map[string]any `json:"header,omitempty"`
}

// Canonical returns the RFC 8785 canonical form of card (a JSON object)
// without its top-level "signatures" member: the JWS payload. Duplicate
// member names and invalid UTF-8 are refused, as I-JSON requires.
func Canonical(card []byte) ([]byte, error) {
	rest, _, err := split(card)
	if err != nil {
		return nil, err
	}
	v := jsontext.Value(rest)
	if err := v.Canonicalize(); err != nil {
		return nil, fmt.Errorf("canonicalize card: %w", err)
	}
	return v, nil
}

// split returns card as an object without its top-level signatures member
// (other members as they were, in order) and the signatures member's value
// (nil when absent).
func split(card []byte) (rest []byte, sigs jsontext.Value, err error) {
	dec := jsontext.NewDecoder(bytes.NewReader(card))
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out)
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, nil, fmt.Errorf("read card: %w", err)
	}
	if tok.Kind() != '{' {
		return nil, nil, errors.New("read card: not a JSON object")
	}
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return nil, nil, err
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, nil, fmt.Errorf("read card: %w", err)
		}
		name := tok.Clone() // the next read voids tok
		val, err := dec.ReadValue()
		if err != nil {
			return nil, nil, fmt.Errorf("read card: %w", err)
		}
		if name.String() == Member {
			sigs = slices.Clone(val)
			continue
		}
		if err := enc.WriteToken(name); err != nil {
			return nil, nil, err
		}
		if err := enc.WriteValue(val); err != nil {
			return nil, nil, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, nil, fmt.Errorf("read card: %w", err)
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, nil, errors.New("read card: data after the card object")
	}
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return nil, nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), sigs, nil
}

// Signer signs cards with one key.
type Signer struct {
	key    crypto.Signer
	method jwt.SigningMethod
	alg    string
	kid    string
	jku    string
}

// NewSigner reads a PEM private key (P-256 → ES256, RSA of at least 2048
// bits → RS256). kid "" means the key's RFC 7638 thumbprint; jku, when not
// empty, goes into each signature's protected header.
func NewSigner(pemBytes []byte, kid, jku string) (*Signer, error) {
	key, alg, err := identity.LoadSigningKey(pemBytes)
	if err != nil {
		return nil, err
	}
	if kid == "" {
		if kid, err = jwks.Thumbprint(key.Public()); err != nil {
			return nil, err
		}
	}
	return &Signer{key: key, method: jwt.GetSigningMethod(alg), alg: alg, kid: kid, jku: jku}, nil
}

// KeyID is the kid of the signatures.
func (s *Signer) KeyID() string { return s.kid }

// PublicJWK describes the verification key, for a JWKS.
func (s *Signer) PublicJWK() jwks.PublicJWK {
	return jwks.PublicJWK{Key: s.key.Public(), Alg: s.alg, Kid: s.kid}
}

// header is the protected header, in a fixed member order.
type header struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
	Jku string `json:"jku,omitempty"`
}

// Sign returns card with its signatures member set to one signature by
// s (any signatures it had are replaced). The other members keep their
// order and bytes; signatures is appended last.
func (s *Signer) Sign(card []byte) ([]byte, error) {
	rest, _, err := split(card)
	if err != nil {
		return nil, err
	}
	payload := jsontext.Value(slices.Clone(rest))
	if err := payload.Canonicalize(); err != nil {
		return nil, fmt.Errorf("canonicalize card: %w", err)
	}
	h, err := json.Marshal(header{Alg: s.alg, Typ: Type, Kid: s.kid, Jku: s.jku})
	if err != nil {
		return nil, err
	}
	protected := b64.EncodeToString(h)
	sig, err := s.method.Sign(protected+"."+b64.EncodeToString(payload), s.key)
	if err != nil {
		return nil, fmt.Errorf("sign card: %w", err)
	}
	list, err := json.Marshal([]Signature{{Protected: protected, Signature: b64.EncodeToString(sig)}})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(rest)+len(list)+16)
	out = append(out, rest[:len(rest)-1]...) // without the closing brace
	if len(rest) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"`+Member+`":`...)
	out = append(out, list...)
	return append(out, '}'), nil
}

// Result is the outcome for one signature of a card.
type Result struct {
	Index int    // position in signatures
	KeyID string // kid (protected header, else unprotected)
	Alg   string
	JKU   string // jku of the protected header, informational only
	Err   error  // nil: the signature verifies with the key named by KeyID
}

// Errors of Verify.
var (
	ErrUnsigned = errors.New("the card has no signatures")
	ErrNoValid  = errors.New("no signature of the card verifies with the given keys")
)

// MaxSignatures bounds how many signatures Verify looks at.
const MaxSignatures = 16

// Verify checks every signature of card against keys (a JWKS, looked up by
// kid). It returns one Result per signature, and an error unless at least
// one signature verifies. A signature fails when its protected header is
// malformed, names an algorithm capgate does not accept (HMAC, "none") or
// one its key does not allow, has a crit or b64 member (extensions this
// verifier does not implement), or names no key in keys. The jku in a
// header is reported, never fetched: the caller decides which keys to trust.
func Verify(card []byte, keys jwks.Set) ([]Result, error) {
	rest, raw, err := split(card)
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return nil, ErrUnsigned
	}
	var sigs []Signature
	if err := json.Unmarshal(raw, &sigs); err != nil {
		return nil, errors.New("signatures is not a list of JWS objects")
	}
	if len(sigs) == 0 {
		return nil, ErrUnsigned
	}
	if len(sigs) > MaxSignatures {
		return nil, fmt.Errorf("the card has %d signatures; at most %d are checked", len(sigs), MaxSignatures)
	}
	payload := jsontext.Value(rest)
	if err := payload.Canonicalize(); err != nil {
		return nil, fmt.Errorf("canonicalize card: %w", err)
	}
	encoded := b64.EncodeToString(payload)
	results := make([]Result, len(sigs))
	valid := false
	for i, s := range sigs {
		results[i] = verifyOne(i, s, encoded, keys)
		valid = valid || results[i].Err == nil
	}
	if !valid {
		return results, ErrNoValid
	}
	return results, nil
}

func verifyOne(i int, s Signature, payload string, keys jwks.Set) Result {
	r := Result{Index: i}
	hb, err := b64.DecodeString(s.Protected)
	if err != nil {
		r.Err = errors.New("protected header is not base64url")
		return r
	}
	var h map[string]any
	if err := json.Unmarshal(hb, &h); err != nil {
		r.Err = errors.New("protected header is not a JSON object")
		return r
	}
	r.Alg, _ = h["alg"].(string)
	r.KeyID, _ = h["kid"].(string)
	r.JKU, _ = h["jku"].(string)
	if r.KeyID == "" {
		r.KeyID, _ = s.Header["kid"].(string)
	}
	for _, m := range []string{"crit", "b64"} {
		if _, ok := h[m]; ok {
			r.Err = fmt.Errorf("protected header has %q, which this verifier does not implement", m)
			return r
		}
	}
	if !jwks.Supported(r.Alg) {
		r.Err = fmt.Errorf("algorithm %q is not accepted", r.Alg)
		return r
	}
	if r.KeyID == "" {
		r.Err = errors.New("the signature names no kid")
		return r
	}
	key, ok := keys[r.KeyID]
	if !ok {
		r.Err = fmt.Errorf("no key with kid %q in the key set", r.KeyID)
		return r
	}
	if !key.Allows(r.Alg) {
		r.Err = fmt.Errorf("key %q does not allow %s", r.KeyID, r.Alg)
		return r
	}
	sig, err := b64.DecodeString(s.Signature)
	if err != nil {
		r.Err = errors.New("signature is not base64url")
		return r
	}
	if err := jwt.GetSigningMethod(r.Alg).Verify(s.Protected+"."+payload, sig, key.PublicKey()); err != nil {
		r.Err = errors.New("signature does not match the card")
	}
	return r
}

// AddKey returns the JWKS document set with the signer's public key added
// (unless a key with its kid is already there). set "" or nil starts an
// empty set.
func AddKey(set []byte, s *Signer) ([]byte, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if len(set) > 0 {
		if err := json.Unmarshal(set, &doc); err != nil {
			return nil, fmt.Errorf("key set: %w", err)
		}
	}
	for _, k := range doc.Keys {
		var m struct {
			Kid string `json:"kid"`
		}
		if json.Unmarshal(k, &m) == nil && m.Kid == s.kid {
			return set, nil
		}
	}
	one, err := jwks.MarshalJWKS(s.PublicJWK())
	if err != nil {
		return nil, err
	}
	var mine struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(one, &mine); err != nil {
		return nil, err
	}
	doc.Keys = append(doc.Keys, mine.Keys...)
	return json.Marshal(doc)
}
