package delegation

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/zitadel/oidc/v3/pkg/client/tokenexchange"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/capgate/capgate/policy/config"
)

// Exchange defaults.
const (
	DefaultExchangeCacheSize = 4096
	// DefaultCacheMargin is taken off expires_in: a cached token is never
	// handed out with less than this much of its life left.
	DefaultCacheMargin = 30 * time.Second
)

// Token types of RFC 8693 §3.
const (
	TokenTypeAccessToken = string(oidc.AccessTokenType) // urn:ietf:params:oauth:token-type:access_token
	TokenTypeJWT         = string(oidc.JWTTokenType)    // urn:ietf:params:oauth:token-type:jwt
)

// Codes of an ExchangeError besides the OAuth 2.0 error codes the server
// answers with (invalid_client, invalid_grant, invalid_target, …).
const (
	CodeNoSubjectToken  = "no_subject_token" // the caller's token is not at hand
	CodeUnavailable     = "unavailable"      // the token endpoint could not be reached
	CodeTimeout         = "timeout"          // no answer within identity.token_exchange.timeout
	CodeCanceled        = "canceled"         // the request was cancelled
	CodeInvalidResponse = "invalid_response" // not an RFC 8693 answer, or broader than asked for
)

// ExchangeError is a failed token exchange. Its message carries the handler
// and the code only: never a token, secret or response body.
type ExchangeError struct {
	Handler     string
	Code        string
	Description string // the server's error_description, or ours; for logs
	Err         error
}

func (e *ExchangeError) Error() string {
	return "token exchange for handler " + e.Handler + " failed: " + e.Code
}

// Unwrap returns the cause (a context error, an *oidc.Error or a transport error).
func (e *ExchangeError) Unwrap() error { return e.Err }

// ExchangeOption configures an Exchange.
type ExchangeOption func(*Exchange)

// WithHTTPClient sets the client used to call the token endpoint. Redirects
// are never followed whatever the client says.
func WithHTTPClient(c *http.Client) ExchangeOption { return func(e *Exchange) { e.client = c } }

// WithLogger sets the logger.
func WithLogger(l *zap.Logger) ExchangeOption { return func(e *Exchange) { e.log = l } }

// WithClock sets the time source of the cache.
func WithClock(now func() time.Time) ExchangeOption { return func(e *Exchange) { e.now = now } }

// WithCacheSize bounds the number of cached tokens (default 4096).
func WithCacheSize(n int) ExchangeOption { return func(e *Exchange) { e.cacheSize = n } }

// WithCacheMargin sets how long before its expiry a cached token stops
// being used (default 30s).
func WithCacheMargin(d time.Duration) ExchangeOption { return func(e *Exchange) { e.margin = d } }

// WithSubjectTokenType sets the subject_token_type sent for the caller's
// token (default TokenTypeAccessToken).
func WithSubjectTokenType(tt string) ExchangeOption {
	return func(e *Exchange) { e.subjectType = oidc.TokenType(tt) }
}

// Exchange obtains handler tokens by RFC 8693 token exchange: subject_token
// = the caller's token, audience = the handler, scope = the narrowed scopes,
// authenticated as capgate's client (client_secret_basic). Tokens are
// cached per (caller token, audience, scopes) until expires_in minus a
// margin. A failure is an *ExchangeError; there is no fallback. It is safe
// for concurrent use.
type Exchange struct {
	te          tokenexchange.TokenExchanger
	client      *http.Client
	log         *zap.Logger
	now         func() time.Time
	timeout     time.Duration
	cacheSize   int
	margin      time.Duration
	subjectType oidc.TokenType

	cache  *lru.Cache[cacheKey, cached]
	flight singleflight.Group
}

type cacheKey [sha256.Size]byte

type cached struct {
	token    string
	deadline time.Time
}

// NewExchange returns an Exchange for x authenticating with secret (the
// content of x.ClientSecretFile; see ReadClientSecret).
func NewExchange(ctx context.Context, x config.TokenExchange, secret string, opts ...ExchangeOption) (*Exchange, error) {
	var errs []error
	if u, err := url.Parse(x.TokenEndpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, errors.New("token_exchange.token_endpoint must be an absolute http(s) URL"))
	}
	if strings.TrimSpace(x.ClientID) == "" {
		errs = append(errs, errors.New("token_exchange.client_id is empty"))
	}
	if secret == "" {
		errs = append(errs, errors.New("token_exchange: the client secret is empty"))
	}
	if x.Timeout < 0 {
		errs = append(errs, errors.New("token_exchange.timeout is negative"))
	}
	e := &Exchange{
		timeout:     x.Timeout,
		cacheSize:   DefaultExchangeCacheSize,
		margin:      DefaultCacheMargin,
		subjectType: oidc.AccessTokenType,
	}
	for _, o := range opts {
		o(e)
	}
	if e.timeout == 0 {
		e.timeout = config.DefaultExchangeTimeout
	}
	if e.log == nil {
		e.log = zap.NewNop()
	}
	e.log = e.log.Named("delegation")
	if e.now == nil {
		e.now = time.Now
	}
	if e.cacheSize <= 0 {
		e.cacheSize = DefaultExchangeCacheSize
	}
	if e.margin < 0 {
		errs = append(errs, errors.New("token exchange: negative cache margin"))
	}
	if !e.subjectType.IsSupported() {
		errs = append(errs, fmt.Errorf("token exchange: subject token type %q is not supported", e.subjectType))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	// A copy, so the caller's client keeps its own redirect policy. The
	// token endpoint's answer is final: a redirect would re-send the
	// caller's token somewhere else.
	hc := &http.Client{Timeout: e.timeout}
	if e.client != nil {
		c := *e.client
		hc = &c
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	e.client = hc

	te, err := tokenexchange.NewTokenExchangerClientCredentials(ctx, x.TokenEndpoint, x.ClientID, secret,
		tokenexchange.WithStaticTokenEndpoint(x.TokenEndpoint, x.TokenEndpoint),
		tokenexchange.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("token exchange: %w", err)
	}
	e.te = te
	cache, err := lru.New[cacheKey, cached](e.cacheSize)
	if err != nil {
		return nil, fmt.Errorf("token exchange cache: %w", err)
	}
	e.cache = cache
	return e, nil
}

// Token exchanges the caller's token for one for t.Handler.
func (e *Exchange) Token(ctx context.Context, s Subject, t Target) (string, error) {
	if t.Handler == "" {
		return "", errors.New("token exchange: no handler (audience)")
	}
	if !s.Principal.Authenticated {
		return "", &ExchangeError{Handler: t.Handler, Code: CodeNoSubjectToken, Description: "anonymous caller", Err: ErrAnonymous}
	}
	subjectToken := s.SubjectToken()
	if subjectToken == "" {
		return "", &ExchangeError{Handler: t.Handler, Code: CodeNoSubjectToken, Description: "the caller's token is missing"}
	}
	if err := ctx.Err(); err != nil {
		return "", contextError(t.Handler, err)
	}
	scopes := Narrow(s.Principal.Scopes, t.Scopes)
	key := keyOf(subjectToken, t.Handler, scopes)
	if c, ok := e.cache.Get(key); ok {
		if e.now().Before(c.deadline) {
			return c.token, nil
		}
		e.cache.Remove(key)
	}

	// Identical concurrent requests share one exchange. It runs under its
	// own timeout, so one caller hanging up does not fail the others; each
	// caller still stops waiting when its own ctx ends. The cache is read
	// again inside the flight: a caller that missed it just before another
	// flight stored its token and ended must not start a second exchange.
	ch := e.flight.DoChan(string(key[:]), func() (any, error) {
		if c, ok := e.cache.Get(key); ok && e.now().Before(c.deadline) {
			return c.token, nil
		}
		xctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.timeout)
		defer cancel()
		return e.exchange(xctx, s, t.Handler, scopes, key)
	})
	select {
	case <-ctx.Done():
		return "", contextError(t.Handler, ctx.Err())
	case r := <-ch:
		if r.Err != nil {
			return "", r.Err
		}
		return r.Val.(string), nil
	}
}

func (e *Exchange) exchange(ctx context.Context, s Subject, handler string, scopes []string, key cacheKey) (string, error) {
	start := e.now()
	resp, err := tokenexchange.ExchangeToken(ctx, e.te, s.SubjectToken(), e.subjectType, "", "",
		nil, []string{handler}, scopes, oidc.AccessTokenType)
	if err != nil {
		xe := classify(handler, err)
		e.log.Warn("token exchange failed", zap.String("decision_id", s.DecisionID),
			zap.String("handler", handler), zap.String("code", xe.Code), zap.String("description", xe.Description))
		return "", xe
	}
	if problem := checkResponse(resp, scopes); problem != "" {
		e.log.Warn("token exchange failed", zap.String("decision_id", s.DecisionID),
			zap.String("handler", handler), zap.String("code", CodeInvalidResponse), zap.String("description", problem))
		return "", &ExchangeError{Handler: handler, Code: CodeInvalidResponse, Description: problem}
	}
	if life := time.Duration(resp.ExpiresIn)*time.Second - e.margin; resp.ExpiresIn > 0 && life > 0 {
		deadline := start.Add(life)
		if exp := s.Principal.ExpiresAt; !exp.IsZero() && exp.Before(deadline) {
			deadline = exp // never outlive the caller's own token
		}
		e.cache.Add(key, cached{token: resp.AccessToken, deadline: deadline})
	}
	e.log.Debug("token exchanged", zap.String("decision_id", s.DecisionID),
		zap.String("handler", handler), zap.Uint64("expires_in", resp.ExpiresIn))
	return resp.AccessToken, nil
}

// checkResponse returns what is wrong with an RFC 8693 answer, or "".
func checkResponse(resp *oidc.TokenExchangeResponse, asked []string) string {
	switch {
	case resp == nil || resp.AccessToken == "":
		return "no access_token"
	case !strings.EqualFold(resp.TokenType, oidc.BearerToken):
		return "token_type is not Bearer"
	case resp.IssuedTokenType != oidc.AccessTokenType && resp.IssuedTokenType != oidc.JWTTokenType:
		return "issued_token_type is not an access token"
	}
	// RFC 6749 §5.1: scope is omitted when it is what was asked for.
	for _, sc := range fields(resp.Scopes) {
		if _, ok := slices.BinarySearch(asked, sc); !ok {
			return "the issued scope is broader than the one requested"
		}
	}
	return ""
}

// classify turns an exchange error into an *ExchangeError whose cause never
// holds a response body.
func classify(handler string, err error) *ExchangeError {
	var oe *oidc.Error
	var ue *url.Error
	switch {
	case errors.As(err, &oe):
		return &ExchangeError{Handler: handler, Code: string(oe.ErrorType), Description: oe.Description, Err: oe}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return contextError(handler, err)
	case errors.As(err, &ue):
		return &ExchangeError{Handler: handler, Code: CodeUnavailable, Description: "the token endpoint could not be reached", Err: ue}
	default:
		// A non-OAuth error answer or an unreadable one; its text may hold
		// the response body, so it is not kept.
		return &ExchangeError{Handler: handler, Code: CodeInvalidResponse, Description: "not an OAuth 2.0 token response"}
	}
}

func contextError(handler string, err error) *ExchangeError {
	code := CodeCanceled
	if errors.Is(err, context.DeadlineExceeded) {
		code = CodeTimeout
	}
	return &ExchangeError{Handler: handler, Code: code, Description: err.Error(), Err: err}
}

// keyOf digests (caller token, audience, scopes); the token is not kept.
func keyOf(subjectToken, audience string, scopes []string) cacheKey {
	h := sha256.New()
	h.Write([]byte(subjectToken))
	h.Write([]byte{0})
	h.Write([]byte(audience))
	for _, s := range scopes { // sorted by Narrow
		h.Write([]byte{0})
		h.Write([]byte(s))
	}
	var k cacheKey
	h.Sum(k[:0])
	return k
}

// ReadClientSecret reads identity.token_exchange.client_secret_file
// (relative to the config file), without surrounding white space.
func ReadClientSecret(cfg *config.Config) (string, error) {
	x := cfg.Identity.TokenExchange
	if x == nil {
		return "", errors.New("identity.token_exchange is not configured")
	}
	b, err := cfg.ReadFile(x.ClientSecretFile)
	if err != nil {
		return "", fmt.Errorf("identity.token_exchange.client_secret_file: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", errors.New("identity.token_exchange.client_secret_file: empty")
	}
	return secret, nil
}
