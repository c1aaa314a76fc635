package admission

import (
	"errors"

	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tasks"
)

// DecisionCode classes a request's answer for capgate_decisions_total's code
// label, the same way at both doors: nil is CodeOK; an answer caused by a
// task store that could not answer (tasks.ErrUnavailable anywhere in its
// causes) or by an issuer's keys that could not be loaded, and an
// Unavailable answer (a message still in progress) is CodeUnavailable,
// whatever its A2A code; otherwise the A2A code decides —
// a refusal of the caller (authentication, entitlement, ownership, routing,
// a rule outside Rego) is CodeRefused, a request refused for what it is is
// CodeInvalid, and an internal error or a handler's bad answer is CodeError.
func DecisionCode(err *protocol.Error) metrics.DecisionCode {
	if err == nil {
		return metrics.CodeOK
	}
	if errors.Is(err, tasks.ErrUnavailable) || errors.Is(err, identity.ErrUnavailable) || err.Code == protocol.Unavailable {
		return metrics.CodeUnavailable
	}
	switch err.Code {
	case protocol.Unauthenticated, protocol.Unauthorized, protocol.TaskNotFound, protocol.ContentTypeNotSupported,
		protocol.ExtensionSupportRequired, protocol.ExtendedAgentCardNotConfigured, protocol.ResourceExhausted:
		return metrics.CodeRefused
	case protocol.ParseError, protocol.InvalidRequest, protocol.MethodNotFound, protocol.InvalidParams,
		protocol.NotFound, protocol.MethodNotAllowed, protocol.PayloadTooLarge, protocol.UnsupportedOperation,
		protocol.VersionNotSupported, protocol.PushNotificationNotSupported, protocol.TaskNotCancelable:
		return metrics.CodeInvalid
	}
	if err.Rule() != "" {
		return metrics.CodeRefused
	}
	return metrics.CodeError
}
