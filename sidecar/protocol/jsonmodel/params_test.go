package jsonmodel

import (
	"testing"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
)

// TestUnreadOperationRefused: an operation the params reader has no case for is refused, in
// both versions, never read as having params that name nothing (the "add an operation"
// walkthrough relies on it: a forgotten case fails closed).
func TestUnreadOperationRefused(t *testing.T) {
	for _, v := range []protocol.Version{protocol.V1, protocol.V03} {
		for _, restBody := range []bool{false, true} {
			ps := newParser()
			r := &protocol.Request{}
			err := ps.readParams(v, protocol.Operation("ArchiveTask"), jsontext.Value(`{"id":"t-1"}`), r, restBody)
			ps.release()
			require.NotNil(t, err, "%s", v)
			require.Equal(t, protocol.UnsupportedOperation, err.Code, "%s", v)
			require.Empty(t, r.Tasks, "%s", v)
		}
	}
}
