package protocol

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Code names one kind of protocol error. The A2A codes follow the specification's error names;
// NotFound, MethodNotAllowed and PayloadTooLarge are HTTP-level refusals
// that are reported to A2A clients as the closest standard error (see [Error.Reason]).
type Code string

// Error codes.
const (
	ParseError     Code = "PARSE_ERROR"
	InvalidRequest Code = "INVALID_REQUEST"
	MethodNotFound Code = "METHOD_NOT_FOUND"
	InvalidParams  Code = "INVALID_PARAMS"
	Internal       Code = "INTERNAL_ERROR"

	TaskNotFound                   Code = "TASK_NOT_FOUND"
	TaskNotCancelable              Code = "TASK_NOT_CANCELABLE"
	PushNotificationNotSupported   Code = "PUSH_NOTIFICATION_NOT_SUPPORTED"
	UnsupportedOperation           Code = "UNSUPPORTED_OPERATION"
	ContentTypeNotSupported        Code = "CONTENT_TYPE_NOT_SUPPORTED"
	InvalidAgentResponse           Code = "INVALID_AGENT_RESPONSE"
	ExtendedAgentCardNotConfigured Code = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
	ExtensionSupportRequired       Code = "EXTENSION_SUPPORT_REQUIRED"
	VersionNotSupported            Code = "VERSION_NOT_SUPPORTED"
	Unauthenticated                Code = "UNAUTHENTICATED"
	Unauthorized                   Code = "UNAUTHORIZED"

	// NotFound is an HTTP+JSON route that does not exist (HTTP 404, reason METHOD_NOT_FOUND).
	NotFound Code = "NOT_FOUND"
	// MethodNotAllowed is a known HTTP+JSON route used with the wrong HTTP method (HTTP 405).
	MethodNotAllowed Code = "METHOD_NOT_ALLOWED"
	// PayloadTooLarge is a body over [Limits.MaxBodyBytes] (HTTP 413, reason INVALID_REQUEST).
	PayloadTooLarge Code = "PAYLOAD_TOO_LARGE"
	// Unavailable is an internal error that did nothing the caller must account for: the
	// request was refused before any handler was called (or while an earlier call of the same
	// message is still running), and sending it again later is safe. JSON-RPC -32603 and reason
	// INTERNAL_ERROR as Internal (A2A has no code of its own for it), HTTP 503 with
	// Retry-After, gRPC UNAVAILABLE: the status every HTTP and gRPC client already retries.
	Unavailable Code = "UNAVAILABLE"
	// ResourceExhausted is a call over one of the caller's quotas (docs/quotas.md): nothing was
	// run, and the same call fits after the retry delay its metadata names (MetaRetryAfter).
	// A2A defines no error for it: JSON-RPC -32029 (a server-defined code) with ErrorInfo reason
	// RESOURCE_EXHAUSTED, HTTP 429 with Retry-After, gRPC RESOURCE_EXHAUSTED with RetryInfo.
	ResourceExhausted Code = "RESOURCE_EXHAUSTED"
)

// Metadata keys and values capgate adds to an error's ErrorInfo.
const (
	// MetaOutcome says what became of a message the error answers, when it is not obvious from
	// the code: OutcomeNotRun, OutcomeInProgress or OutcomeUnknown (docs/operations.md, "What
	// an error tells a caller").
	MetaOutcome = "outcome"
	// OutcomeNotRun: no handler was called for this request; sending it again is safe.
	OutcomeNotRun = "not_run"
	// OutcomeInProgress: an earlier call of the same message (same messageId, same caller) is
	// still running; sending it again later answers with its task, and never runs it twice.
	OutcomeInProgress = "in_progress"
	// OutcomeUnknown: the handler was called, and what it did was not recorded; sending the
	// same message again does not run it again (it answers with this outcome until the
	// idempotency window ends): look for its effect before sending it as a new message.
	OutcomeUnknown = "unknown"
	// MetaQuota names the quota a ResourceExhausted refusal is over (policy/quota.Applied.ID).
	MetaQuota = "quota"
	// MetaRetryAfter is the whole seconds until the refused call would fit (ResourceExhausted);
	// the same delay is the Retry-After header and the gRPC RetryInfo.
	MetaRetryAfter = "retry_after"
	// MetaQuotaLimit and MetaQuotaWindow are the refused quota's budget and window (whole
	// seconds), for the RateLimit-Policy header.
	MetaQuotaLimit  = "quota_limit"
	MetaQuotaWindow = "quota_window"
)

// ErrorInfoType is the @type of a google.rpc.ErrorInfo detail, as a2a-go decodes it.
const ErrorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"

// Domain is the ErrorInfo domain of every A2A error.
const Domain = "a2a-protocol.org"

// codeInfo is the wire mapping of one Code.
type codeInfo struct {
	jsonrpc int
	reason  string
	http    int
	status  string // google.rpc.Code name
}

// info maps a code to its wire forms: JSON-RPC codes as a2a-go's client maps them, HTTP status
// and google.rpc.Code per the A2A 1.0 error mapping table. Unknown codes are internal errors.
func (c Code) info() codeInfo {
	switch c {
	case ParseError:
		return codeInfo{-32700, "PARSE_ERROR", http.StatusBadRequest, "INVALID_ARGUMENT"}
	case InvalidRequest:
		return codeInfo{-32600, "INVALID_REQUEST", http.StatusBadRequest, "INVALID_ARGUMENT"}
	case MethodNotFound:
		return codeInfo{-32601, "METHOD_NOT_FOUND", http.StatusNotImplemented, "UNIMPLEMENTED"}
	case InvalidParams:
		return codeInfo{-32602, "INVALID_PARAMS", http.StatusBadRequest, "INVALID_ARGUMENT"}
	case TaskNotFound:
		return codeInfo{-32001, "TASK_NOT_FOUND", http.StatusNotFound, "NOT_FOUND"}
	case TaskNotCancelable:
		return codeInfo{-32002, "TASK_NOT_CANCELABLE", http.StatusConflict, "FAILED_PRECONDITION"}
	case PushNotificationNotSupported:
		return codeInfo{-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", http.StatusBadRequest, "UNIMPLEMENTED"}
	case UnsupportedOperation:
		return codeInfo{-32004, "UNSUPPORTED_OPERATION", http.StatusBadRequest, "UNIMPLEMENTED"}
	case ContentTypeNotSupported:
		return codeInfo{-32005, "CONTENT_TYPE_NOT_SUPPORTED", http.StatusUnsupportedMediaType, "INVALID_ARGUMENT"}
	case InvalidAgentResponse:
		return codeInfo{-32006, "INVALID_AGENT_RESPONSE", http.StatusBadGateway, "INTERNAL"}
	case ExtendedAgentCardNotConfigured:
		return codeInfo{-32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", http.StatusBadRequest, "FAILED_PRECONDITION"}
	case ExtensionSupportRequired:
		return codeInfo{-32008, "EXTENSION_SUPPORT_REQUIRED", http.StatusBadRequest, "FAILED_PRECONDITION"}
	case VersionNotSupported:
		return codeInfo{-32009, "VERSION_NOT_SUPPORTED", http.StatusBadRequest, "UNIMPLEMENTED"}
	case Unauthenticated:
		return codeInfo{-31401, "UNAUTHENTICATED", http.StatusUnauthorized, "UNAUTHENTICATED"}
	case Unauthorized:
		return codeInfo{-31403, "UNAUTHORIZED", http.StatusForbidden, "PERMISSION_DENIED"}
	case NotFound:
		return codeInfo{-32601, "METHOD_NOT_FOUND", http.StatusNotFound, "NOT_FOUND"}
	case MethodNotAllowed:
		return codeInfo{-32601, "METHOD_NOT_FOUND", http.StatusMethodNotAllowed, "UNIMPLEMENTED"}
	case PayloadTooLarge:
		return codeInfo{-32600, "INVALID_REQUEST", http.StatusRequestEntityTooLarge, "INVALID_ARGUMENT"}
	case Unavailable:
		return codeInfo{-32603, "INTERNAL_ERROR", http.StatusServiceUnavailable, "UNAVAILABLE"}
	case ResourceExhausted:
		return codeInfo{-32029, "RESOURCE_EXHAUSTED", http.StatusTooManyRequests, "RESOURCE_EXHAUSTED"}
	default:
		return codeInfo{-32603, "INTERNAL_ERROR", http.StatusInternalServerError, "INTERNAL"}
	}
}

// CodeOfReason is the A2A code whose google.rpc.ErrorInfo reason is reason (TASK_NOT_FOUND,
// INTERNAL_ERROR...); false for any other reason, among them the HTTP-level refusals' own.
func CodeOfReason(reason string) (Code, bool) {
	c := Code(reason)
	if c.info().reason != reason {
		return "", false
	}
	return c, true
}

// Valid reports whether c is one of the codes above.
func (c Code) Valid() bool {
	return c == Internal || c == Unavailable || c.info().reason != "INTERNAL_ERROR"
}

// Error is a protocol error to be returned to an A2A client. Message and Metadata are shown to
// the client; the wrapped cause never is.
type Error struct {
	Code     Code
	Message  string
	Metadata map[string]string
	// ID is the JSON-RPC id of the request that failed, when it was read; nil otherwise.
	ID jsontext.Value

	cause   error
	missing bool // Unauthenticated because no credential was presented
	// rule and capability name the rule outside Rego that refused, and the capability it
	// concerned, for the decision log (never sent to a client); see Decided.
	rule, capability string
}

// Decided records, for the decision log only, the rule outside Rego that made this refusal
// (a dotted name such as "admission.task_owner" or "lifecycle.removed"; the list is in
// docs/observability.md) and the capability it concerned ("" when none). It returns e.
func (e *Error) Decided(rule, capability string) *Error {
	e.rule, e.capability = rule, capability
	return e
}

// Rule is the rule Decided recorded, or "".
func (e *Error) Rule() string { return e.rule }

// Capability is the capability Decided recorded, or "".
func (e *Error) Capability() string { return e.capability }

// Errorf returns an error with the given code and a formatted client-facing message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: sprintf(format, args...)}
}

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// Wrap returns an error with the given code and client-facing message that wraps cause; the
// cause is available to errors.Is/As and logs but is never sent to a client.
func Wrap(code Code, cause error, msg string) *Error {
	return &Error{Code: code, Message: msg, cause: cause}
}

// MissingCredentials is the Unauthenticated error for a request that carried no credential;
// its WWW-Authenticate challenge is a bare "Bearer".
func MissingCredentials() *Error {
	return &Error{Code: Unauthenticated, Message: "authentication required", missing: true}
}

// AsError is err in the protocol's error model: nil when err is nil (or a nil *Error), the
// *Error err is or wraps, and anything else wrapped with code and the client-facing msg (err
// kept for the log). Where a callback's error result carries protocol errors (a stream's yield,
// a responder, a message decoder), it is the one way back to an *Error.
func AsError(err error, code Code, msg string) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Wrap(code, err, msg)
}

// IsCode reports whether err is (or wraps) an *Error with the given code.
func IsCode(err error, code Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Error returns the code, message and cause, for logs. Clients see only Message.
func (e *Error) Error() string {
	s := string(e.Code) + ": " + e.Message
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

// Unwrap returns the wrapped cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Code == e.Code
}

// WithMetadata returns e with k=v added to its ErrorInfo metadata.
func (e *Error) WithMetadata(k, v string) *Error {
	if e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	e.Metadata[k] = v
	return e
}

// WithID returns e carrying the JSON-RPC id to echo.
func (e *Error) WithID(id jsontext.Value) *Error {
	e.ID = id
	return e
}

// JSONRPCCode is the JSON-RPC error code.
func (e *Error) JSONRPCCode() int { return e.Code.info().jsonrpc }

// Reason is the google.rpc.ErrorInfo reason, as a2a-go's a2a.ErrorReason spells it.
func (e *Error) Reason() string { return e.Code.info().reason }

// HTTPStatus is the HTTP status of the error in the HTTP+JSON binding.
func (e *Error) HTTPStatus() int { return e.Code.info().http }

// StatusName is the google.rpc.Code name (as in google.rpc.Status.status), also the gRPC status.
func (e *Error) StatusName() string { return e.Code.info().status }

// DataShape is the shape of the data member of a JSON-RPC error answer (ErrorDataShape says
// which a caller reads).
type DataShape uint8

// Data shapes.
const (
	// DataList is A2A 1.0's: a list holding the google.rpc.ErrorInfo. a2a-go v2's readers,
	// its 0.3 layer's included, decode only a list.
	DataList DataShape = iota
	// DataObject is the ErrorInfo object itself, the shape of A2A 0.3's ecosystem: the 0.3
	// schema leaves data free-form, 0.3 servers send an object or nothing, and a2a-go v0.3.15
	// decodes only an object (a list makes every error reach it untyped: "cannot unmarshal
	// array into … Error.error.data").
	DataObject
)

// RetryInfoType is the @type of a google.rpc.RetryInfo detail.
const RetryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// RetryAfter is the retry delay in whole seconds a ResourceExhausted error carries
// (MetaRetryAfter); false for any other error.
func (e *Error) RetryAfter() (int64, bool) {
	if e.Code != ResourceExhausted {
		return 0, false
	}
	n, err := strconv.ParseInt(e.Metadata[MetaRetryAfter], 10, 64)
	return n, err == nil && n >= 0
}

// WWWAuthenticate is the RFC 6750 challenge for Unauthenticated and Unauthorized errors, "" for
// any other code.
func (e *Error) WWWAuthenticate() string {
	switch e.Code {
	case Unauthenticated:
		if e.missing {
			return "Bearer"
		}
		return `Bearer error="invalid_token", error_description="` + challengeText(e.Message) + `"`
	case Unauthorized:
		return `Bearer error="insufficient_scope", error_description="` + challengeText(e.Message) + `"`
	default:
		return ""
	}
}

// challengeText keeps only the characters RFC 6750 allows in error_description.
func challengeText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return ' '
		}
		return r
	}, s)
}
