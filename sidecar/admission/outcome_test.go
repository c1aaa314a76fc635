package admission_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tasks"
)

// TestDecisionCode: every A2A code has its class, and unavailability (the
// task store, an issuer's keys) is told apart from a refusal and from an
// internal error whatever code carries it.
func TestDecisionCode(t *testing.T) {
	require.Equal(t, metrics.CodeOK, admission.DecisionCode(nil))
	for code, want := range map[protocol.Code]metrics.DecisionCode{
		protocol.Unauthenticated:                metrics.CodeRefused,
		protocol.Unauthorized:                   metrics.CodeRefused,
		protocol.TaskNotFound:                   metrics.CodeRefused,
		protocol.ContentTypeNotSupported:        metrics.CodeRefused,
		protocol.ExtensionSupportRequired:       metrics.CodeRefused,
		protocol.ExtendedAgentCardNotConfigured: metrics.CodeRefused,
		protocol.ParseError:                     metrics.CodeInvalid,
		protocol.InvalidRequest:                 metrics.CodeInvalid,
		protocol.MethodNotFound:                 metrics.CodeInvalid,
		protocol.InvalidParams:                  metrics.CodeInvalid,
		protocol.NotFound:                       metrics.CodeInvalid,
		protocol.MethodNotAllowed:               metrics.CodeInvalid,
		protocol.PayloadTooLarge:                metrics.CodeInvalid,
		protocol.UnsupportedOperation:           metrics.CodeInvalid,
		protocol.VersionNotSupported:            metrics.CodeInvalid,
		protocol.PushNotificationNotSupported:   metrics.CodeInvalid,
		protocol.TaskNotCancelable:              metrics.CodeInvalid,
		protocol.Internal:                       metrics.CodeError,
		protocol.InvalidAgentResponse:           metrics.CodeError,
	} {
		require.True(t, code.Valid(), code)
		require.Equal(t, want, admission.DecisionCode(protocol.Errorf(code, "x")), code)
		// Unavailability wins over the code that carries it.
		down := fmt.Errorf("%w: redis lookup: %w", tasks.ErrUnavailable, errors.New("dial tcp: connection refused"))
		require.Equal(t, metrics.CodeUnavailable, admission.DecisionCode(protocol.Wrap(code, down, "x")), code)
	}
	require.Equal(t, metrics.CodeUnavailable, admission.DecisionCode(admission.StoreError(tasks.ErrUnavailable)))
	require.Equal(t, metrics.CodeError, admission.DecisionCode(admission.StoreError(tasks.ErrConflict)), "a handler's conflicting task id")
	require.Equal(t, metrics.CodeUnavailable, admission.DecisionCode(identity.ProtocolError(&identity.Error{Kind: identity.ErrUnavailable})))
	require.Equal(t, metrics.CodeError, admission.DecisionCode(identity.ProtocolError(context.Canceled)))
	// A refusal made outside Rego under a code of no class of its own.
	require.Equal(t, metrics.CodeRefused, admission.DecisionCode(protocol.Errorf("SOMETHING_NEW", "x").Decided(decisionlog.RuleTaskOwner, "")))
	require.Equal(t, metrics.CodeError, admission.DecisionCode(protocol.Errorf("SOMETHING_NEW", "x")))
}
