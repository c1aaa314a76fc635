package delegation_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/delegation"
	"github.com/capgate/capgate/sidecar/identity"
)

const capgateSecret = "capgate-client-secret-4f1c"

// exchangeFixture: the OAuth server, the caller's verified token, a handler.
type exchangeFixture struct {
	op       *testOP
	caller   string // the caller's raw token
	subject  delegation.Subject
	handler  *handlerServer
	exchange config.TokenExchange
}

func newExchangeFixture(t *testing.T) *exchangeFixture {
	t.Helper()
	o := newTestOP(t, capgateSecret, "reconcile", "lookup")
	caller := o.callerToken(t, "invoice.read", "recon.run", "admin")
	p, err := o.verifier(t, agentAudience).Verify(t.Context(), "Bearer "+caller)
	require.NoError(t, err)
	require.Equal(t, callerClientID, p.Subject)
	require.Equal(t, []string{"admin", "invoice.read", "recon.run"}, p.Scopes)
	return &exchangeFixture{
		op:       o,
		caller:   caller,
		subject:  delegation.Subject{Principal: p, Authorization: "Bearer " + caller, DecisionID: "d-1"},
		handler:  newHandlerServer(t, o.verifier(t, "reconcile")),
		exchange: config.TokenExchange{TokenEndpoint: o.tokenEndpoint(), ClientID: capgateClientID, Timeout: 2 * time.Second},
	}
}

func reconcile(scopes ...string) delegation.Target {
	return delegation.Target{Capability: "reconcile-invoice", Handler: "reconcile", Scopes: scopes}
}

func TestExchangeHandlerReceivesExchangedToken(t *testing.T) {
	f := newExchangeFixture(t)
	ex, err := delegation.NewExchange(t.Context(), f.exchange, capgateSecret)
	require.NoError(t, err)

	tok, err := ex.Token(t.Context(), f.subject, reconcile(delegation.Narrow(f.subject.Principal.Scopes, []string{"recon.run"})...))
	require.NoError(t, err)
	require.NotEqual(t, f.caller, tok)
	require.EqualValues(t, 1, f.op.exchanges.Load())

	status, seen := f.handler.call(t, tok)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, callerClientID, seen.Subject)
	require.Equal(t, f.op.issuer, seen.Issuer)
	require.Equal(t, callerTenant, seen.Tenant)
	require.Equal(t, []string{"recon.run"}, seen.Scopes, "the scope the server issued: narrowed")
	require.Equal(t, []any{"reconcile"}, seen.Claims["aud"])
	require.Equal(t, capgateClientID, seen.Claims["client_id"])
	require.Equal(t, []string{capgateClientID, callerActor}, seen.Actor)

	got := string(f.handler.received())
	require.Contains(t, got, "Bearer "+tok)
	for _, secret := range []string{
		capgateSecret,
		base64.StdEncoding.EncodeToString([]byte(capgateClientID + ":" + capgateSecret)),
		f.caller, // the caller's own token is not forwarded either
	} {
		require.NotContains(t, got, secret)
	}

	// The same token for another audience is refused by this handler.
	lookup, err := ex.Token(t.Context(), f.subject, delegation.Target{Capability: "lookup-invoice", Handler: "lookup", Scopes: []string{"invoice.read"}})
	require.NoError(t, err)
	status, _ = f.handler.call(t, lookup)
	require.Equal(t, http.StatusUnauthorized, status)
}

func TestExchangeCache(t *testing.T) {
	f := newExchangeFixture(t)
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ex, err := delegation.NewExchange(t.Context(), f.exchange, capgateSecret, delegation.WithClock(clock))
	require.NoError(t, err)

	first, err := ex.Token(t.Context(), f.subject, reconcile("recon.run", "invoice.read"))
	require.NoError(t, err)

	steps := []struct {
		name      string
		subject   delegation.Subject
		target    delegation.Target
		advance   time.Duration
		exchanges int64
		same      bool
	}{
		{name: "same request", subject: f.subject, target: reconcile("recon.run", "invoice.read"), exchanges: 1, same: true},
		{name: "scopes in another order, duplicated", subject: f.subject, target: reconcile("invoice.read", "recon.run", "recon.run"), exchanges: 1, same: true},
		{name: "scopes the caller lacks are not part of the key", subject: f.subject, target: reconcile("recon.run", "invoice.read", "payments.write"), exchanges: 1, same: true},
		{name: "other scopes", subject: f.subject, target: reconcile("recon.run"), exchanges: 2},
		{name: "other audience", subject: f.subject, target: delegation.Target{Handler: "lookup", Scopes: []string{"recon.run", "invoice.read"}}, exchanges: 3},
		{name: "other caller token", subject: func() delegation.Subject {
			s := f.subject
			s.Authorization = "Bearer " + f.op.callerToken(t, "invoice.read", "recon.run", "admin")
			return s
		}(), target: reconcile("recon.run", "invoice.read"), exchanges: 4},
		{name: "still cached before expires_in minus the margin", subject: f.subject, target: reconcile("recon.run", "invoice.read"), advance: 4 * time.Minute, exchanges: 4, same: true},
		{name: "exchanged again once inside the margin", subject: f.subject, target: reconcile("recon.run", "invoice.read"), advance: 40 * time.Second, exchanges: 5},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			advance(s.advance)
			tok, err := ex.Token(t.Context(), s.subject, s.target)
			require.NoError(t, err)
			require.Equal(t, s.exchanges, f.op.exchanges.Load())
			if s.same {
				require.Equal(t, first, tok)
			} else {
				require.NotEqual(t, first, tok)
			}
		})
	}
}

func TestExchangeCacheNeverOutlivesCallerToken(t *testing.T) {
	f := newExchangeFixture(t)
	now := time.Now()
	f.subject.Principal.ExpiresAt = now.Add(10 * time.Second)
	clock := now
	ex, err := delegation.NewExchange(t.Context(), f.exchange, capgateSecret, delegation.WithClock(func() time.Time { return clock }))
	require.NoError(t, err)
	_, err = ex.Token(t.Context(), f.subject, reconcile("recon.run"))
	require.NoError(t, err)
	_, err = ex.Token(t.Context(), f.subject, reconcile("recon.run"))
	require.NoError(t, err)
	require.EqualValues(t, 1, f.op.exchanges.Load())
	clock = now.Add(11 * time.Second)
	_, err = ex.Token(t.Context(), f.subject, reconcile("recon.run"))
	require.NoError(t, err)
	require.EqualValues(t, 2, f.op.exchanges.Load())
}

func TestExchangeConcurrentRequestsShareOneExchange(t *testing.T) {
	f := newExchangeFixture(t)
	ex, err := delegation.NewExchange(t.Context(), f.exchange, capgateSecret)
	require.NoError(t, err)
	var wg sync.WaitGroup
	toks := make([]string, 16)
	errs := make([]error, 16)
	for i := range toks {
		wg.Go(func() { toks[i], errs[i] = ex.Token(t.Context(), f.subject, reconcile("recon.run")) })
	}
	wg.Wait()
	for i := range toks {
		require.NoError(t, errs[i])
		require.Equal(t, toks[0], toks[i])
	}
	require.EqualValues(t, 1, f.op.exchanges.Load())
}

// misbehaving starts a 127.0.0.1 server answering the token endpoint with h,
// for answers a conforming OAuth server does not give.
func misbehaving(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/oauth/token"
}

func TestExchangeFailuresDeny(t *testing.T) {
	f := newExchangeFixture(t)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL + "/oauth/token"
	down.Close()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })

	tests := []struct {
		name     string
		endpoint string
		secret   string
		subject  func() delegation.Subject
		target   delegation.Target
		ctx      func() context.Context
		timeout  time.Duration
		code     string
	}{
		{name: "wrong client secret", secret: "not-the-secret", code: "invalid_client"},
		{name: "audience the server refuses", target: delegation.Target{Handler: "payments", Scopes: []string{"recon.run"}}, code: "invalid_target"},
		{name: "subject token the server does not know", subject: func() delegation.Subject {
			s := f.subject
			s.Authorization = "Bearer eyJhbGciOiJub25lIn0.e30.x"
			return s
		}, code: "invalid_request"},
		{name: "server down", endpoint: downURL, code: delegation.CodeUnavailable},
		{name: "no answer in time", endpoint: misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
			_ = r.ParseForm() // read the body, so a client hanging up ends r.Context()
			select {
			case <-hang:
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}), timeout: 100 * time.Millisecond, code: delegation.CodeTimeout},
		{name: "caller hung up", ctx: func() context.Context {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return ctx
		}, code: delegation.CodeCanceled},
		{name: "not an OAuth answer", endpoint: misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "<html>bad gateway "+r.PostFormValue("subject_token")+"</html>", http.StatusBadGateway)
		}), code: delegation.CodeInvalidResponse},
		{name: "redirect is not followed", endpoint: misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, f.op.tokenEndpoint(), http.StatusTemporaryRedirect)
		}), code: delegation.CodeInvalidResponse},
		{name: "scope broader than asked", endpoint: misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"access_token":"x.y.z","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":300,"scope":"recon.run admin"}`))
		}), code: delegation.CodeInvalidResponse},
		{name: "not a bearer token", endpoint: misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"access_token":"x.y.z","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"DPoP","expires_in":300}`))
		}), code: delegation.CodeInvalidResponse},
		{name: "anonymous caller", subject: func() delegation.Subject { return delegation.Subject{} }, code: delegation.CodeNoSubjectToken},
		{name: "caller token missing", subject: func() delegation.Subject {
			s := f.subject
			s.Authorization = ""
			return s
		}, code: delegation.CodeNoSubjectToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := f.exchange
			if tt.endpoint != "" {
				x.TokenEndpoint = tt.endpoint
			}
			if tt.timeout != 0 {
				x.Timeout = tt.timeout
			}
			secret := capgateSecret
			if tt.secret != "" {
				secret = tt.secret
			}
			subject := f.subject
			if tt.subject != nil {
				subject = tt.subject()
			}
			target := reconcile("recon.run")
			if tt.target.Handler != "" {
				target = tt.target
			}
			ctx := t.Context()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			ex, err := delegation.NewExchange(t.Context(), x, secret)
			require.NoError(t, err)
			// A router with a self-issuing fallback available still denies.
			m, err := identity.GenerateMinter("https://agent.example")
			require.NoError(t, err)
			r := delegation.NewRouter(delegation.NewSelfIssued(m, config.Identity{AgentID: "agent"}, config.Auth{}), ex, nil)
			for _, iss := range []delegation.Issuer{ex, r} {
				tok, err := iss.Token(ctx, subject, target)
				if tt.code == delegation.CodeNoSubjectToken && subject.Principal.Authenticated == false && iss == r {
					// The router never exchanges for an anonymous caller: it
					// self-issues a scope-less token for "anonymous".
					require.NoError(t, err)
					require.NotEmpty(t, tok)
					continue
				}
				require.Error(t, err)
				require.Empty(t, tok)
				var xe *delegation.ExchangeError
				require.ErrorAs(t, err, &xe)
				require.Equal(t, tt.code, xe.Code)
				require.Equal(t, "token exchange for handler "+target.Handler+" failed: "+tt.code, err.Error())
				require.NotContains(t, err.Error(), secret)
			}
		})
	}
}

func TestNewExchangeValidates(t *testing.T) {
	tests := []struct {
		name   string
		x      config.TokenExchange
		secret string
		opts   []delegation.ExchangeOption
		want   []string
	}{
		{name: "everything wrong", x: config.TokenExchange{TokenEndpoint: "ftp://x", Timeout: -1}, want: []string{
			"token_exchange.token_endpoint must be an absolute http(s) URL",
			"token_exchange.client_id is empty",
			"token_exchange: the client secret is empty",
			"token_exchange.timeout is negative",
		}},
		{name: "relative endpoint", x: config.TokenExchange{TokenEndpoint: "/oauth/token", ClientID: "c"}, secret: "s",
			want: []string{"token_exchange.token_endpoint must be an absolute http(s) URL"}},
		{name: "unknown subject token type", x: config.TokenExchange{TokenEndpoint: "https://idp.example/token", ClientID: "c"}, secret: "s",
			opts: []delegation.ExchangeOption{delegation.WithSubjectTokenType("urn:example:cookie")},
			want: []string{`token exchange: subject token type "urn:example:cookie" is not supported`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := delegation.NewExchange(t.Context(), tt.x, tt.secret, tt.opts...)
			require.Error(t, err)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}
