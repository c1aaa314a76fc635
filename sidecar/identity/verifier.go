// Package identity authenticates callers — bearer JWTs from configured issuers, and mTLS peers
// mapped to principals (auth.mtls_principals), read from the gateway's own TLS or from a trusted
// proxy's header — and mints capgate's own short-lived tokens, deriving keys from their signing
// key for other purposes (DeriveKey).
package identity

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/capgate/capgate/sidecar/jwks"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
)

// Verifier defaults and limits.
const (
	DefaultCacheSize       = 10_000
	DefaultRefreshInterval = 30 * time.Second // at most one JWKS refetch per issuer per interval
	DefaultFetchTimeout    = 5 * time.Second
	// DefaultMaxKeyAge is how old a jwks_url key set may grow before a
	// verification starts a background refetch (Envoy's jwt_authn caches
	// remote JWKS for 600s by default too).
	DefaultMaxKeyAge = 10 * time.Minute
	// MaxTokenBytes bounds a bearer token; longer ones are refused before parsing.
	MaxTokenBytes = 16 << 10
	// MaxJWKSBytes bounds a fetched JWKS document.
	MaxJWKSBytes = jwks.MaxBytes
)

// defaultAlgorithms is an issuer's allow-list when the config names none.
func defaultAlgorithms() []string { return []string{"RS256", "ES256"} }

// Option configures a Verifier.
type Option func(*options)

type options struct {
	log          *zap.Logger
	client       *http.Client
	now          func() time.Time
	cacheSize    int
	refreshEvery time.Duration
	fetchTimeout time.Duration
	maxKeyAge    time.Duration
}

// WithLogger sets the logger (nil: no logging).
func WithLogger(log *zap.Logger) Option { return func(o *options) { o.log = log } }

// WithHTTPClient sets the client used to fetch jwks_url key sets.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.client = c } }

// WithClock sets the time source for token validation, cache expiry and
// refresh rate limiting.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithCacheSize bounds the verified-token cache (default DefaultCacheSize;
// 0 or less keeps the default).
func WithCacheSize(n int) Option { return func(o *options) { o.cacheSize = n } }

// WithRefreshInterval sets the minimum time between two JWKS fetches of one
// issuer (default DefaultRefreshInterval).
func WithRefreshInterval(d time.Duration) Option { return func(o *options) { o.refreshEvery = d } }

// WithFetchTimeout bounds one JWKS fetch (default DefaultFetchTimeout).
func WithFetchTimeout(d time.Duration) Option { return func(o *options) { o.fetchTimeout = d } }

// WithMaxKeyAge sets how old a jwks_url key set may grow before it is
// refetched in the background (default DefaultMaxKeyAge).
func WithMaxKeyAge(d time.Duration) Option { return func(o *options) { o.maxKeyAge = d } }

// Verifier verifies bearer tokens against the configured issuers. It is safe
// for concurrent use and starts no goroutines.
type Verifier struct {
	log          *zap.Logger
	client       *http.Client
	now          func() time.Time
	refreshEvery time.Duration
	fetchTimeout time.Duration
	maxKeyAge    time.Duration
	skew         time.Duration
	maxLifetime  time.Duration
	scopesClaim  string
	tenantClaim  string

	issuers map[string]*issuer
	// parser only decodes and checks the signature; claims are validated by
	// the selected issuer's validator afterwards. One parse per token: the
	// issuer is chosen inside the keyfunc from the (not yet trusted) iss, and
	// nothing from the token is trusted until its issuer's key verified it.
	parser *jwt.Parser
	algs   []string // union of the issuers' allow-lists (the parser's valid methods)

	cache   *lru.Cache[[sha256.Size]byte, cacheEntry]
	classes classTable
	hits    atomic.Uint64
	misses  atomic.Uint64
}

type issuer struct {
	name      string
	jwksURL   string
	logURL    string // jwksURL with any password redacted
	algs      []string
	validator *jwt.Validator
	keys      atomic.Pointer[keySet]
	// tenants and scopes restrict what the issuer may assert (nil: anything).
	tenants map[string]bool
	scopes  map[string]bool

	fetchMu   sync.Mutex // guards lastFetch and fetching
	lastFetch time.Time
	fetching  chan struct{} // closed when the fetch in progress ends; nil when none
}

// NewVerifier builds a verifier for auth. readFile loads jwks_file paths (as
// resolved by the config package); jwks_url key sets are fetched now with
// ctx, and a failed first fetch is logged and retried on demand.
func NewVerifier(ctx context.Context, auth config.Auth, readFile func(string) ([]byte, error), opts ...Option) (*Verifier, error) {
	o := options{
		cacheSize:    DefaultCacheSize,
		refreshEvery: DefaultRefreshInterval,
		fetchTimeout: DefaultFetchTimeout,
		maxKeyAge:    DefaultMaxKeyAge,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.client == nil {
		o.client = &http.Client{Timeout: o.fetchTimeout}
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.cacheSize <= 0 {
		o.cacheSize = DefaultCacheSize
	}
	if o.refreshEvery <= 0 {
		o.refreshEvery = DefaultRefreshInterval
	}
	if o.fetchTimeout <= 0 {
		o.fetchTimeout = DefaultFetchTimeout
	}
	if o.maxKeyAge <= 0 {
		o.maxKeyAge = DefaultMaxKeyAge
	}

	skew := auth.ClockSkew
	if skew == 0 {
		skew = config.DefaultClockSkew
	}
	maxLifetime := auth.MaxTokenLifetime
	if maxLifetime <= 0 {
		maxLifetime = config.DefaultMaxTokenLifetime
	}
	scopesClaim, tenantClaim := claimNames(auth)
	v := &Verifier{
		log:          o.log.Named("identity"),
		client:       o.client,
		now:          o.now,
		refreshEvery: o.refreshEvery,
		fetchTimeout: o.fetchTimeout,
		maxKeyAge:    o.maxKeyAge,
		skew:         skew,
		maxLifetime:  maxLifetime,
		scopesClaim:  scopesClaim,
		tenantClaim:  tenantClaim,
		issuers:      make(map[string]*issuer, len(auth.Issuers)),
	}

	var errs []error
	if skew < 0 {
		errs = append(errs, fmt.Errorf("auth.clock_skew %s is negative", skew))
	}
	union := make([]string, 0, 8) // non-nil even when empty: then no alg is valid
	for i, ic := range auth.Issuers {
		iss, err := v.newIssuer(ic)
		if err != nil {
			errs = append(errs, fmt.Errorf("auth.issuers[%d]: %w", i, err))
			continue
		}
		if _, dup := v.issuers[iss.name]; dup {
			errs = append(errs, fmt.Errorf("auth.issuers[%d]: duplicate issuer %q", i, iss.name))
			continue
		}
		for _, a := range iss.algs {
			if !slices.Contains(union, a) {
				union = append(union, a)
			}
		}
		if ic.JWKSFile != "" {
			if err := v.loadFile(iss, ic.JWKSFile, readFile); err != nil {
				errs = append(errs, fmt.Errorf("auth.issuers[%d]: %w", i, err))
				continue
			}
		}
		v.issuers[iss.name] = iss
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	v.algs = union
	v.parser = jwt.NewParser(jwt.WithValidMethods(union), jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding())

	cache, err := lru.New[[sha256.Size]byte, cacheEntry](o.cacheSize)
	if err != nil {
		return nil, fmt.Errorf("token cache: %w", err)
	}
	v.cache = cache

	for _, iss := range v.issuers {
		if iss.jwksURL != "" {
			v.refresh(ctx, iss)
		}
	}
	return v, nil
}

func (v *Verifier) newIssuer(ic config.Issuer) (*issuer, error) {
	var errs []error
	if ic.Issuer == "" {
		errs = append(errs, errors.New("issuer is empty"))
	}
	if len(ic.Audiences) == 0 || slices.Contains(ic.Audiences, "") {
		errs = append(errs, errors.New("audiences: at least one non-empty audience is required"))
	}
	if (ic.JWKSFile == "") == (ic.JWKSURL == "") {
		errs = append(errs, errors.New("exactly one of jwks_file and jwks_url is required"))
	}
	var logURL string
	if ic.JWKSURL != "" {
		u, err := url.Parse(ic.JWKSURL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("jwks_url: %w", err))
		case (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			errs = append(errs, errors.New("jwks_url must be an absolute http(s) URL"))
		default:
			logURL = u.Redacted()
		}
	}
	algs := ic.Algorithms
	if len(algs) == 0 {
		algs = defaultAlgorithms()
	}
	for _, a := range algs {
		if !jwks.Supported(a) {
			errs = append(errs, fmt.Errorf("algorithm %q is not allowed (allowed: RS256/384/512, PS256/384/512, ES256/384/512, EdDSA)", a))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("issuer %q: %w", ic.Issuer, err)
	}
	return &issuer{
		name:    ic.Issuer,
		jwksURL: ic.JWKSURL,
		logURL:  logURL,
		algs:    slices.Clone(algs),
		tenants: setOf(ic.Tenants),
		scopes:  setOf(ic.Scopes),
		validator: jwt.NewValidator(
			jwt.WithIssuer(ic.Issuer),
			jwt.WithAudience(ic.Audiences...),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(v.skew),
			jwt.WithTimeFunc(v.now),
		),
	}, nil
}

func (v *Verifier) loadFile(iss *issuer, path string, readFile func(string) ([]byte, error)) error {
	if readFile == nil {
		return fmt.Errorf("issuer %q: jwks_file %s: no file reader", iss.name, path)
	}
	data, err := readFile(path)
	if err != nil {
		return fmt.Errorf("issuer %q: read jwks_file %s: %w", iss.name, path, err)
	}
	if len(data) > MaxJWKSBytes {
		return fmt.Errorf("issuer %q: jwks_file %s is larger than %d bytes", iss.name, path, MaxJWKSBytes)
	}
	set, skipped, err := parseJWKS(data)
	v.logSkipped(iss.name, skipped)
	if err != nil {
		return fmt.Errorf("issuer %q: jwks_file %s: %w", iss.name, path, err)
	}
	iss.keys.Store(&set)
	return nil
}

func (v *Verifier) logSkipped(issuer string, skipped []skippedKey) {
	for _, s := range skipped {
		v.log.Warn("JWKS key ignored", zap.String("issuer", issuer), zap.String("kid", s.Kid), zap.String("reason", s.Reason))
	}
}

// CacheStats returns the verified-token cache's hit and miss counts.
func (v *Verifier) CacheStats() (hits, misses uint64) {
	return v.hits.Load(), v.misses.Load()
}

// CacheLen returns the number of tokens in the verified-token cache.
func (v *Verifier) CacheLen() int { return v.cache.Len() }

// Verify authenticates the raw Authorization header value. An empty header
// is the anonymous Principal{} with a nil error (whether anonymous callers
// are acceptable is the policy's decision). A refused header or token is an
// *Error; a cancelled ctx (checked before full verification) is ctx.Err().
func (v *Verifier) Verify(ctx context.Context, authorization string) (Principal, error) {
	if authorization == "" {
		return Principal{}, nil
	}
	tok, err := bearerCredentials(authorization)
	if err != nil {
		return Principal{}, err
	}

	// Cache key: the token's digest; the token itself is never kept. Only a
	// token BearerToken accepted is ever cached, so a hit needs no second look
	// at its bytes; a miss reads them as BearerToken does, in its order.
	key := sha256.Sum256([]byte(tok))
	if e, ok := v.cache.Get(key); ok {
		v.hits.Add(1)
		if v.now().Before(e.expires.Add(v.skew)) {
			return e.principal(), nil
		}
		return Principal{}, v.expired(key, e)
	}
	return v.verifyMiss(ctx, tok, key)
}

// expired forgets the cached entry under key, whose token has expired, and
// says so.
func (v *Verifier) expired(key [sha256.Size]byte, e cacheEntry) error {
	v.cache.Remove(key)
	ie := newError(ErrExpired, "token expired", nil)
	ie.Issuer = boundIssuer(e.principal().Issuer)
	return ie
}

// verifyMiss is Verify for a token not in the cache: it reads the token's
// bytes, verifies it and caches what it accepted. It is a function of its
// own so that a cache hit, the common case, runs in a small frame: each
// door calls Verify deep in a request's goroutine, and the refusal's log
// fields here (a kilobyte of stack) made the hash of the cache key cross
// the goroutine's first stack size, a stack copy for every Check.
func (v *Verifier) verifyMiss(ctx context.Context, tok string, key [sha256.Size]byte) (Principal, error) {
	if err := checkB64token(tok); err != nil {
		return Principal{}, err
	}
	v.misses.Add(1)
	if err := ctx.Err(); err != nil {
		return Principal{}, err
	}

	p, err := v.verify(ctx, tok)
	if err != nil {
		if ce := v.log.Check(zap.DebugLevel, "token refused"); ce != nil {
			if ie := (*Error)(nil); errors.As(err, &ie) {
				ce.Write(zap.String("kind", string(ie.Kind)), zap.String("reason", string(ie.Reason)),
					zap.String("issuer", ie.Issuer), zap.String("description", ie.Description), zap.NamedError("cause", ie.Err))
			}
		}
		return Principal{}, err
	}
	v.cache.Add(key, v.classes.entry(p))
	return p, nil
}

// BearerToken reads an Authorization header value by the one grammar both doors (and the
// caller-token forwarding) use, RFC 9110 §5.5 and §11.4 with RFC 6750 §2.1:
//
//	field-value = OWS credentials OWS    ; OWS = *( SP / HTAB ), not part of the value
//	credentials = "Bearer" 1*SP b64token ; scheme case-insensitive
//	b64token    = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
//
// Envoy hands ext_authz a header value as received, while net/http trims the OWS before the
// gateway sees it: trimming here makes "Bearer t " one credential at both doors. Anything else —
// another scheme, a tab or nothing between scheme and token, a second token, a byte outside
// b64token — is ErrMalformed.
func BearerToken(h string) (string, error) {
	tok, err := bearerCredentials(h)
	if err != nil {
		return "", err
	}
	if err := checkB64token(tok); err != nil {
		return "", err
	}
	return tok, nil
}

// bearerCredentials is BearerToken's first half: the header's size, its scheme and a
// token after it, whose bytes checkB64token reads.
func bearerCredentials(h string) (string, error) {
	h = strings.Trim(h, " \t")
	if len(h) > MaxTokenBytes+len("Bearer ")+64 {
		return "", newError(ErrMalformed, "token too large", nil)
	}
	if len(h) < len("Bearer ") || !strings.EqualFold(h[:len("Bearer")], "Bearer") || h[len("Bearer")] != ' ' {
		return "", newError(ErrMalformed, "authorization scheme must be Bearer", nil)
	}
	tok := strings.TrimLeft(h[len("Bearer"):], " ")
	if tok == "" {
		return "", newError(ErrMalformed, "expected exactly one bearer token", nil)
	}
	return tok, nil
}

// checkB64token is BearerToken's second half: tok is one b64token of at most
// MaxTokenBytes.
func checkB64token(tok string) error {
	if !b64token(tok) {
		return newError(ErrMalformed, "expected exactly one bearer token", nil)
	}
	if len(tok) > MaxTokenBytes {
		return newError(ErrMalformed, "token too large", nil)
	}
	return nil
}

// The bytes of a b64token before its "=" padding, as two 64-bit sets: b64tokenLow
// holds bytes 0–63 ("+", "-", ".", "/", the digits), b64tokenHigh bytes 64–127
// (the letters, "_", "~").
const (
	b64tokenLow  = 1<<'+' | 1<<'-' | 1<<'.' | 1<<'/' | (1<<10-1)<<'0'
	b64tokenHigh = (1<<26-1)<<('A'-64) | 1<<('_'-64) | (1<<26-1)<<('a'-64) | 1<<('~'-64)
)

// b64tokenChar reports whether c may appear in a b64token before its "=" padding.
// It reads two constant bit sets so that it inlines into b64token's loop over a
// token of up to MaxTokenBytes: the plain form (ALPHA / DIGIT / one of "-._~+/",
// held equal to this one over every byte by TestB64tokenChar) cost a call per
// byte, ~9 % of an ext_authz Check.
func b64tokenChar(c byte) bool {
	switch {
	case c < 64:
		return b64tokenLow&(uint64(1)<<c) != 0
	case c < 128:
		return b64tokenHigh&(uint64(1)<<(c-64)) != 0
	}
	return false
}

// b64token reports whether s is an RFC 6750 b64token.
func b64token(s string) bool {
	i := 0
	for i < len(s) && b64tokenChar(s[i]) {
		i++
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// compactJWS reports whether tok is three base64url segments.
func compactJWS(tok string) bool {
	dots := 0
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case c == '.':
			dots++
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return dots == 2
}

// verify does the full check of one token.
func (v *Verifier) verify(ctx context.Context, tok string) (_ Principal, err error) {
	var token *jwt.Token
	defer func() {
		var ie *Error
		if err != nil && token != nil && errors.As(err, &ie) {
			claims, _ := token.Claims.(jwt.MapClaims)
			name, _ := claims["iss"].(string)
			ie.Issuer = boundIssuer(name)
		}
	}()
	if !compactJWS(tok) {
		return Principal{}, newError(ErrMalformed, "malformed token", nil)
	}
	var iss *issuer
	keyfunc := func(t *jwt.Token) (any, error) {
		var err error
		iss, err = v.keyFor(ctx, t)
		if err != nil {
			return nil, err
		}
		kid, _ := t.Header["kid"].(string)
		k, err := v.lookupKey(ctx, iss, kid)
		if err != nil {
			return nil, err
		}
		if !k.Allows(t.Method.Alg()) {
			return nil, newError(ErrInvalidToken, "key does not match algorithm", nil)
		}
		return k.PublicKey(), nil
	}
	token, err = v.parser.Parse(tok, keyfunc)
	if err != nil {
		return Principal{}, mapJWTError(v.algs, token, err)
	}
	claims, ok := token.Claims.(jwt.MapClaims)
	if !ok || iss == nil {
		return Principal{}, newError(ErrInvalidToken, "invalid token", nil)
	}
	// golang-jwt reports a missing exp or aud as one generic "required claim
	// missing"; name them for the client.
	if _, ok := claims["exp"]; !ok {
		return Principal{}, newError(ErrInvalidToken, "missing exp", nil)
	}
	if _, ok := claims["aud"]; !ok {
		return Principal{}, newError(ErrInvalidToken, "audience not accepted", nil)
	}
	if err := iss.validator.Validate(claims); err != nil {
		return Principal{}, mapJWTError(v.algs, token, err)
	}
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return Principal{}, newError(ErrInvalidToken, "invalid exp", nil)
	}
	if err := v.checkTimes(claims, exp); err != nil {
		return Principal{}, err
	}
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return Principal{}, newError(ErrInvalidToken, "missing subject", nil)
	}
	p := Principal{
		Authenticated: true,
		Subject:       sub,
		Tenant:        stringClaim(claims, v.tenantClaim),
		Issuer:        iss.name,
		Scopes:        scopesFrom(claims, v.scopesClaim),
		ExpiresAt:     exp,
	}
	if iss.tenants != nil && !iss.tenants[p.Tenant] {
		return Principal{}, newError(ErrInvalidToken, "the token's issuer may not assert this tenant", nil)
	}
	p.Scopes = iss.grantable(p.Scopes)
	p.Actor, p.ActorIssuers = actorChain(claims)
	return p, nil
}

// grantable narrows scopes to those the issuer may grant.
func (iss *issuer) grantable(scopes []string) []string {
	if iss.scopes == nil {
		return scopes
	}
	out := scopes[:0:0]
	for _, s := range scopes {
		if iss.scopes[s] {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func setOf(xs []string) map[string]bool {
	if len(xs) == 0 {
		return nil
	}
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// keyFor selects the issuer from the token's iss and checks the header
// before any key is used.
func (v *Verifier) keyFor(_ context.Context, t *jwt.Token) (*issuer, error) {
	alg := t.Method.Alg()
	// Explicit guard, on top of the parser's allow-list: HMAC (whose "key"
	// would be public key bytes) and "none" are never accepted.
	if !jwks.Supported(alg) {
		return nil, newError(ErrInvalidToken, "algorithm not allowed", nil)
	}
	if _, ok := t.Header["crit"]; ok {
		return nil, newError(ErrInvalidToken, "unsupported critical header", nil)
	}
	claims, _ := t.Claims.(jwt.MapClaims)
	name, _ := claims["iss"].(string)
	if name == "" {
		return nil, newError(ErrInvalidToken, "missing issuer", nil)
	}
	iss, ok := v.issuers[name]
	if !ok {
		return nil, newError(ErrUnknownIssuer, "unknown issuer", nil)
	}
	if !slices.Contains(iss.algs, alg) {
		return nil, newError(ErrInvalidToken, "algorithm not allowed", nil)
	}
	return iss, nil
}

// lookupKey finds kid in the issuer's key set. The kid is only ever a map
// key: never a path, URL or log field. For a jwks_url issuer, a key set
// older than maxKeyAge is refetched in the background, and an unknown kid
// triggers a (rate-limited) refetch that the call waits for while its
// context allows: a check whose deadline passes first is answered
// "unavailable" (retry), not "unknown key", and the fetch goes on.
func (v *Verifier) lookupKey(ctx context.Context, iss *issuer, kid string) (verifyKey, error) {
	if kid == "" {
		return verifyKey{}, newError(ErrUnknownKey, "missing key id", nil)
	}
	if ks := iss.keys.Load(); ks != nil {
		if k, ok := (*ks)[kid]; ok {
			if iss.jwksURL != "" {
				v.revalidate(ctx, iss)
			}
			return k, nil
		}
	}
	if iss.jwksURL == "" {
		return verifyKey{}, newError(ErrUnknownKey, "unknown key id", nil)
	}
	v.refresh(ctx, iss)
	ks := iss.keys.Load()
	if ks != nil {
		if k, ok := (*ks)[kid]; ok {
			return k, nil
		}
	}
	if ctx.Err() != nil && v.fetchInProgress(iss) {
		return verifyKey{}, newError(ErrUnavailable, "signing keys are being refreshed", ctx.Err())
	}
	if ks == nil {
		return verifyKey{}, newError(ErrUnavailable, "signing keys unavailable", nil)
	}
	return verifyKey{}, newError(ErrUnknownKey, "unknown key id", nil)
}

func (v *Verifier) fetchInProgress(iss *issuer) bool {
	iss.fetchMu.Lock()
	defer iss.fetchMu.Unlock()
	return iss.fetching != nil
}

// mapJWTError turns a golang-jwt error into an *Error with a client-safe
// description.
func mapJWTError(allowed []string, token *jwt.Token, err error) error {
	var ie *Error
	if errors.As(err, &ie) {
		return ie
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return newError(ErrMalformed, "malformed token", err)
	case errors.Is(err, jwt.ErrTokenExpired):
		return newError(ErrExpired, "token expired", err)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return newError(ErrInvalidToken, "token not yet valid", err)
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return newError(ErrInvalidToken, "token issued in the future", err)
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return newError(ErrInvalidToken, "audience not accepted", err)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return newError(ErrInvalidToken, "issuer not accepted", err)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return newError(ErrInvalidToken, "required claim missing", err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if token != nil && token.Method != nil && !slices.Contains(allowed, token.Method.Alg()) {
			return newError(ErrInvalidToken, "algorithm not allowed", err)
		}
		return newError(ErrInvalidToken, "invalid signature", err)
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return newError(ErrInvalidToken, "algorithm not allowed", err)
	}
	return newError(ErrInvalidToken, "invalid token", err)
}
