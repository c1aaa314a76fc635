package cardsig_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/cardsig"
	"github.com/capgate/capgate/sidecar/jwks"
)

const testCard = `{"name":"Finance Agent","description":"Invoices <and> reconciliation.","supportedInterfaces":[{"url":"https://finance.example.com/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"version":"1.4.0+skills.ec81e7a6","capabilities":{"streaming":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["application/json"],"skills":[{"id":"lookup-invoice","name":"Look up","description":"Finds € invoices.","tags":["finance"]}],"n":1.50}`

func pemKey(t *testing.T, rsaKey bool) []byte {
	t.Helper()
	var (
		der []byte
		err error
	)
	if rsaKey {
		k, gerr := rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, gerr)
		der, err = x509.MarshalPKCS8PrivateKey(k)
	} else {
		k, gerr := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, gerr)
		der, err = x509.MarshalPKCS8PrivateKey(k)
	}
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func keySet(t *testing.T, s *cardsig.Signer) (jwks.Set, []byte) {
	t.Helper()
	doc, err := cardsig.AddKey(nil, s)
	require.NoError(t, err)
	set, skipped, err := jwks.Parse(doc)
	require.NoError(t, err)
	require.Empty(t, skipped)
	return set, doc
}

// joseVerify is an independent verifier: go-jose parses the key set and
// the detached JWS and checks the signature over the canonical payload.
func joseVerify(t *testing.T, jwksDoc, signed []byte) error {
	t.Helper()
	var set jose.JSONWebKeySet
	require.NoError(t, json.Unmarshal(jwksDoc, &set))
	var card struct {
		Signatures []cardsig.Signature `json:"signatures"`
	}
	require.NoError(t, json.Unmarshal(signed, &card))
	require.Len(t, card.Signatures, 1)
	sig := card.Signatures[0]
	payload, err := cardsig.Canonical(signed)
	require.NoError(t, err)
	obj, err := jose.ParseDetached(sig.Protected+".."+sig.Signature, payload, []jose.SignatureAlgorithm{jose.ES256, jose.RS256})
	if err != nil {
		return err
	}
	kid := obj.Signatures[0].Header.KeyID
	keys := set.Key(kid)
	require.Len(t, keys, 1, "kid %q in the key set", kid)
	return obj.DetachedVerify(payload, keys[0].Key)
}

func TestSignVerify(t *testing.T) {
	for _, tc := range []struct {
		name string
		rsa  bool
		alg  string
	}{{"ES256", false, "ES256"}, {"RS256", true, "RS256"}} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := cardsig.NewSigner(pemKey(t, tc.rsa), "", "https://finance.example.com/jwks.json")
			require.NoError(t, err)
			set, doc := keySet(t, s)
			signed, err := s.Sign([]byte(testCard))
			require.NoError(t, err)

			require.True(t, strings.HasPrefix(string(signed), testCard[:len(testCard)-1]+`,"signatures":[{"protected":"`),
				"the card's members keep their order and bytes; signatures comes last")
			res, err := cardsig.Verify(signed, set)
			require.NoError(t, err)
			require.Len(t, res, 1)
			require.NoError(t, res[0].Err)
			require.Equal(t, s.KeyID(), res[0].KeyID)
			require.Equal(t, tc.alg, res[0].Alg)
			require.Equal(t, "https://finance.example.com/jwks.json", res[0].JKU)
			require.NoError(t, joseVerify(t, doc, signed))

			var hdr map[string]any
			var card struct{ Signatures []cardsig.Signature }
			require.NoError(t, json.Unmarshal(signed, &card))
			hb, err := base64.RawURLEncoding.DecodeString(card.Signatures[0].Protected)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(hb, &hdr))
			require.Equal(t, map[string]any{"alg": tc.alg, "typ": "JOSE", "kid": s.KeyID(), "jku": "https://finance.example.com/jwks.json"}, hdr)

			t.Run("formatting does not matter, content does", func(t *testing.T) {
				var v any
				require.NoError(t, json.Unmarshal(signed, &v))
				indented, err := json.MarshalIndent(v, "", "    ")
				require.NoError(t, err)
				_, err = cardsig.Verify(indented, set)
				require.NoError(t, err, "re-serialized (reordered, indented, HTML-escaped) card verifies")
				require.NoError(t, joseVerify(t, doc, indented))
			})
			t.Run("re-signing replaces the signatures", func(t *testing.T) {
				again, err := s.Sign(signed)
				require.NoError(t, err)
				require.Equal(t, 1, strings.Count(string(again), `"signatures"`))
				_, err = cardsig.Verify(again, set)
				require.NoError(t, err)
			})
			t.Run("one altered byte fails", func(t *testing.T) {
				for _, alter := range []struct{ from, to string }{
					{"Look up", "Look uP"},
					{"1.50", "1.51"},
					{"lookup-invoice", "lookup-invoicf"},
					{`"streaming":true`, `"streaming":false`},
				} {
					altered := []byte(strings.Replace(string(signed), alter.from, alter.to, 1))
					res, err := cardsig.Verify(altered, set)
					require.ErrorIs(t, err, cardsig.ErrNoValid, alter.from)
					require.EqualError(t, res[0].Err, "signature does not match the card")
					require.Error(t, joseVerify(t, doc, altered), "go-jose also refuses %s", alter.from)
				}
				// Other bytes for the same content (an escape, a number's
				// trailing zero) are not a change: JCS removes them.
				same := []byte(strings.Replace(strings.Replace(string(signed), "Look up", `Look \u0075p`, 1), "1.50", "1.5", 1))
				_, err := cardsig.Verify(same, set)
				require.NoError(t, err)
				sigAltered := []byte(strings.Replace(string(signed), `"signature":"`, `"signature":"A`, 1))
				_, err = cardsig.Verify(sigAltered, set)
				require.ErrorIs(t, err, cardsig.ErrNoValid)
			})
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	s, err := cardsig.NewSigner(pemKey(t, false), "card-key-1", "")
	require.NoError(t, err)
	require.Equal(t, "card-key-1", s.KeyID())
	set, _ := keySet(t, s)
	signed, err := s.Sign([]byte(testCard))
	require.NoError(t, err)

	other, err := cardsig.NewSigner(pemKey(t, false), "card-key-1", "")
	require.NoError(t, err)
	otherSet, _ := keySet(t, other)

	hmac := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{})
	hmac.Header["kid"] = "card-key-1"
	hs, err := hmac.SignedString([]byte("secret"))
	require.NoError(t, err)
	hsProtected := strings.Split(hs, ".")[0]

	withSig := func(protected, sig string) []byte {
		return []byte(testCard[:len(testCard)-1] + `,"signatures":[{"protected":"` + protected + `","signature":"` + sig + `"}]}`)
	}
	enc := func(h string) string { return base64.RawURLEncoding.EncodeToString([]byte(h)) }
	validSig := func() string {
		var c struct{ Signatures []cardsig.Signature }
		require.NoError(t, json.Unmarshal(signed, &c))
		return c.Signatures[0].Signature
	}()

	cases := []struct {
		name string
		card []byte
		set  jwks.Set
		err  string
	}{
		{"unsigned", []byte(testCard), set, "the card has no signatures"},
		{"empty signatures", withSigList(testCard, `[]`), set, "the card has no signatures"},
		{"other key under the same kid", signed, otherSet, "signature does not match the card"},
		{"kid not in the set", signed, jwks.Set{}, `no key with kid "card-key-1" in the key set`},
		{"HMAC", withSig(hsProtected, validSig), set, `algorithm "HS256" is not accepted`},
		{"none", withSig(enc(`{"alg":"none","kid":"card-key-1"}`), ""), set, `algorithm "none" is not accepted`},
		{"crit", withSig(enc(`{"alg":"ES256","kid":"card-key-1","crit":["exp"],"exp":1}`), validSig), set, `protected header has "crit", which this verifier does not implement`},
		{"b64 false", withSig(enc(`{"alg":"ES256","kid":"card-key-1","b64":false}`), validSig), set, `protected header has "b64", which this verifier does not implement`},
		{"no kid", withSig(enc(`{"alg":"ES256"}`), validSig), set, "the signature names no kid"},
		{"protected not base64url", withSig("!!", validSig), set, "protected header is not base64url"},
		{"protected not JSON", withSig(enc("nope"), validSig), set, "protected header is not a JSON object"},
		{"RS256 header for an EC key", withSig(enc(`{"alg":"RS256","kid":"card-key-1"}`), validSig), set, `key "card-key-1" does not allow RS256`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := cardsig.Verify(tc.card, tc.set)
			require.Error(t, err)
			if res == nil {
				require.EqualError(t, err, tc.err)
				return
			}
			require.ErrorIs(t, err, cardsig.ErrNoValid)
			require.EqualError(t, res[0].Err, tc.err)
		})
	}

	for _, bad := range []string{`[]`, `{"a":1,"a":2}`, `{"a":"\xff"}`, `{"a":1} {}`, `{"signatures":"x"}`} {
		_, err := cardsig.Verify([]byte(bad), set)
		require.Error(t, err, bad)
		_, err = s.Sign([]byte(bad))
		if bad != `{"signatures":"x"}` {
			require.Error(t, err, bad)
		}
	}
}

func withSigList(card, list string) []byte {
	return []byte(card[:len(card)-1] + `,"signatures":` + list + `}`)
}

func TestAddKey(t *testing.T) {
	s, err := cardsig.NewSigner(pemKey(t, false), "", "")
	require.NoError(t, err)
	minter := []byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"minter","use":"sig","alg":"ES256"}]}`)
	doc, err := cardsig.AddKey(minter, s)
	require.NoError(t, err)
	set, skipped, err := jwks.Parse(doc)
	require.NoError(t, err)
	require.Empty(t, skipped)
	require.Contains(t, set, "minter")
	require.Contains(t, set, s.KeyID())
	again, err := cardsig.AddKey(doc, s)
	require.NoError(t, err)
	require.Equal(t, doc, again, "a kid already there is not added twice")
}
