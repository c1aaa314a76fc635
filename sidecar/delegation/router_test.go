package delegation_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/delegation"
)

func TestRouter(t *testing.T) {
	f := newExchangeFixture(t)
	m := newMinter(t, time.Now)
	self := delegation.NewSelfIssued(m, config.Identity{AgentID: agentID}, config.Auth{})
	ex, err := delegation.NewExchange(t.Context(), f.exchange, capgateSecret)
	require.NoError(t, err)

	const (
		exchanged = "exchanged"
		minted    = "self-issued"
		anonymous = "anonymous"
	)
	tests := []struct {
		name     string
		router   delegation.Issuer
		subject  delegation.Subject
		handler  string
		want     string // exchanged, minted, none
		errorMsg string
	}{
		{name: "listed handler is exchanged", router: delegation.NewRouter(self, ex, []string{"reconcile"}), subject: f.subject, handler: "reconcile", want: exchanged},
		{name: "other handler is self-issued", router: delegation.NewRouter(self, ex, []string{"reconcile"}), subject: f.subject, handler: "lookup", want: minted},
		{name: "empty list: every handler is exchanged", router: delegation.NewRouter(self, ex, nil), subject: f.subject, handler: "lookup", want: exchanged},
		{name: "no exchange: self-issued", router: delegation.NewRouter(self, nil, []string{"reconcile"}), subject: f.subject, handler: "reconcile", want: minted},
		{name: "anonymous caller: self-issued for subject anonymous, no scopes", router: delegation.NewRouter(self, ex, nil), handler: "reconcile", want: anonymous},
		{name: "anonymous caller without a self issuer", router: delegation.NewRouter(nil, ex, nil), handler: "reconcile",
			errorMsg: "self-issued token for handler reconcile: no authenticated caller to pass down"},
		{name: "no issuer for the handler", router: delegation.NewRouter(nil, ex, []string{"reconcile"}), subject: f.subject, handler: "lookup",
			errorMsg: "no token issuer for handler lookup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := tt.router.Token(t.Context(), tt.subject, delegation.Target{Capability: "c", Handler: tt.handler, Scopes: []string{"recon.run"}})
			if tt.errorMsg != "" {
				require.EqualError(t, err, tt.errorMsg)
				require.Empty(t, tok)
				return
			}
			require.NoError(t, err)
			switch tt.want {
			case anonymous:
				p, err := handlerVerifier(t, m, tt.handler, config.Auth{}, time.Now).Verify(t.Context(), "Bearer "+tok)
				require.NoError(t, err)
				require.Equal(t, delegation.AnonymousSubject, p.Subject)
				require.Empty(t, p.Scopes)
				require.Equal(t, []string{agentID}, p.Actor)
			case exchanged:
				p, err := f.op.verifier(t, tt.handler).Verify(t.Context(), "Bearer "+tok)
				require.NoError(t, err)
				require.Equal(t, f.op.issuer, p.Issuer)
				require.Equal(t, []string{capgateClientID, callerActor}, p.Actor)
			case minted:
				p, err := handlerVerifier(t, m, tt.handler, config.Auth{}, time.Now).Verify(t.Context(), "Bearer "+tok)
				require.NoError(t, err)
				require.Equal(t, agentIssuer, p.Issuer)
				require.Equal(t, []string{agentID, callerActor}, p.Actor)
			}
		})
	}
}

func TestFromConfig(t *testing.T) {
	f := newExchangeFixture(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "client.secret"), []byte(capgateSecret+"\n"), 0o600))
	x := f.exchange
	x.ClientSecretFile = "client.secret"
	x.Handlers = []string{"reconcile"}
	cfg := &config.Config{Dir: dir, Identity: config.Identity{Issuer: agentIssuer, AgentID: agentID, TTL: 30 * time.Second, TokenExchange: &x}}

	iss, m, err := delegation.FromConfig(t.Context(), cfg, zap.NewNop())
	require.NoError(t, err)
	require.NotNil(t, m)
	tok, err := iss.Token(t.Context(), f.subject, reconcile("recon.run"))
	require.NoError(t, err)
	status, seen := f.handler.call(t, tok)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, []string{"recon.run"}, seen.Scopes)

	x.ClientSecretFile = "missing.secret"
	_, _, err = delegation.FromConfig(t.Context(), cfg, zap.NewNop())
	require.ErrorContains(t, err, "identity.token_exchange.client_secret_file: read missing.secret:")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "blank.secret"), []byte(" \n"), 0o600))
	x.ClientSecretFile = "blank.secret"
	_, _, err = delegation.FromConfig(t.Context(), cfg, zap.NewNop())
	require.EqualError(t, err, "identity.token_exchange.client_secret_file: empty")
}
