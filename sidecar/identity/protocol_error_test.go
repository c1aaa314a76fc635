package identity

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

func TestProtocolError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code protocol.Code
		msg  string
	}{
		{"bad token", newError(ErrExpired, "token expired", nil), protocol.Unauthenticated, "token expired"},
		{"unknown key", newError(ErrUnknownKey, "unknown key id", nil), protocol.Unauthenticated, "unknown key id"},
		{"keys unavailable: not the token's fault", newError(ErrUnavailable, "signing keys unavailable", nil), protocol.Internal, "the token issuer's keys are unavailable; try again later"},
		{"cancelled", fmt.Errorf("verify: %w", context.Canceled), protocol.Internal, "the check was cancelled"},
		{"anything else", errors.New("eyJ.secret.token"), protocol.Unauthenticated, "the bearer token could not be verified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ProtocolError(tt.err)
			require.Equal(t, tt.code, e.Code)
			require.Equal(t, tt.msg, e.Message)
			require.NotContains(t, e.Message, "eyJ", "never the token or raw error text")
		})
	}
}
