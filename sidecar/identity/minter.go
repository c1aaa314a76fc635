package identity

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/jsonplain"
)

// MaxMintTTL caps the lifetime of every token capgate mints.
const MaxMintTTL = 60 * time.Second

// Claim names capgate sets on the tokens it mints (besides the registered
// ones and the configurable tenant and scopes claims).
const (
	ClaimCapability = "capability"
	ClaimDecisionID = "decision_id"
	ClaimActor      = "act"
	// ClaimLimits holds the capability's limits (an object) as the policy
	// decided them; set by the self-issued handler token through Extra.
	ClaimLimits = "limits"
)

// MinterOption configures a Minter.
type MinterOption func(*Minter)

// WithMintClock sets the Minter's time source.
func WithMintClock(now func() time.Time) MinterOption { return func(m *Minter) { m.now = now } }

// Minter signs capgate's own short-lived tokens (ES256, kid = RFC 7638
// thumbprint of the public key). It is safe for concurrent use.
type Minter struct {
	issuer string
	key    *ecdsa.PrivateKey
	kid    string
	// header is the encoded JOSE header segment, the same for every token
	// (alg, kid, typ): encoded once.
	header string
	jwks   []byte
	now    func() time.Time
}

// NewMinter returns a Minter for issuer signing with key, which must be an
// *ecdsa.PrivateKey on P-256.
func NewMinter(issuer string, key crypto.Signer, opts ...MinterOption) (*Minter, error) {
	if issuer == "" {
		return nil, errors.New("minter: issuer is empty")
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec == nil || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("minter: signing key must be an ECDSA P-256 private key, got %T", key)
	}
	kid, err := Thumbprint(&ec.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("minter: %w", err)
	}
	jwks, err := MarshalJWKS(PublicJWK{Key: &ec.PublicKey, Alg: "ES256", Kid: kid})
	if err != nil {
		return nil, fmt.Errorf("minter: %w", err)
	}
	hdr := jwt.New(jwt.SigningMethodES256)
	hdr.Header["kid"] = kid
	hb, err := json.Marshal(hdr.Header)
	if err != nil {
		return nil, fmt.Errorf("minter: header: %w", err)
	}
	m := &Minter{issuer: issuer, key: ec, kid: kid, header: hdr.EncodeSegment(hb), jwks: jwks, now: time.Now}
	for _, o := range opts {
		o(m)
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m, nil
}

// GenerateMinter returns a Minter with a freshly generated P-256 key. Tokens
// it mints cannot be verified after a restart or by another replica; the
// caller should log a warning.
func GenerateMinter(issuer string, opts ...MinterOption) (*Minter, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("minter: generate key: %w", err)
	}
	return NewMinter(issuer, key, opts...)
}

// Issuer returns the iss of minted tokens.
func (m *Minter) Issuer() string { return m.issuer }

// KeyID returns the kid of minted tokens.
func (m *Minter) KeyID() string { return m.kid }

// JWKS returns the public key set to publish:
// {"keys":[{"kty":"EC","crv":"P-256","x":…,"y":…,"kid":…,"use":"sig","alg":"ES256"}]}.
func (m *Minter) JWKS() []byte { return slices.Clone(m.jwks) }

// MintClaims describes one token to mint.
type MintClaims struct {
	Subject  string // required: the caller
	Tenant   string
	Audience string // required: the handler
	Scopes   []string
	// Capability and DecisionID tie the token to one policy decision.
	Capability string
	DecisionID string
	// Actor is the agent acting on the caller's behalf (act.sub).
	Actor string
	// PriorAct is the caller token's own act claim, nested under Actor.
	PriorAct map[string]any
	// TTL is the lifetime; 0 means MaxMintTTL, and it is capped at MaxMintTTL.
	TTL time.Duration
	// Extra claims; they may not replace any claim Mint sets.
	Extra map[string]any
	// TenantClaim and ScopesClaim name those claims (defaults "tenant", "scope").
	TenantClaim string
	ScopesClaim string
}

// Mint signs a token for c. Scopes are sorted, deduplicated and space-separated.
// The token is what jwt's Token.SignedString writes: the header (jwt's, with
// the kid; encoded once per Minter) and the claims as encoding/json encodes
// them (encodeClaims), signed with jwt's ES256.
func (m *Minter) Mint(c MintClaims) (string, error) {
	cl, err := m.claims(c)
	if err != nil {
		return "", err
	}
	payload, err := encodeClaims(cl)
	if err != nil {
		return "", fmt.Errorf("mint: encode claims: %w", err)
	}
	enc := base64.RawURLEncoding
	tok := make([]byte, 0, len(m.header)+1+enc.EncodedLen(len(payload))+1+enc.EncodedLen(64))
	tok = enc.AppendEncode(append(append(tok, m.header...), '.'), payload)
	sig, err := jwt.SigningMethodES256.Sign(string(tok), m.key)
	if err != nil {
		return "", fmt.Errorf("mint: sign: %w", err)
	}
	return string(enc.AppendEncode(append(tok, '.'), sig)), nil
}

// encodeClaims is json.Marshal(cl), byte for byte: the members in sorted name order, each
// name and value as encoding/json writes it. It spares the reflection json.Marshal pays for
// every member of a map (a handler token's claims: 34 of BenchmarkMint's 138 allocations):
// names and values that are plain text (jsonplain.String) and integers are written as they are, a
// nested map[string]any (the act claim) member by member the same way, anything else by
// encoding/json's Encoder. TestEncodeClaimsMatchesMarshal and FuzzEncodeClaims hold it to
// json.Marshal.
func encodeClaims(cl jwt.MapClaims) ([]byte, error) {
	c := claimsEncoder{}
	c.b.Grow(512)
	c.enc = json.NewEncoder(&c.b) // escapes HTML, as json.Marshal does
	if err := c.object(cl); err != nil {
		return nil, err
	}
	return c.b.Bytes(), nil
}

// claimsEncoder writes the names and values of encodeClaims.
type claimsEncoder struct {
	b   bytes.Buffer
	enc *json.Encoder
}

// name writes a member's name as encoding/json does. A pointer (into encodeClaims' names) is
// boxed for the Encoder without a copy of the string.
func (c *claimsEncoder) name(s *string) error {
	if jsonplain.String(*s) {
		c.plain(*s)
		return nil
	}
	return c.encode(s)
}

// object writes a map as encoding/json does: its members in sorted name order.
func (c *claimsEncoder) object(m map[string]any) error {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names) // encoding/json's order for map keys
	c.b.WriteByte('{')
	for i := range names {
		if i > 0 {
			c.b.WriteByte(',')
		}
		if err := c.name(&names[i]); err != nil {
			return err
		}
		c.b.WriteByte(':')
		if err := c.value(m[names[i]]); err != nil {
			return err
		}
	}
	c.b.WriteByte('}')
	return nil
}

// value writes a member's value as encoding/json does.
func (c *claimsEncoder) value(v any) error {
	switch v := v.(type) {
	case map[string]any:
		if v != nil {
			return c.object(v)
		}
	case string:
		if jsonplain.String(v) {
			c.plain(v)
			return nil
		}
	case int64:
		c.b.Write(strconv.AppendInt(c.b.AvailableBuffer(), v, 10))
		return nil
	}
	return c.encode(v)
}

// plain writes a string jsonplain.String accepts.
func (c *claimsEncoder) plain(s string) {
	c.b.WriteByte('"')
	c.b.WriteString(s)
	c.b.WriteByte('"')
}

// encode writes v with encoding/json's Encoder.
func (c *claimsEncoder) encode(v any) error {
	if err := c.enc.Encode(v); err != nil {
		return err
	}
	c.b.Truncate(c.b.Len() - 1) // Encode ends each value with a newline
	return nil
}

// claims returns the claims of the token for c.
func (m *Minter) claims(c MintClaims) (jwt.MapClaims, error) {
	if c.Subject == "" {
		return nil, errors.New("mint: subject is required")
	}
	if c.Audience == "" {
		return nil, errors.New("mint: audience is required")
	}
	if c.TTL < 0 {
		return nil, errors.New("mint: negative TTL")
	}
	if c.PriorAct != nil && c.Actor == "" {
		return nil, errors.New("mint: a prior act needs an actor")
	}
	ttl := c.TTL
	if ttl == 0 || ttl > MaxMintTTL {
		ttl = MaxMintTTL
	}
	tenantClaim, scopesClaim := c.TenantClaim, c.ScopesClaim
	if tenantClaim == "" {
		tenantClaim = config.DefaultTenantClaim
	}
	if scopesClaim == "" {
		scopesClaim = config.DefaultScopesClaim
	}
	jti, err := randomID()
	if err != nil {
		return nil, fmt.Errorf("mint: %w", err)
	}
	now := m.now()
	cl := make(jwt.MapClaims, 12+len(c.Extra)) // sized once for the claims below
	cl["iss"], cl["sub"], cl["aud"], cl["jti"] = m.issuer, c.Subject, c.Audience, jti
	cl["iat"], cl["nbf"], cl["exp"] = now.Unix(), now.Unix(), now.Add(ttl).Unix()
	var errs []error
	set := func(name string, v any) {
		if _, dup := cl[name]; dup {
			errs = append(errs, fmt.Errorf("mint: claim %q set twice", name))
			return
		}
		cl[name] = v
	}
	if scopes := normaliseScopes(c.Scopes); scopes != "" {
		set(scopesClaim, scopes)
	}
	if c.Tenant != "" {
		set(tenantClaim, c.Tenant)
	}
	if c.Capability != "" {
		set(ClaimCapability, c.Capability)
	}
	if c.DecisionID != "" {
		set(ClaimDecisionID, c.DecisionID)
	}
	if c.Actor != "" {
		act := map[string]any{"sub": c.Actor}
		if c.PriorAct != nil {
			act["act"] = c.PriorAct
		}
		set(ClaimActor, act)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Extra)) {
		set(k, c.Extra[k])
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cl, nil
}

func normaliseScopes(in []string) string {
	var out []string
	for _, s := range in {
		out = append(out, strings.Fields(s)...)
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), " ")
}

func randomID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random jti: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
