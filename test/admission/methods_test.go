package admission_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

const variance = "https://example.com/ext/variance/v1"

// TestExtensionMethodAtBothDoors: a method an extension adds (the finance example's
// finance/explainVariance, served by reconcile-invoice) is admitted by the one admission function
// only when the caller activated the extension and is entitled to the serving capability, and it
// is forwarded to that capability's handler; otherwise the spec's errors, the same at both doors.
func TestExtensionMethodAtBothDoors(t *testing.T) {
	e := connect(t, testutil.Start(t, testutil.LoadDeployment(t, ""), testutil.StartOptions{ExtAuthz: true}))
	partner := &class{name: "partner", issuer: issuerA, subject: "alice", tenant: "acme", authenticated: true}
	partner.token = testutil.Token(t, testutil.TokenOptions{Subject: "alice", Tenant: "acme", Scopes: []string{"recon.run"}})
	own := e.createTaskNoPush(t, partner)
	other := &class{name: "other", issuer: issuerA, subject: "bob", tenant: "acme", authenticated: true}
	other.token = testutil.Token(t, testutil.TokenOptions{Subject: "bob", Tenant: "acme", Scopes: []string{"recon.run"}})
	publicTok := testutil.Token(t, testutil.TokenOptions{Subject: "carol", Tenant: "acme"})
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"finance/explainVariance","params":` + params + `}`
	}
	h := func(tok string, ext ...string) http.Header {
		out := header("A2A-Version", "1.0", "Content-Type", "application/json")
		if tok != "" {
			out.Set("Authorization", "Bearer "+tok)
		}
		for _, x := range ext {
			out.Add("A2A-Extensions", x)
		}
		return out
	}

	t.Run("activated and entitled: forwarded to the serving capability", func(t *testing.T) {
		gw, _ := e.door(t, http.MethodPost, "/", h(partner.token, variance), call(`{"invoice":"INV-1","taskId":"`+own+`"}`))
		require.True(t, gw.allowed, "%s", gw.body)
		var out struct {
			Result struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
				Report struct {
					Capability string   `json:"capability"`
					Principal  string   `json:"principal"`
					Scopes     []string `json:"scopes"`
				} `json:"report"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(gw.body), &out), gw.body)
		require.Equal(t, "finance/explainVariance", out.Result.Method)
		require.Equal(t, "reconcile-invoice", out.Result.Report.Capability, "the token is for the serving capability")
		require.Equal(t, "alice", out.Result.Report.Principal)
		require.Equal(t, []string{"recon.run"}, out.Result.Report.Scopes)
		require.JSONEq(t, `{"invoice":"INV-1","taskId":"`+own+`"}`, string(out.Result.Params))
		require.True(t, e.forwarded(gw.decision))
	})
	for _, tc := range []struct {
		name, params, tok, reason string
		ext                       []string
		method                    string
	}{
		{"not activated: the method does not exist", `{}`, partner.token, "METHOD_NOT_FOUND", nil, ""},
		{"activated, not entitled to the serving capability", `{}`, publicTok, "UNAUTHORIZED", []string{variance}, ""},
		{"anonymous", `{}`, "", "UNAUTHENTICATED", []string{variance}, ""},
		{"someone else's task", `{"taskId":"` + own + `"}`, other.token, "TASK_NOT_FOUND", []string{variance}, ""},
		{"someone else's task among references", `{"referenceTaskIds":["` + own + `"]}`, other.token, "TASK_NOT_FOUND", []string{variance}, ""},
		{"another tenant", `{"tenant":"globex"}`, partner.token, "UNAUTHORIZED", []string{variance}, ""},
		{"an unknown method", `{}`, partner.token, "METHOD_NOT_FOUND", []string{variance}, "finance/nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := call(tc.params)
			if tc.method != "" {
				body = strings.Replace(body, "finance/explainVariance", tc.method, 1)
			}
			gw, _ := e.door(t, http.MethodPost, "/", h(tc.tok, tc.ext...), body)
			require.False(t, gw.allowed)
			require.Equal(t, tc.reason, gw.reason, "%s", gw.body)
		})
	}

	t.Run("a required extension not activated", func(t *testing.T) {
		cfg := testutil.CopyFinance(t)
		testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
			return strings.Replace(s, "method finance/explainVariance).\n      required: false", "method finance/explainVariance).\n      required: true", 1)
		})
		e := connect(t, testutil.Start(t, testutil.LoadDeployment(t, cfg), testutil.StartOptions{ExtAuthz: true}))
		gw, _ := e.door(t, http.MethodPost, "/", h(partner.token), call(`{}`))
		require.Equal(t, "EXTENSION_SUPPORT_REQUIRED", gw.reason)
		gw, _ = e.door(t, http.MethodPost, "/", h(partner.token, variance), call(`{}`))
		require.True(t, gw.allowed, "%s", gw.body)
	})
}
