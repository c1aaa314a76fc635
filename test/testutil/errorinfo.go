package testutil

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"
)

// ErrorInfo is the google.rpc.ErrorInfo an A2A error carries.
type ErrorInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata"`
}

// ErrorData is a JSON-RPC error's data as capgate writes it: a list of ErrorInfo to A2A 1.0
// callers, the one ErrorInfo object itself to 0.3 callers (jsonrpcwire.MarshalErrorIn).
// It reads either, as a list; tests that care which shape was sent check it themselves.
type ErrorData []ErrorInfo

// UnmarshalJSON reads a list of ErrorInfo or one ErrorInfo object.
func (d *ErrorData) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		var one ErrorInfo
		if err := json.Unmarshal(t, &one); err != nil {
			return err
		}
		*d = ErrorData{one}
		return nil
	}
	var list []ErrorInfo
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*d = list
	return nil
}

// RequireStreamRefused checks the error an a2a-go v2 client of binding reports for a streaming
// call refused before its stream: target (errors.Is) over HTTP+JSON and gRPC; over A2A 1.0
// JSON-RPC capgate answers a plain JSON-RPC error with the error's HTTP status, which a2a-go
// v2.3.1's JSON-RPC stream reader reports by that status only ("unexpected HTTP status: …",
// docs/interop.md, "Stream errors have one form per caller binding").
func RequireStreamRefused(t testing.TB, binding a2a.TransportProtocol, err, target error) {
	t.Helper()
	if binding == a2a.TransportProtocolJSONRPC {
		require.ErrorContains(t, err, "unexpected HTTP status: ")
		return
	}
	require.ErrorIs(t, err, target)
}
