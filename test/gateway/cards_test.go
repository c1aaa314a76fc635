package gateway_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	legacycard "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/test/testutil"
)

const cardPath = "/.well-known/agent-card.json"

func newValidator(t *testing.T) *card.Validator {
	t.Helper()
	v, err := card.NewValidator()
	require.NoError(t, err)
	return v
}

// publicCard fetches the served public card and checks its caching headers.
func publicCard(t *testing.T, srv *testutil.Server) (body []byte, etag string, version string) {
	t.Helper()
	r := srv.Do(t, http.MethodGet, cardPath, "")
	require.Equal(t, http.StatusOK, r.Status)
	var doc struct {
		Version string `json:"version"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &doc))
	return r.Body, r.Header.Get("ETag"), doc.Version
}

func TestPublicCardHTTP(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	v := newValidator(t)

	get := srv.Do(t, http.MethodGet, cardPath, "")
	require.Equal(t, http.StatusOK, get.Status)
	etag := get.Header.Get("ETag")

	t.Run("schema-valid, only public skills, extendedAgentCard", func(t *testing.T) {
		require.NoError(t, v.Validate(get.Body))
		var c a2a.AgentCard
		require.NoError(t, json.Unmarshal(get.Body, &c))
		require.Equal(t, testutil.PublicSkills, skillIDs(&c))
		require.True(t, c.Capabilities.ExtendedAgentCard)
		for _, hidden := range testutil.HiddenSkills {
			require.NotContains(t, string(get.Body), hidden)
		}
	})
	t.Run("headers", func(t *testing.T) {
		sum := sha256.Sum256(get.Body)
		require.Equal(t, `"`+hex.EncodeToString(sum[:16])+`"`, etag, "strong ETag over the served bytes")
		require.False(t, strings.HasPrefix(etag, "W/"))
		require.Equal(t, "public, max-age=300", get.Header.Get("Cache-Control"))
		require.Equal(t, "application/json", get.Header.Get("Content-Type"))
		require.Equal(t, "nosniff", get.Header.Get("X-Content-Type-Options"))
		lm, err := http.ParseTime(get.Header.Get("Last-Modified"))
		require.NoError(t, err, "Last-Modified in HTTP date form")
		require.WithinDuration(t, time.Now(), lm, time.Hour, "the revision's build time")
	})
	t.Run("If-Modified-Since", func(t *testing.T) {
		lm := get.Header.Get("Last-Modified")
		at, err := http.ParseTime(lm)
		require.NoError(t, err)
		for _, tc := range []struct {
			name    string
			headers []string
			status  int
		}{
			{"the card's own date", []string{"If-Modified-Since", lm}, http.StatusNotModified},
			{"a later date", []string{"If-Modified-Since", at.Add(time.Hour).Format(http.TimeFormat)}, http.StatusNotModified},
			{"an earlier date", []string{"If-Modified-Since", at.Add(-time.Second).Format(http.TimeFormat)}, http.StatusOK},
			{"not a date", []string{"If-Modified-Since", "yesterday"}, http.StatusOK},
			{"If-None-Match wins over it", []string{"If-Modified-Since", lm, "If-None-Match", `"other"`}, http.StatusOK},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := srv.Do(t, http.MethodGet, cardPath, "", tc.headers...)
				require.Equal(t, tc.status, r.Status)
				require.Equal(t, lm, r.Header.Get("Last-Modified"))
				if tc.status == http.StatusNotModified {
					require.Empty(t, r.Body)
				}
			})
		}
	})
	t.Run("stable across requests", func(t *testing.T) {
		again := srv.Do(t, http.MethodGet, cardPath, "")
		require.Equal(t, get.Body, again.Body)
		require.Equal(t, etag, again.Header.Get("ETag"))
	})

	conditional := []struct {
		name        string
		ifNoneMatch string
		status      int
	}{
		{"matching tag", etag, http.StatusNotModified},
		{"weak form of the tag (weak comparison)", "W/" + etag, http.StatusNotModified},
		{"tag in a list", `"nope", ` + etag, http.StatusNotModified},
		{"wildcard", "*", http.StatusNotModified},
		{"other tag", `"0123456789abcdef"`, http.StatusOK},
		{"unquoted tag", strings.Trim(etag, `"`), http.StatusOK},
	}
	for _, tc := range conditional {
		t.Run("If-None-Match/"+tc.name, func(t *testing.T) {
			r := srv.Do(t, http.MethodGet, cardPath, "", "If-None-Match", tc.ifNoneMatch)
			require.Equal(t, tc.status, r.Status)
			require.Equal(t, etag, r.Header.Get("ETag"))
			require.Equal(t, "public, max-age=300", r.Header.Get("Cache-Control"))
			if tc.status == http.StatusNotModified {
				require.Empty(t, r.Body)
			} else {
				require.Equal(t, get.Body, r.Body)
			}
		})
	}

	t.Run("HEAD", func(t *testing.T) {
		r := srv.Do(t, http.MethodHead, cardPath, "")
		require.Equal(t, http.StatusOK, r.Status)
		require.Empty(t, r.Body)
		require.Equal(t, etag, r.Header.Get("ETag"))
		require.Equal(t, "public, max-age=300", r.Header.Get("Cache-Control"))
		require.Equal(t, len(get.Body), atoi(t, r.Header.Get("Content-Length")))
	})

	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		t.Run(method+" is 405", func(t *testing.T) {
			r := srv.Do(t, method, cardPath, `{}`, "Content-Type", "application/json")
			require.Equal(t, http.StatusMethodNotAllowed, r.Status)
			require.Equal(t, "GET, HEAD", r.Header.Get("Allow"))
			require.JSONEq(t, `{"error":{"code":405,"status":"UNIMPLEMENTED","message":"the agent card is read with GET",
				"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"METHOD_NOT_FOUND","domain":"a2a-protocol.org"}]}}`, string(r.Body))
		})
	}
}

// TestExtendedCardsValidate checks the extended cards the gateway serves, in
// every binding and version, against the A2A schema.
func TestExtendedCardsValidate(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	v := newValidator(t)
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run", "a2a.preview", "forecast.read"}})
	auth := "Bearer " + tok

	cases := []struct {
		name string
		do   func(t *testing.T) []byte
	}{
		{"JSON-RPC 1.0", func(t *testing.T) []byte {
			r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":"x","method":"GetExtendedAgentCard","params":{}}`, "A2A-Version", "1.0", "Authorization", auth)
			return jsonrpcResult(t, r)
		}},
		{"HTTP+JSON 1.0", func(t *testing.T) []byte {
			r := srv.Do(t, http.MethodGet, "/extendedAgentCard", "", "A2A-Version", "1.0", "Authorization", auth)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			return r.Body
		}},
		{"HTTP+JSON 1.0 under a tenant prefix", func(t *testing.T) []byte {
			// The path's tenant must be the caller's.
			acme := "Bearer " + testutil.Token(t, testutil.TokenOptions{Tenant: "acme", Scopes: []string{"recon.run", "a2a.preview", "forecast.read"}})
			r := srv.Do(t, http.MethodGet, "/acme/extendedAgentCard", "", "A2A-Version", "1.0", "Authorization", acme)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			return r.Body
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.do(t)
			require.NoError(t, v.Validate(b))
			var c a2a.AgentCard
			require.NoError(t, json.Unmarshal(b, &c))
			require.Equal(t, []string{"extract-invoice-fields", "forecast-cashflow", "lookup-invoice", "lookup-invoice-v1", "reconcile-invoice"}, skillIDs(&c))
		})
	}
}

// TestCardVersion builds deployments that differ in their skills and
// compares the public cards they serve.
func TestCardVersion(t *testing.T) {
	base := testutil.Start(t, testutil.LoadDeployment(t, ""))
	baseBody, baseETag, baseVersion := publicCard(t, base)
	require.True(t, strings.HasPrefix(baseVersion, "1.4.0+skills."), baseVersion)

	t.Run("a public skill removed changes version and ETag", func(t *testing.T) {
		cfg := testutil.CopyFinance(t)
		testutil.RemoveFile(t, cfg, "capabilities/lookup-invoice-v1.yaml")
		srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
		body, etag, version := publicCard(t, srv)
		require.NotEqual(t, baseVersion, version)
		require.True(t, strings.HasPrefix(version, "1.4.0+skills."), version)
		require.NotEqual(t, baseETag, etag)
		require.NotContains(t, string(body), "lookup-invoice-v1")
	})
	t.Run("a public description change changes the version", func(t *testing.T) {
		cfg := testutil.CopyFinance(t)
		testutil.EditFile(t, cfg, "capabilities/lookup-invoice.yaml", func(s string) string {
			return replaceOnce(t, s, "due date and supplier.", "due date, supplier and currency.")
		})
		srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
		_, etag, version := publicCard(t, srv)
		require.NotEqual(t, baseVersion, version)
		require.NotEqual(t, baseETag, etag)
	})
	t.Run("an extended-only change leaves the public card byte-identical", func(t *testing.T) {
		cfg := testutil.CopyFinance(t)
		testutil.EditFile(t, cfg, "capabilities/reconcile-invoice.yaml", func(s string) string {
			return replaceOnce(t, s, "lists line-level differences.", "lists every line-level difference.")
		})
		srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
		body, etag, version := publicCard(t, srv)
		require.Equal(t, baseVersion, version)
		require.Equal(t, baseETag, etag)
		require.Equal(t, baseBody, body)
	})
	t.Run("the same deployment twice serves the same card", func(t *testing.T) {
		srv := testutil.Start(t, testutil.LoadDeployment(t, testutil.CopyFinance(t)))
		body, etag, _ := publicCard(t, srv)
		require.Equal(t, baseETag, etag)
		require.Equal(t, baseBody, body)
	})
}

// TestExtendedCardSetting covers cards.extended_card.
func TestExtendedCardSetting(t *testing.T) {
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})

	t.Run("off", func(t *testing.T) {
		cfg := testutil.CopyFinance(t)
		testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string { return s + "cards: {extended_card: \"off\"}\n" })
		srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
		require.False(t, srv.PublicCard(t).Capabilities.ExtendedAgentCard)

		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`, "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
		require.JSONEq(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32004,"message":"this agent does not offer an extended agent card",
			"data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"UNSUPPORTED_OPERATION","domain":"a2a-protocol.org"}]}}`, string(r.Body))
		for _, binding := range bindings {
			t.Run(string(binding), func(t *testing.T) {
				// From the card, a2a-go refuses by itself; from the endpoints it asks the server.
				c := srv.Client(t, binding, testutil.Bearer(tok))
				_, err := c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
				require.ErrorIs(t, err, a2a.ErrExtendedCardNotConfigured)

				c = srv.Client(t, binding, testutil.Bearer(tok), testutil.WithoutCard())
				_, err = c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
				require.ErrorIs(t, err, a2a.ErrUnsupportedOperation)
			})
		}
	})
	t.Run("on without extended or preview capabilities", func(t *testing.T) {
		cfg := testutil.CopyFinance(t)
		testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string { return s + "cards: {extended_card: \"on\"}\n" })
		testutil.RemoveFile(t, cfg, "capabilities/reconcile-invoice.yaml")
		dropMethods(t, cfg) // the variance extension's method is served by reconcile-invoice
		testutil.RemoveFile(t, cfg, "capabilities/reconcile-invoice-v0.yaml")
		testutil.RemoveFile(t, cfg, "capabilities/forecast-cashflow.yaml")
		testutil.RemoveFile(t, cfg, "capabilities/apply-remittance.yaml")
		srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
		require.True(t, srv.PublicCard(t).Capabilities.ExtendedAgentCard)

		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":"q","method":"GetExtendedAgentCard"}`, "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
		require.JSONEq(t, `{"jsonrpc":"2.0","id":"q","error":{"code":-32007,"message":"the extended agent card is enabled but no capability is extended or in preview",
			"data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"EXTENDED_AGENT_CARD_NOT_CONFIGURED","domain":"a2a-protocol.org"}]}}`, string(r.Body))
		for _, binding := range bindings {
			t.Run(string(binding), func(t *testing.T) {
				c := srv.Client(t, binding, testutil.Bearer(tok))
				_, err := c.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
				require.ErrorIs(t, err, a2a.ErrExtendedCardNotConfigured)
				var ae *a2a.Error
				require.ErrorAs(t, err, &ae, "the refusal comes from the server, not the client")
			})
		}
	})
	t.Run("auto with only removed extended capabilities", func(t *testing.T) {
		cfg := testutil.CopyFinance(t)
		testutil.RemoveFile(t, cfg, "capabilities/reconcile-invoice.yaml")
		dropMethods(t, cfg) // the variance extension's method is served by reconcile-invoice
		testutil.RemoveFile(t, cfg, "capabilities/reconcile-invoice-v0.yaml")
		testutil.RemoveFile(t, cfg, "capabilities/forecast-cashflow.yaml")
		testutil.RemoveFile(t, cfg, "capabilities/apply-remittance.yaml")
		srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
		require.False(t, srv.PublicCard(t).Capabilities.ExtendedAgentCard)
	})
}

// TestExtendedCardCaching: the extended card is per caller, so it is
// private, varies on the credential, and a GET of it can be revalidated —
// but only by a caller who authenticates again.
func TestExtendedCardCaching(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	recon := "Bearer " + testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	forecast := "Bearer " + testutil.Token(t, testutil.TokenOptions{Scopes: []string{"forecast.read"}})

	get := srv.Do(t, http.MethodGet, "/extendedAgentCard", "", "A2A-Version", "1.0", "Authorization", recon)
	require.Equal(t, http.StatusOK, get.Status, "%s", get.Body)
	etag := get.Header.Get("ETag")
	sum := sha256.Sum256(get.Body)
	require.Equal(t, `"`+hex.EncodeToString(sum[:16])+`"`, etag, "strong ETag over the served bytes")
	require.Equal(t, "private, max-age=300", get.Header.Get("Cache-Control"))
	require.Equal(t, "Authorization, A2A-Version", get.Header.Get("Vary"))

	other := srv.Do(t, http.MethodGet, "/extendedAgentCard", "", "A2A-Version", "1.0", "Authorization", forecast)
	require.Equal(t, http.StatusOK, other.Status, "%s", other.Body)
	require.NotEqual(t, etag, other.Header.Get("ETag"), "another caller's projection has another tag")

	cases := []struct {
		name, auth, ifNoneMatch string
		status                  int
	}{
		{"matching tag", recon, etag, http.StatusNotModified},
		{"wildcard", recon, "*", http.StatusNotModified},
		{"other tag", recon, `"0123456789abcdef"`, http.StatusOK},
		{"another caller's tag is not this caller's card", forecast, etag, http.StatusOK},
		{"matching tag without a credential", "", etag, http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run("If-None-Match/"+tc.name, func(t *testing.T) {
			h := []string{"A2A-Version", "1.0", "If-None-Match", tc.ifNoneMatch}
			if tc.auth != "" {
				h = append(h, "Authorization", tc.auth)
			}
			r := srv.Do(t, http.MethodGet, "/extendedAgentCard", "", h...)
			require.Equal(t, tc.status, r.Status, "%s", r.Body)
			switch tc.status {
			case http.StatusNotModified:
				require.Empty(t, r.Body)
				require.Equal(t, etag, r.Header.Get("ETag"))
				require.Equal(t, "private, max-age=300", r.Header.Get("Cache-Control"))
			case http.StatusOK:
				require.NotEmpty(t, r.Body)
			}
		})
	}

	t.Run("JSON-RPC answer is private too", func(t *testing.T) {
		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`, "A2A-Version", "1.0", "Authorization", recon, "If-None-Match", "*")
		require.Equal(t, http.StatusOK, r.Status)
		require.NotEmpty(t, jsonrpcResult(t, r), "a POST is never answered 304")
		require.Equal(t, "private, max-age=300", r.Header.Get("Cache-Control"))
		require.Equal(t, "Authorization, A2A-Version", r.Header.Get("Vary"))
	})
}

// TestPublicCardV03: a 0.3 caller (the 0.3 card path, or A2A-Version: 0.3)
// gets the card in the 0.3 shape, which a2a-go's own 0.3 resolver reads; the
// 1.0 card stays the default.
func TestPublicCardV03(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	v1 := srv.Do(t, http.MethodGet, cardPath, "")
	require.Equal(t, http.StatusOK, v1.Status)
	require.NotContains(t, string(v1.Body), `"protocolVersion":"0.3.0"`)
	require.Equal(t, "Accept-Encoding, A2A-Version", v1.Header.Get("Vary"))
	var v1Card a2a.AgentCard
	require.NoError(t, json.Unmarshal(v1.Body, &v1Card))
	agentURL := v1Card.SupportedInterfaces[0].URL

	byPath := srv.Do(t, http.MethodGet, "/.well-known/agent.json", "")
	cases := []struct {
		name    string
		path    string
		headers []string
		v03     bool
	}{
		{"0.3 card path", "/.well-known/agent.json", nil, true},
		{"A2A-Version 0.3", cardPath, []string{"A2A-Version", "0.3"}, true},
		{"A2A-Version 1.0", cardPath, []string{"A2A-Version", "1.0"}, false},
		{"no A2A-Version", cardPath, nil, false},
		{"A2A-Version unknown", cardPath, []string{"A2A-Version", "9.9"}, false},
		{"0.3 card path, A2A-Version 1.0", "/.well-known/agent.json", []string{"A2A-Version", "1.0"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := srv.Do(t, http.MethodGet, tc.path, "", tc.headers...)
			require.Equal(t, http.StatusOK, r.Status)
			if !tc.v03 {
				require.Equal(t, v1.Body, r.Body)
				require.Equal(t, v1.Header.Get("ETag"), r.Header.Get("ETag"))
				return
			}
			require.Equal(t, byPath.Body, r.Body)
			sum := sha256.Sum256(r.Body)
			require.Equal(t, `"`+hex.EncodeToString(sum[:16])+`"`, r.Header.Get("ETag"))
			require.NotEqual(t, v1.Header.Get("ETag"), r.Header.Get("ETag"))
			var doc map[string]any
			require.NoError(t, json.Unmarshal(r.Body, &doc))
			require.Equal(t, "0.3.0", doc["protocolVersion"])
			require.Equal(t, agentURL, doc["url"])
			require.Equal(t, "JSONRPC", doc["preferredTransport"])
			require.Len(t, doc["additionalInterfaces"], 2)
			require.Equal(t, true, doc["supportsAuthenticatedExtendedCard"])
			for _, hidden := range testutil.HiddenSkills {
				require.NotContains(t, string(r.Body), hidden)
			}

			again := srv.Do(t, http.MethodGet, tc.path, "", append(tc.headers, "If-None-Match", r.Header.Get("ETag"))...)
			require.Equal(t, http.StatusNotModified, again.Status)
			require.Empty(t, again.Body)
		})
	}

	t.Run("a2a-go 0.3 resolver", func(t *testing.T) {
		for _, opt := range []legacycard.ResolveOption{
			legacycard.WithPath("/.well-known/agent.json"),
			legacycard.WithRequestHeader("A2A-Version", "0.3"),
		} {
			c, err := legacycard.DefaultResolver.Resolve(t.Context(), srv.URL, opt)
			require.NoError(t, err)
			require.Equal(t, agentURL, c.URL)
			require.Equal(t, "0.3.0", c.ProtocolVersion)
			require.EqualValues(t, "JSONRPC", c.PreferredTransport)
			var ids []string
			for _, s := range c.Skills {
				ids = append(ids, s.ID)
			}
			require.Equal(t, testutil.PublicSkills, ids)
		}
	})
}

// TestPublicCardDefaultVersion: cards.default_version: "0.3" serves the 0.3 card at
// /.well-known/agent-card.json to a request that names no version (0.3 clients that fetch that
// path without the header), while a 1.0 client that sends A2A-Version still gets the 1.0 card.
func TestPublicCardDefaultVersion(t *testing.T) {
	d := testutil.LoadDeployment(t, "")
	d.Config.Cards.DefaultVersion = "0.3"
	srv := testutil.Start(t, d)
	v03 := srv.Do(t, http.MethodGet, "/.well-known/agent.json", "")
	for _, tc := range []struct {
		name    string
		headers []string
		v03     bool
	}{
		{"no A2A-Version", nil, true},
		{"A2A-Version 0.3", []string{"A2A-Version", "0.3"}, true},
		{"A2A-Version 1.0", []string{"A2A-Version", "1.0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := srv.Do(t, http.MethodGet, cardPath, "", tc.headers...)
			require.Equal(t, http.StatusOK, r.Status)
			var doc map[string]any
			require.NoError(t, json.Unmarshal(r.Body, &doc))
			if tc.v03 {
				require.Equal(t, v03.Body, r.Body)
				require.Equal(t, "0.3.0", doc["protocolVersion"])
				return
			}
			require.NotContains(t, doc, "protocolVersion")
			require.Contains(t, doc, "supportedInterfaces")
		})
	}
	t.Run("a2a-go 0.3 resolver at its default path", func(t *testing.T) {
		c, err := legacycard.DefaultResolver.Resolve(t.Context(), srv.URL, legacycard.WithPath(cardPath))
		require.NoError(t, err)
		require.Equal(t, "0.3.0", c.ProtocolVersion)
	})
}

// dropMethods removes the methods the finance example's extensions add (their capability is
// about to be removed).
func dropMethods(t *testing.T, cfg string) {
	t.Helper()
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return strings.Replace(s, "      methods:\n        - {name: finance/explainVariance, capability: reconcile-invoice}\n", "", 1)
	})
}
