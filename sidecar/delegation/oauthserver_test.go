package delegation_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/identity"
)

// The OAuth 2.0 server of these tests is zitadel/oidc's op.Provider over its
// example in-memory storage, on 127.0.0.1. exchangeStorage sets the
// deployment's rules on top of it: caller (client credentials) tokens and
// exchanged tokens are JWTs, only handler audiences may be asked for, and an
// exchange can only narrow the subject token's scopes.

const (
	capgateClientID = "capgate"
	callerClientID  = "sid1"       // the example storage's service user
	callerSecret    = "verysecret" // its secret
	agentAudience   = "https://agent.example"
	callerTenant    = "acme"
	callerActor     = "orchestrator"
)

type exchangeStorage struct {
	*storage.Storage
	handlers []string // audiences an exchange may ask for
}

// jwtClient makes the wrapped client's access tokens JWTs.
type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

func (s *exchangeStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

func (s *exchangeStorage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	c, err := s.Storage.ClientCredentials(ctx, id, secret)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

// ClientCredentialsTokenRequest issues the caller's token for the agent.
func (s *exchangeStorage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	return &oidc.JWTTokenRequest{Subject: id, Audience: []string{agentAudience}, Scopes: scopes}, nil
}

// GetPrivateClaimsFromRequest gives the caller's token its scope, tenant
// and the orchestrator it acts for.
func (s *exchangeStorage) GetPrivateClaimsFromRequest(_ context.Context, req op.TokenRequest, _ []string) (map[string]any, error) {
	return map[string]any{
		"scope":  strings.Join(req.GetScopes(), " "),
		"tenant": callerTenant,
		"act":    map[string]any{"sub": callerActor},
	}, nil
}

func (s *exchangeStorage) ValidateTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) error {
	if req.GetRequestedTokenType() == "" {
		req.SetRequestedTokenType(oidc.AccessTokenType)
	}
	aud := req.GetAudience()
	if len(aud) != 1 || !slices.Contains(s.handlers, aud[0]) {
		return oidc.ErrInvalidTarget().WithDescription("audience not allowed")
	}
	held, _ := req.GetExchangeSubjectTokenClaims()["scope"].(string)
	for _, sc := range req.GetScopes() {
		if !slices.Contains(strings.Fields(held), sc) {
			return oidc.ErrInvalidScope().WithDescription("scope not held by the subject")
		}
	}
	req.SetCurrentScopes(req.GetScopes())
	return nil
}

// GetPrivateClaimsFromTokenExchangeRequest: scope, the subject's tenant,
// and the exchanging client as the actor over the subject's own act.
func (s *exchangeStorage) GetPrivateClaimsFromTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) (map[string]any, error) {
	sub := req.GetExchangeSubjectTokenClaims()
	act := map[string]any{"sub": req.GetClientID()}
	if prior, ok := sub["act"].(map[string]any); ok {
		act["act"] = prior
	}
	claims := map[string]any{"act": act, "tenant": sub["tenant"]}
	if len(req.GetScopes()) > 0 {
		claims["scope"] = strings.Join(req.GetScopes(), " ")
	}
	return claims, nil
}

type testOP struct {
	srv       *httptest.Server
	issuer    string
	exchanges atomic.Int64 // token-exchange requests received
}

func (o *testOP) tokenEndpoint() string { return o.issuer + "/oauth/token" }

// newTestOP starts the OAuth server; capgate's client has secret.
func newTestOP(t *testing.T, secret string, handlers ...string) *testOP {
	t.Helper()
	o := &testOP{srv: httptest.NewUnstartedServer(nil)}
	o.issuer = "http://" + o.srv.Listener.Addr().String()
	clients := map[string]*storage.Client{capgateClientID: storage.WebClient(capgateClientID, secret)}
	st := &exchangeStorage{Storage: storage.NewStorageWithClients(storage.NewUserStore(o.issuer), clients), handlers: handlers}
	p, err := op.NewProvider(&op.Config{CryptoKey: sha256.Sum256([]byte(t.Name())), CryptoKeyId: "k1"},
		st, op.StaticIssuer(o.issuer), op.WithAllowInsecure())
	require.NoError(t, err)
	o.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" && r.PostFormValue("grant_type") == string(oidc.GrantTypeTokenExchange) {
			o.exchanges.Add(1)
		}
		p.ServeHTTP(w, r)
	})
	o.srv.Start()
	t.Cleanup(o.srv.Close)
	return o
}

// callerToken is what a partner's orchestrator presents to the agent.
func (o *testOP) callerToken(t *testing.T, scopes ...string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(scopes, " ")}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, o.tokenEndpoint(), strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(callerClientID, callerSecret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		AccessToken string `json:"access_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.NotEmpty(t, body.AccessToken)
	return body.AccessToken
}

// verifier trusts the OP's tokens for audience (keys from its JWKS endpoint).
func (o *testOP) verifier(t *testing.T, audience string) *identity.Verifier {
	t.Helper()
	v, err := identity.NewVerifier(t.Context(), config.Auth{Issuers: []config.Issuer{{
		Issuer: o.issuer, Audiences: []string{audience}, JWKSURL: o.issuer + "/keys", Algorithms: []string{"RS256"},
	}}}, nil)
	require.NoError(t, err)
	return v
}

// handlerServer is a skill handler on 127.0.0.1: it verifies the bearer
// token it receives with v and answers the principal it saw. Every request
// is kept as received, to check what reached the handler.
type handlerServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen [][]byte
}

type seenPrincipal struct {
	Subject string         `json:"sub"`
	Issuer  string         `json:"iss"`
	Tenant  string         `json:"tenant"`
	Scopes  []string       `json:"scopes"`
	Actor   []string       `json:"actor"`
	Claims  map[string]any `json:"claims"`
}

func newHandlerServer(t *testing.T, v *identity.Verifier) *handlerServer {
	t.Helper()
	h := &handlerServer{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, err := httputil.DumpRequest(r, true)
		if err == nil {
			h.mu.Lock()
			h.seen = append(h.seen, dump)
			h.mu.Unlock()
		}
		p, err := v.Verify(r.Context(), r.Header.Get("Authorization"))
		if err != nil || !p.Authenticated {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		claims := jwt.MapClaims{}
		if _, _, err := jwt.NewParser().ParseUnverified(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), claims); err != nil {
			http.Error(w, "unreadable token", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(seenPrincipal{p.Subject, p.Issuer, p.Tenant, p.Scopes, p.Actor, claims})
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// call invokes the handler with tok as the dispatcher does.
func (h *handlerServer) call(t *testing.T, tok string) (int, seenPrincipal) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.srv.URL, strings.NewReader(`{"jsonrpc":"2.0"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var p seenPrincipal
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	}
	return resp.StatusCode, p
}

func (h *handlerServer) received() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Concat(h.seen...)
}
