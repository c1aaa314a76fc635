package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// TestProtocolVersions covers the A2A-Version header: absent is 0.3 (with
// 0.3 method names), 1.0 and 1 are 1.0, anything else is refused.
func TestProtocolVersions(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	auth := "Bearer " + testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	wantSkills := []string{"extract-invoice-fields", "lookup-invoice", "lookup-invoice-v1", "reconcile-invoice"}

	// cardOf reads a card as a client of the request's version would: a 0.3
	// card is the union of v1.0 and v0.3 fields, read with a2av0's parser.
	cardOf := func(t *testing.T, b []byte, version string) []string {
		t.Helper()
		if version == "" || version == "0.3" {
			c, err := a2av0.NewAgentCardParser()(b)
			require.NoError(t, err)
			return skillIDs(c)
		}
		var c a2a.AgentCard
		require.NoError(t, json.Unmarshal(b, &c))
		return skillIDs(&c)
	}

	ok := []struct {
		name    string
		method  string
		version string // "" sends no header
	}{
		{"0.3 name without A2A-Version", "agent/getAuthenticatedExtendedCard", ""},
		{"0.3 name with A2A-Version 0.3", "agent/getAuthenticatedExtendedCard", "0.3"},
		{"1.0 name with A2A-Version 1.0", "GetExtendedAgentCard", "1.0"},
		{"1.0 name with A2A-Version 1", "GetExtendedAgentCard", "1"},
		{"1.0 name with A2A-Version padded", "GetExtendedAgentCard", " 1.0 "},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			h := []string{"Authorization", auth}
			if tc.version != "" {
				h = append(h, "A2A-Version", tc.version)
			}
			r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":42,"method":"`+tc.method+`"}`, h...)
			var env struct {
				ID json.RawMessage `json:"id"`
			}
			require.NoError(t, json.Unmarshal(r.Body, &env))
			require.Equal(t, "42", string(env.ID))
			require.Equal(t, wantSkills, cardOf(t, jsonrpcResult(t, r), tc.version))
		})
	}

	t.Run("0.3 card without A2A-Version carries the 0.3 fields", func(t *testing.T) {
		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"}`, "Authorization", auth)
		var c map[string]any
		require.NoError(t, json.Unmarshal(jsonrpcResult(t, r), &c))
		require.Equal(t, "0.3.0", c["protocolVersion"], "a 0.3 client needs protocolVersion (0.3.0, as the 0.3 spec and a2a-go v0.3 write it)")
		require.Equal(t, "http://127.0.0.1:8080", c["url"], "a 0.3 client needs url")
		require.Equal(t, "JSONRPC", c["preferredTransport"])
		require.Equal(t, true, c["supportsAuthenticatedExtendedCard"])
	})

	t.Run("0.3 HTTP+JSON /v1/card without A2A-Version", func(t *testing.T) {
		r := srv.Do(t, http.MethodGet, "/v1/card", "", "Authorization", auth)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, wantSkills, cardOf(t, r.Body, ""))
	})

	t.Run("a2a-go 0.3 compat JSON-RPC transport", func(t *testing.T) {
		tr := a2av0.NewJSONRPCTransport(a2av0.JSONRPCTransportConfig{URL: srv.URL, Client: srv.HTTP})
		card, err := tr.GetExtendedAgentCard(t.Context(), a2aclient.ServiceParams{"authorization": {auth}}, &a2a.GetExtendedAgentCardRequest{})
		require.NoError(t, err)
		require.Equal(t, wantSkills, skillIDs(card))

		// a2aclient.Client sends A2A-Version: 0.3 on every call of a 0.3 interface, and this
		// transport's error decoder takes data as a list only: capgate sends it one.
		_, err = tr.GetExtendedAgentCard(t.Context(), a2aclient.ServiceParams{a2a.SvcParamVersion: {"0.3"}}, &a2a.GetExtendedAgentCardRequest{})
		require.ErrorIs(t, err, a2a.ErrUnauthenticated)
	})

	t.Run("1.0 name without A2A-Version is -32601", func(t *testing.T) {
		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":"x1","method":"GetExtendedAgentCard"}`, "Authorization", auth)
		require.JSONEq(t, rpcErr03(`"x1"`, -32601, "METHOD_NOT_FOUND",
			`method "GetExtendedAgentCard" is not an A2A 0.3 method; send A2A-Version: 1.0 or use agent/getAuthenticatedExtendedCard`), string(r.Body))
	})

	t.Run("A2A-Version as a list", func(t *testing.T) {
		msg := "the A2A-Version header must be given once, with one version"
		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":9,"method":"GetExtendedAgentCard"}`, "Authorization", auth, "A2A-Version", "1.0, 0.3")
		require.Equal(t, http.StatusOK, r.Status)
		require.JSONEq(t, rpcErr("9", -32600, "INVALID_REQUEST", msg, "supportedVersions", "1.0,0.3"), string(r.Body))
	})

	refused := []string{"2.0", "0.2", "1.1", "v1.0", "latest"}
	for _, v := range refused {
		t.Run("A2A-Version "+v, func(t *testing.T) {
			msg := `A2A version "` + v + `" is not supported; supported versions: 1.0, 0.3`
			r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":9,"method":"GetExtendedAgentCard"}`, "Authorization", auth, "A2A-Version", v)
			require.Equal(t, http.StatusOK, r.Status)
			require.JSONEq(t, rpcErr("9", -32009, "VERSION_NOT_SUPPORTED", msg, "supportedVersions", "1.0,0.3"), string(r.Body))

			r = srv.Do(t, http.MethodGet, "/extendedAgentCard", "", "Authorization", auth, "A2A-Version", v)
			require.Equal(t, http.StatusBadRequest, r.Status)
			require.JSONEq(t, statusErr(400, "UNIMPLEMENTED", "VERSION_NOT_SUPPORTED", msg, "supportedVersions", "1.0,0.3"), string(r.Body))
		})
	}

}
