package jsonrpcwire

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

// TestMethodNamesRoundTrip: every operation is found by every JSON-RPC method the table gives
// it, in its version, and gives that name back.
func TestMethodNamesRoundTrip(t *testing.T) {
	for _, o := range protocol.Operations() {
		s := o.Spec()
		op := s.Op
		t.Run(string(op), func(t *testing.T) {
			require.True(t, op.Known())
			for _, c := range []struct {
				v    protocol.Version
				name string
			}{{protocol.V1, s.JSONRPC}, {protocol.V03, s.JSONRPC03}} {
				require.Equal(t, c.name, protocol.MethodName(c.v, op))
				if c.name == "" {
					continue
				}
				got, perr := protocol.JSONRPCOperation(c.v, c.name)
				require.Nil(t, perr, c.name)
				require.Equal(t, op, got)
				got, ok := protocol.MethodOperation(c.name)
				require.True(t, ok, c.name)
				require.Equal(t, op, got)
				require.True(t, IsA2AMethod(c.name))
				name, ok := methodName([]byte(strconv.Quote(c.name)))
				require.True(t, ok)
				require.Equal(t, c.name, name)
			}
		})
	}
}
