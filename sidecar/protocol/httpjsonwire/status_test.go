package httpjsonwire

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

func TestMarshalStatusShape(t *testing.T) {
	e := protocol.Errorf(protocol.NotFound, `no A2A route matches "/x"`).WithMetadata("path", "/x")
	require.Equal(t, `{"error":{"code":404,"status":"NOT_FOUND","message":"no A2A route matches \"/x\"","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"METHOD_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"path":"/x"}}]}}`,
		string(MarshalStatus(e)))
}

// TestErrorHidesCause: the wrapped cause of an error never reaches a client.
func TestErrorHidesCause(t *testing.T) {
	e := protocol.Wrap(protocol.ParseError, errors.New("jsontext: offset 17"), "request body is not valid JSON")
	require.NotContains(t, string(MarshalStatus(e)), "offset")
}
