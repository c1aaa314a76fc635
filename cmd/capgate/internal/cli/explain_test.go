package cli_test

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/test/testutil"
)

func TestExplainWordingCannotBeMisread(t *testing.T) {
	r := run(t, "explain", "--capability", "reconcile-invoice")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "  visible:  no  because auth.required, scope.missing(recon.run) refused it "+
		"(a refusal overrides the grants state.ga, tenant.any, visibility.extended)\n")
	require.NotContains(t, r.stdout, "granted by visibility.extended", "a grant never reads as the answer to a no")
	r = run(t, "explain", "--capability", "lookup-invoice", "--claims", writeClaims(t, `{"sub":"a"}`))
	require.Contains(t, r.stdout, "  entitled: yes because auth.authenticated, scope.none_required, state.ga, tenant.any granted it\n")
}

func TestExplainToken(t *testing.T) {
	tok := run(t, "token", "--sub", "partner-1", "--tenant", "acme", "--scope", "recon.run")
	require.Equal(t, cli.ExitOK, tok.code, tok.stderr)
	jwt := strings.TrimSpace(tok.stdout)
	want := "caller: subject \"partner-1\", tenant \"acme\", scopes [recon.run]"
	for _, verify := range []bool{false, true} {
		args := []string{"explain", "--token", jwt, "--capability", "reconcile-invoice"}
		if verify {
			args = append(args, "--verify")
		}
		r := run(t, args...)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, want)
		require.Contains(t, r.stdout, "entitled: yes")
		require.NotContains(t, r.stdout+r.stderr, jwt, "the token is never printed")
	}
	r := runIn(t, jwt+"\n", "explain", "--token", "-", "--capability", "reconcile-invoice")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, want)

	// A token signed by another key decodes, and does not verify.
	parts := strings.Split(jwt, ".")
	forged := parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))
	r = run(t, "explain", "--token", forged, "--capability", "reconcile-invoice")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, want, "decoded without --verify")
	r = run(t, "explain", "--token", forged, "--verify")
	require.Equal(t, cli.ExitCheck, r.code, r.stdout)
	require.Contains(t, r.stderr, "--token does not verify against the config's issuers")
	require.NotContains(t, r.stderr, forged)

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"explain", "--token", "not-a-jwt"}, "--token: not a compact JWT"},
		{[]string{"explain", "--token", jwt, "--claims", "x.json"}, "--claims and --token exclude each other"},
		{[]string{"explain", "--verify"}, "--verify needs --token"},
		{[]string{"explain", "--decision-id", "x"}, "--decision-id and --decisions go together"},
	} {
		r := run(t, tt.args...)
		require.Equal(t, cli.ExitUsage, r.code, "%v", tt.args)
		require.Contains(t, r.stderr, tt.want)
	}
}

// A refused handler-call decision as capgate's console log writes it
// (zap's fields, then the OPA event's), and an allowed view decision.
const (
	loggedRefusal = `{"level":"info","ts":1764770000.1,"msg":"decision","bundles":{"capgate":{"revision":"1788e47117c1804e4c2d62e5468841f3"}},` +
		`"decision_id":"6f1c0d2e-8c3b-4d5e-9f00-1a2b3c4d5e6f","input":{"binding":"jsonrpc","capability":"reconcile-invoice","component":"gateway",` +
		`"operation":"message/send","principal":"partner-2","tenant":"globex"},"labels":{"id":"x","version":"dev"},` +
		`"metrics":{"timer_capgate_decision_ns":1000},"path":"capgate/authz/decision","result":{"allow":false,"code":"-31403",` +
		`"reasons":["scope.missing"],"result":"deny","rules":[{"effect":"refuse","reason":"scope.missing","rule":"data.capgate.authz._scope_reasons"},` +
		`{"effect":"grant","reason":"state.ga","rule":"data.capgate.authz._state_reasons"}]},"timestamp":"2026-12-03T15:00:00Z","type":"openpolicyagent.org/decision_logs"}`
	loggedAllow = `{"decision_id":"0a0a0a0a-0000-4000-8000-000000000001","input":{"capability":"lookup-invoice","principal":"alice"},` +
		`"path":"capgate/authz/entitled","result":{"allow":true,"result":"allow"},"timestamp":"2026-12-03T15:00:01Z"}`
)

func TestExplainDecisionID(t *testing.T) {
	dir := t.TempDir()
	console := filepath.Join(dir, "capgate.log")
	require.NoError(t, os.WriteFile(console, []byte("starting capgate\n"+loggedAllow+"\n"+loggedRefusal+"\n"), 0o644))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write([]byte("[" + loggedAllow + "," + loggedRefusal + "]"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	opa := filepath.Join(dir, "upload.json.gz")
	require.NoError(t, os.WriteFile(opa, gz.Bytes(), 0o644))

	for _, file := range []string{console, opa} {
		r := run(t, "explain", "--decision-id", "6f1c0d2e-8c3b-4d5e-9f00-1a2b3c4d5e6f", "--decisions", file)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Equal(t, `decision 6f1c0d2e-8c3b-4d5e-9f00-1a2b3c4d5e6f at 2026-12-03T15:00:00Z
policy revision: 1788e47117c1804e4c2d62e5468841f3
caller: principal partner-2, tenant globex
asked: message/send reconcile-invoice via gateway (capgate/authz/decision)
binding: jsonrpc, A2A -
outcome: refused (-31403)
reasons: scope.missing
because:
  refuse  scope.missing  (rule data.capgate.authz._scope_reasons)
  grant   state.ga  (rule data.capgate.authz._state_reasons)
labels: id=x version=dev
latency: 1µs
`, r.stdout, file)
		r = run(t, "explain", "--decision-id", "0a0a0a0a-0000-4000-8000-000000000001", "--decisions", file, "--json")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, `"allow": true`)
		r = run(t, "explain", "--decision-id", "nope", "--decisions", file)
		require.Equal(t, cli.ExitCheck, r.code)
		require.Contains(t, r.stderr, "decision nope is not in "+file)
	}
}

// token's warnings say which config they check the token against: the
// embedded finance example when no --config is given.
func TestTokenWarningsNameTheirConfig(t *testing.T) {
	r := run(t, "token", "--issuer", "https://other.example.com")
	require.Equal(t, cli.ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--aud is required for an issuer the config does not name (checked against the embedded finance example: no --config given)")
	r = run(t, "token", "--issuer", "https://other.example.com", "--aud", "finance-agent")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, `issuer "https://other.example.com" is not in the embedded finance example's (no --config given) auth.issuers: that deployment will refuse the token`)
	r = run(t, "token", "--config", testutil.CopyFinance(t), "--issuer", "https://other.example.com", "--aud", "finance-agent")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, `issuer "https://other.example.com" is not in the config's auth.issuers`)
	require.NotContains(t, r.stderr, "embedded")
}
