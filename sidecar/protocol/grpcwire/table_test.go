package grpcwire

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

// TestServiceNamesRoundTrip: every operation is found by every gRPC method the table gives it,
// on the service of its version, and gives that name back.
func TestServiceNamesRoundTrip(t *testing.T) {
	for _, o := range protocol.Operations() {
		s := o.Spec()
		op := s.Op
		t.Run(string(op), func(t *testing.T) {
			require.True(t, op.Known())
			for _, c := range []struct {
				v       protocol.Version
				service string
				name    string
			}{{protocol.V1, protocol.GRPCService, s.GRPC}, {protocol.V03, protocol.GRPCServiceV03, s.GRPC03}} {
				full := protocol.GRPCMethod(c.v, op)
				if c.name == "" {
					require.Empty(t, full)
					continue
				}
				require.Equal(t, "/"+c.service+"/"+c.name, full)
				got, ok := protocol.GRPCOperation(c.v, c.name)
				require.True(t, ok, full)
				require.Equal(t, op, got) // grpcwire.TestParsePathTable reads the full path
			}
		})
	}
}
