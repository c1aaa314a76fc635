package handlerauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Defaults of Config.
const (
	DefaultLeeway          = 5 * time.Second
	DefaultRefreshInterval = 30 * time.Second
	DefaultFetchTimeout    = 10 * time.Second
	DefaultTenantClaim     = "tenant"
	DefaultScopesClaim     = "scope"

	// MaxTokenBytes is the longest token Verify reads.
	MaxTokenBytes = 16 << 10
	maxActDepth   = 8
)

// Algorithms are the only signature algorithms accepted.
var algorithms = []string{"ES256", "RS256"}

// Config configures a Verifier. Issuer, an audience and one key source are
// required.
type Config struct {
	// Issuer is capgate's issuer id; a token's iss must equal it exactly.
	Issuer string
	// Audience is this handler's name; a token's aud must contain it.
	Audience string
	// Audiences are further accepted audiences, for one handler serving
	// several handler names. A token's aud must contain Audience or one of
	// these.
	Audiences []string
	// JWKSURL is where capgate publishes its keys. It is fetched by
	// NewVerifier and again when a token names an unknown key id (at most
	// once per RefreshInterval).
	JWKSURL string
	// JWKS is a static key set, used instead of JWKSURL.
	JWKS []byte
	// HTTPClient fetches JWKSURL; nil means a client with DefaultFetchTimeout.
	HTTPClient *http.Client
	// Leeway is the clock skew allowed on exp, nbf and iat; 0 means DefaultLeeway.
	Leeway time.Duration
	// RefreshInterval is the least time between two JWKS fetches; 0 means
	// DefaultRefreshInterval.
	RefreshInterval time.Duration
	// TenantClaim and ScopesClaim name those claims when capgate is
	// configured with other names; "" means "tenant" and "scope".
	TenantClaim string
	ScopesClaim string
	// Clock is the time source; nil means time.Now.
	Clock func() time.Time
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.Issuer == "" {
		errs = append(errs, errors.New("issuer is required"))
	}
	if c.Audience == "" && len(c.Audiences) == 0 {
		errs = append(errs, errors.New("audience is required"))
	}
	if slices.Contains(c.Audiences, "") {
		errs = append(errs, errors.New("audiences contain an empty name"))
	}
	switch {
	case c.JWKSURL == "" && len(c.JWKS) == 0:
		errs = append(errs, errors.New("a JWKS URL or a static JWKS is required"))
	case c.JWKSURL != "" && len(c.JWKS) > 0:
		errs = append(errs, errors.New("set either the JWKS URL or a static JWKS, not both"))
	case c.JWKSURL != "":
		if u, err := url.Parse(c.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("JWKS URL %q is not an absolute http(s) URL", c.JWKSURL))
		}
	}
	if c.Leeway < 0 {
		errs = append(errs, errors.New("leeway is negative"))
	}
	if c.RefreshInterval < 0 {
		errs = append(errs, errors.New("refresh interval is negative"))
	}
	return errors.Join(errs...)
}

// Verifier checks capgate handler tokens: ES256 or RS256 only, a known key
// id, iss exact, aud containing this handler, exp required, nbf and iat
// honoured, sub and capability present. It is safe for concurrent use.
type Verifier struct {
	issuer      string
	audiences   []string
	tenantClaim string
	scopesClaim string
	parser      *jwt.Parser

	jwksURL      string
	client       *http.Client
	refreshEvery time.Duration
	now          func() time.Time

	keys      atomic.Pointer[keySet]
	fetchMu   sync.Mutex
	lastFetch time.Time
}

// NewVerifier validates cfg and returns a Verifier. With a JWKS URL it
// fetches the key set once, bounded by ctx, and fails when it cannot.
func NewVerifier(ctx context.Context, cfg Config) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("handlerauth: %w", err)
	}
	v := &Verifier{
		issuer:       cfg.Issuer,
		tenantClaim:  cmpOr(cfg.TenantClaim, DefaultTenantClaim),
		scopesClaim:  cmpOr(cfg.ScopesClaim, DefaultScopesClaim),
		jwksURL:      cfg.JWKSURL,
		client:       cfg.HTTPClient,
		refreshEvery: cmpOr(cfg.RefreshInterval, DefaultRefreshInterval),
		now:          cfg.Clock,
	}
	if cfg.Audience != "" {
		v.audiences = append(v.audiences, cfg.Audience)
	}
	v.audiences = append(v.audiences, cfg.Audiences...)
	if v.now == nil {
		v.now = time.Now
	}
	if v.client == nil {
		v.client = &http.Client{Timeout: DefaultFetchTimeout}
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(algorithms),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(v.audiences...),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cmpOr(cfg.Leeway, DefaultLeeway)),
		jwt.WithTimeFunc(v.now),
	)
	if len(cfg.JWKS) > 0 {
		set, err := parseJWKS(cfg.JWKS)
		if err != nil {
			return nil, fmt.Errorf("handlerauth: static JWKS: %w", err)
		}
		v.keys.Store(&set)
		return v, nil
	}
	v.lastFetch = v.now()
	set, err := v.fetch(ctx)
	if err != nil {
		return nil, fmt.Errorf("handlerauth: %w", err)
	}
	v.keys.Store(&set)
	return v, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Verify checks bearer (an Authorization header value "Bearer <token>" or
// the bare token) and returns its claims. Errors wrap ErrMissingToken or
// ErrInvalidToken.
func (v *Verifier) Verify(ctx context.Context, bearer string) (Claims, error) {
	tok, err := bearerToken(bearer)
	if err != nil {
		return Claims{}, err
	}
	var mc jwt.MapClaims
	if _, err := v.parser.ParseWithClaims(tok, &mc, func(t *jwt.Token) (any, error) {
		return v.keyFor(ctx, t)
	}); err != nil {
		if errors.Is(err, ErrInvalidToken) {
			return Claims{}, err
		}
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	return v.claims(mc)
}

// bearerToken strips an optional "Bearer " scheme.
func bearerToken(h string) (string, error) {
	h = strings.TrimSpace(h)
	if h == "" || strings.EqualFold(h, "Bearer") {
		return "", ErrMissingToken
	}
	if scheme, rest, ok := strings.Cut(h, " "); ok {
		if !strings.EqualFold(scheme, "Bearer") {
			return "", fmt.Errorf("%w: not a bearer credential", ErrInvalidToken)
		}
		h = strings.TrimSpace(rest)
	}
	if h == "" {
		return "", ErrMissingToken
	}
	if len(h) > MaxTokenBytes {
		return "", fmt.Errorf("%w: token longer than %d bytes", ErrInvalidToken, MaxTokenBytes)
	}
	if strings.Count(h, ".") != 2 {
		return "", fmt.Errorf("%w: not a signed JWT", ErrInvalidToken)
	}
	return h, nil
}

// keyFor finds the verification key named by the token's kid, fetching
// the JWKS again when the kid is unknown.
func (v *Verifier) keyFor(ctx context.Context, t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	if kid == "" {
		return nil, fmt.Errorf("%w: token has no key id", ErrInvalidToken)
	}
	alg := t.Method.Alg()
	k, ok := v.lookup(kid)
	if !ok && v.jwksURL != "" {
		k, ok = v.refresh(ctx, kid)
	}
	if !ok {
		return nil, fmt.Errorf("%w: unknown key id", ErrInvalidToken)
	}
	if !k.Allows(alg) {
		return nil, fmt.Errorf("%w: key does not allow %s", ErrInvalidToken, alg)
	}
	return k.PublicKey(), nil
}

func (v *Verifier) lookup(kid string) (jwk, bool) {
	set := v.keys.Load()
	if set == nil {
		return jwk{}, false
	}
	k, ok := (*set)[kid]
	return k, ok
}

// refresh fetches the key set unless another fetch happened less than
// refreshEvery ago, then looks kid up again. A failed fetch keeps the
// last good set.
func (v *Verifier) refresh(ctx context.Context, kid string) (jwk, bool) {
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	if k, ok := v.lookup(kid); ok {
		return k, true // fetched while we waited
	}
	now := v.now()
	if since := now.Sub(v.lastFetch); since >= 0 && since < v.refreshEvery {
		return jwk{}, false
	}
	v.lastFetch = now
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultFetchTimeout)
	defer cancel()
	set, err := v.fetch(fctx)
	if err != nil {
		return jwk{}, false
	}
	v.keys.Store(&set)
	return v.lookup(kid)
}

// claims maps verified token claims; sub and capability are required and
// every claim present must have the expected type.
func (v *Verifier) claims(mc jwt.MapClaims) (Claims, error) {
	bad := func(what string) (Claims, error) {
		return Claims{}, fmt.Errorf("%w: %s", ErrInvalidToken, what)
	}
	var c Claims
	var ok bool
	if c.Subject, ok = mc["sub"].(string); !ok || c.Subject == "" {
		return bad("token has no subject")
	}
	if c.Capability, ok = mc["capability"].(string); !ok || c.Capability == "" {
		return bad("token has no capability claim")
	}
	c.Issuer, _ = mc["iss"].(string)
	if c.Tenant, ok = optString(mc, v.tenantClaim); !ok {
		return bad("tenant claim is not a string")
	}
	if c.DecisionID, ok = optString(mc, "decision_id"); !ok {
		return bad("decision_id claim is not a string")
	}
	if c.Scopes, ok = scopes(mc[v.scopesClaim]); !ok {
		return bad("scope claim is neither a string nor a list of strings")
	}
	if c.Actor, ok = actorChain(mc); !ok {
		return bad("act claim is malformed")
	}
	switch l := mc[ClaimLimits].(type) {
	case nil:
	case map[string]any:
		if len(l) > 0 {
			c.Limits = Limits(l)
		}
	default:
		return bad("limits claim is not an object")
	}
	aud, err := mc.GetAudience()
	if err != nil {
		return bad("aud claim is malformed")
	}
	for _, a := range aud {
		if slices.Contains(v.audiences, a) {
			c.Audience = a
			break
		}
	}
	exp, err := mc.GetExpirationTime()
	if err != nil || exp == nil {
		return bad("token has no expiry")
	}
	c.ExpiresAt = exp.Time
	return c, nil
}

func optString(mc jwt.MapClaims, name string) (string, bool) {
	raw, present := mc[name]
	if !present || raw == nil {
		return "", true
	}
	s, ok := raw.(string)
	return s, ok
}

// scopes reads a space-separated string or a list of strings; the result is
// sorted and deduplicated.
func scopes(raw any) ([]string, bool) {
	var out []string
	switch s := raw.(type) {
	case nil:
		return nil, true
	case string:
		out = strings.Fields(s)
	case []any:
		for _, e := range s {
			str, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, strings.Fields(str)...)
		}
	default:
		return nil, false
	}
	if len(out) == 0 {
		return nil, true
	}
	slices.Sort(out)
	return slices.Clip(slices.Compact(out)), true
}

// actorChain follows act → act → … (RFC 8693 §4.1), outermost first. Every
// level must be an object with a non-empty string sub.
func actorChain(mc jwt.MapClaims) ([]string, bool) {
	var chain []string
	cur := map[string]any(mc)
	for range maxActDepth + 1 {
		raw, present := cur["act"]
		if !present {
			return chain, true
		}
		act, ok := raw.(map[string]any)
		if !ok {
			return nil, false
		}
		sub, ok := act["sub"].(string)
		if !ok || sub == "" {
			return nil, false
		}
		if len(chain) == maxActDepth {
			return nil, false
		}
		chain = append(chain, sub)
		cur = act
	}
	return nil, false
}
