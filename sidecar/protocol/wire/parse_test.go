package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/wire"
)

// headerMap is a Header over a plain map (canonical names).
type headerMap map[string][]string

func (h headerMap) Values(n string) []string { return h[n] }

// TestParseErrorData: a JSON-RPC request's ErrorData is the shape protocol.ErrorDataShape gives
// for its headers and query, whether its body parses or not.
func TestParseErrorData(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     headerMap
		query string
		want  protocol.DataShape
	}{
		{"no version", headerMap{}, "", protocol.DataObject},
		{"A2A-Version 0.3", headerMap{protocol.VersionHeader: {"0.3"}}, "", protocol.DataList},
		{"A2A-Version 1.0", headerMap{protocol.VersionHeader: {"1.0"}}, "", protocol.DataList},
		{"version parameter", headerMap{}, "A2A-Version=1.0", protocol.DataList},
		{"unreadable version", headerMap{protocol.VersionHeader: {"9"}}, "", protocol.DataList},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, protocol.ErrorDataShape(tc.h, tc.query))
			for _, body := range []string{`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t"}}`, `{"jsonrpc":"2.0","id":1,`} {
				r, _ := wire.Parse(protocol.Envelope{Method: "POST", Path: "/", Query: tc.query, Header: tc.h, Body: []byte(body)}, "", protocol.Limits{})
				require.NotNil(t, r)
				require.Equal(t, tc.want, r.ErrorData, "%s", body)
			}
		})
	}
}
