package protocol

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
)

// TestJSONRPCEnvelope: results and errors share one envelope: the same id rule (echoed when
// valid, else null), valid JSON-RPC 2.0 either way, and a result appended without allocating.
func TestJSONRPCEnvelope(t *testing.T) {
	ids := map[string]string{ // the id given → the id echoed
		`7`: `7`, `"a-1"`: `"a-1"`, `null`: `null`, ``: `null`,
		`{"x":1}`: `null`, `[1]`: `null`, `true`: `null`, `{`: `null`,
	}
	for in, want := range ids {
		var res, errResp struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   json.RawMessage `json:"error"`
		}
		r := AppendJSONRPCResult(nil, jsontext.Value(in), []byte(`{"task":{"id":"t"}}`))
		require.NoError(t, json.Unmarshal(r, &res), "%s", r)
		e := Errorf(TaskNotFound, "no such task").MarshalJSONRPC(jsontext.Value(in))
		require.NoError(t, json.Unmarshal(e, &errResp), "%s", e)
		for _, got := range []struct {
			JSONRPC string
			ID      json.RawMessage
		}{{res.JSONRPC, res.ID}, {errResp.JSONRPC, errResp.ID}} {
			require.Equal(t, "2.0", got.JSONRPC)
			require.JSONEq(t, want, string(got.ID), "id %q", in)
		}
		require.JSONEq(t, `{"task":{"id":"t"}}`, string(res.Result))
		require.Nil(t, res.Error)
		require.NotNil(t, errResp.Error)
	}
	buf := make([]byte, 0, 256)
	id, result := jsontext.Value(`"id-1"`), []byte(`{"message":{}}`)
	allocs := testing.AllocsPerRun(100, func() {
		buf = AppendJSONRPCResult(buf[:0], id, result)
	})
	require.Zero(t, allocs)
}

// TestCanonicalKey: the spelled-out keys of HTTPHeader.Values are net/http's canonical forms,
// and a lookup by any spelling of a header name finds its values.
func TestCanonicalKey(t *testing.T) {
	for _, name := range []string{VersionHeader, ExtensionsHeader, ExtensionsHeaderV03, "Authorization", "x-other-header"} {
		if got, want := canonicalKey(name), http.CanonicalHeaderKey(name); got != want {
			t.Errorf("canonicalKey(%q) = %q, want %q", name, got, want)
		}
		h := http.Header{}
		h.Add(name, "v1")
		h.Add(strings.ToLower(name), "v2")
		for _, spelling := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			if got := HTTPHeader(h).Values(spelling); !slices.Equal(got, []string{"v1", "v2"}) {
				t.Errorf("Values(%q) = %q, want [v1 v2]", spelling, got)
			}
		}
	}
}
