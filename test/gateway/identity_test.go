package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// The "done when" for passing identity down: a partner's call to
// reconcile-invoice reaches the handler with exactly recon.run, audience the
// handler, subject the partner, and is audited once with the principal.
func TestPartnerCallIsDownscopedAndAuditedOnce(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	tok := testutil.Token(t, testutil.TokenOptions{Subject: "partner-7", Tenant: "acme", Scopes: []string{"recon.run", "invoices.read", "a2a.preview"}})
	resp := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER",
		"parts":[{"raw":"JVBERi0xLjQK","mediaType":"application/pdf"},{"text":"reconcile this against the PO"}]}}}`,
		"Authorization", "Bearer "+tok, "A2A-Version", "1.0")
	require.Equal(t, 200, resp.Status, string(resp.Body))

	var out struct {
		Result struct {
			Task struct {
				Artifacts []struct {
					Parts []struct {
						Data map[string]any `json:"data"`
					} `json:"parts"`
				} `json:"artifacts"`
			} `json:"task"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &out), string(resp.Body))
	report := out.Result.Task.Artifacts[0].Parts[0].Data
	require.Equal(t, "reconcile-invoice", report["capability"])
	require.Equal(t, "recon.v3.reconcile", report["handler"], "the token's audience is the handler")
	require.Equal(t, "partner-7", report["principal"])
	require.Equal(t, "acme", report["tenant"])
	require.Equal(t, []any{"recon.run"}, report["scopes"], "exactly the capability's scopes the caller holds, nothing more")

	decisionID := resp.Header.Get("X-Capgate-Decision-Id")
	var lines []map[string]any
	for _, l := range srv.Audit.Lines() {
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &e), l)
		if e["decision_id"] == decisionID {
			lines = append(lines, e)
		}
	}
	require.Len(t, lines, 1, "one audit line per handler call")
	a := lines[0]
	require.Equal(t, "audit", a["stream"])
	require.Equal(t, "partner-7", a["principal"])
	require.Equal(t, "acme", a["tenant"])
	require.Equal(t, "reconcile-invoice", a["capability"])
	require.Equal(t, "recon.v3.reconcile", a["handler"])
	require.Equal(t, []any{"recon.run"}, a["scopes"])
	require.Equal(t, "ok", a["outcome"])
	require.NotContains(t, srv.Audit.Lines()[0], tok[len(tok)-20:], "never a token on the audit stream")
}
