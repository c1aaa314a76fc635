package gateway_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/cardsig"
	"github.com/capgate/capgate/test/testutil"
)

// signedServer serves the finance example with cards signed by a fresh
// P-256 key under kid "card-1".
func signedServer(t *testing.T) *testutil.Server {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	cfg := testutil.CopyFinance(t)
	testutil.WriteFile(t, cfg, "keys/card-signing.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return s + "cards: {signing_key_file: keys/card-signing.pem, signing_kid: card-1, signing_jku: \"https://finance.example.com/.well-known/jwks.json\"}\n"
	})
	return testutil.Start(t, testutil.LoadDeployment(t, cfg))
}

// independentVerify checks a served card with go-jose alone: its own JWKS
// parser for the admin key set, its own detached-JWS verification. Only the
// payload (RFC 8785 form without signatures) comes from cardsig.Canonical,
// which is tested against the RFC's vectors.
func independentVerify(t *testing.T, jwksDoc, card []byte) error {
	t.Helper()
	var set jose.JSONWebKeySet
	require.NoError(t, json.Unmarshal(jwksDoc, &set))
	var c struct {
		Signatures []struct{ Protected, Signature string } `json:"signatures"`
	}
	require.NoError(t, json.Unmarshal(card, &c))
	require.Len(t, c.Signatures, 1)
	payload, err := cardsig.Canonical(card)
	require.NoError(t, err)
	obj, err := jose.ParseDetached(c.Signatures[0].Protected+".."+c.Signatures[0].Signature, payload, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return err
	}
	h := obj.Signatures[0].Protected
	require.Equal(t, "card-1", h.KeyID)
	require.Equal(t, "JOSE", h.ExtraHeaders[jose.HeaderType])
	require.Equal(t, "https://finance.example.com/.well-known/jwks.json", h.ExtraHeaders["jku"])
	keys := set.Key("card-1")
	require.Len(t, keys, 1)
	return obj.DetachedVerify(payload, keys[0].Key)
}

// TestSignedCards: with cards.signing_key_file, every card capgate serves
// (public 1.0 and 0.3, extended on both bindings) carries a signature that
// an independent JWS verifier accepts with the key from the admin JWKS, and
// one altered byte breaks it.
func TestSignedCards(t *testing.T) {
	srv := signedServer(t)
	jwksResp, err := srv.HTTP.Get(srv.AdminURL + "/.well-known/jwks.json")
	require.NoError(t, err)
	defer func() { _ = jwksResp.Body.Close() }()
	var doc struct {
		Keys []map[string]any `json:"keys"`
	}
	require.NoError(t, json.NewDecoder(jwksResp.Body).Decode(&doc))
	require.Len(t, doc.Keys, 2, "the token minter's key and the card key")
	jwksDoc, err := json.Marshal(doc)
	require.NoError(t, err)

	auth := "Bearer " + testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	cards := []struct {
		name string
		get  func(t *testing.T) []byte
	}{
		{"public 1.0", func(t *testing.T) []byte { return srv.Do(t, http.MethodGet, cardPath, "").Body }},
		{"public 0.3", func(t *testing.T) []byte { return srv.Do(t, http.MethodGet, "/.well-known/agent.json", "").Body }},
		{"extended HTTP+JSON", func(t *testing.T) []byte {
			return srv.Do(t, http.MethodGet, "/extendedAgentCard", "", "A2A-Version", "1.0", "Authorization", auth).Body
		}},
		{"extended JSON-RPC", func(t *testing.T) []byte {
			return jsonrpcResult(t, srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`, "A2A-Version", "1.0", "Authorization", auth))
		}},
		{"extended 0.3", func(t *testing.T) []byte {
			return srv.Do(t, http.MethodGet, "/v1/card", "", "Authorization", auth).Body
		}},
	}
	v := newValidator(t)
	for _, tc := range cards {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.get(t)
			require.Contains(t, string(b), `"signatures":[{"protected":"`)
			if !strings.Contains(tc.name, "0.3") {
				require.NoError(t, v.Validate(b), "a signed card is still a valid 1.0 card")
			}
			require.NoError(t, independentVerify(t, jwksDoc, b))
			altered := []byte(strings.Replace(string(b), `"Finance Agent"`, `"Finance Agenu"`, 1))
			require.NotEqual(t, b, altered)
			require.Error(t, independentVerify(t, jwksDoc, altered))
		})
	}

	t.Run("ETags are weak and revalidate", func(t *testing.T) {
		pub := srv.Do(t, http.MethodGet, cardPath, "")
		etag := pub.Header.Get("ETag")
		require.True(t, strings.HasPrefix(etag, `W/"`), etag)
		require.Equal(t, http.StatusNotModified, srv.Do(t, http.MethodGet, cardPath, "", "If-None-Match", etag).Status)

		ext := srv.Do(t, http.MethodGet, "/extendedAgentCard", "", "A2A-Version", "1.0", "Authorization", auth)
		etag = ext.Header.Get("ETag")
		require.True(t, strings.HasPrefix(etag, `W/"`), etag)
		again := srv.Do(t, http.MethodGet, "/extendedAgentCard", "", "A2A-Version", "1.0", "Authorization", auth)
		require.NotEqual(t, ext.Body, again.Body, "ES256 signatures differ on every signing")
		require.Equal(t, etag, again.Header.Get("ETag"), "but the card, and so its tag, is the same")
		require.Equal(t, http.StatusNotModified,
			srv.Do(t, http.MethodGet, "/extendedAgentCard", "", "A2A-Version", "1.0", "Authorization", auth, "If-None-Match", etag).Status)
	})
}
