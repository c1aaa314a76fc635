package protocol

import (
	"strings"
	"unicode/utf8"
)

// The rules every binding's reader applies to the identifiers, tenants and task states a
// request names.

// Limits on the identifiers and tenants a request names.
const (
	MaxIDBytes     = 1024
	MaxTenantBytes = 128
)

// MaxReferenceTasks bounds message.referenceTaskIds: each one is an ownership lookup.
const MaxReferenceTasks = 32

// CheckIdentifier checks an identifier a request names (a task, context or config id) at
// position name: at most MaxIDBytes, no control characters.
func CheckIdentifier(name, s string) *Error {
	if len(s) > MaxIDBytes {
		return Errorf(InvalidParams, "%s is longer than %d bytes", name, MaxIDBytes)
	}
	if HasControl(s) {
		return Errorf(InvalidParams, "%s must not contain control characters", name)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }

// HasControl reports whether s has a control character (C0, DEL or C1), decoding runes only past
// the ASCII prefix.
func HasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return strings.IndexFunc(s[i:], isControl) >= 0
		case isControl(rune(c)):
			return true
		}
	}
	return false
}

// InvalidTenant is the error for a tenant ValidTenant refuses.
func InvalidTenant() *Error {
	return Errorf(InvalidParams, "tenant must be 1 to %d characters of A-Z a-z 0-9 . _ - and not . or ..", MaxTenantBytes)
}

// ValidTenant reports whether t is a single safe path segment.
func ValidTenant(t string) bool {
	if t == "" || t == "." || t == ".." || len(t) > MaxTenantBytes {
		return false
	}
	for i := 0; i < len(t); i++ {
		if !tenantByte(t[i]) {
			return false
		}
	}
	return true
}

// tenantByte reports whether c may appear in a tenant: ASCII letters and
// digits, '.', '_' and '-'.
func tenantByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// Agree merges a value from the path with the one from the body.
func Agree(name, fromPath, fromBody string) (string, *Error) {
	switch {
	case fromBody == "":
		return fromPath, nil
	case fromPath != "" && fromPath != fromBody:
		return "", Errorf(InvalidParams, "%s in the body does not match the path", name)
	default:
		return fromBody, nil
	}
}

// ValidTaskState reports whether s names a task state, in 1.0 (TASK_STATE_WORKING) or 0.3
// (working) form.
func ValidTaskState(s string) bool {
	switch s {
	case "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
		"TASK_STATE_CANCELED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED",
		"submitted", "working", "completed", "failed", "canceled", "input-required", "rejected", "auth-required":
		return true
	}
	return false
}

// TaskOfName extracts {id} (A2A 0.3 resource names) from "tasks/{id}" or "tasks/{id}/pushNotificationConfigs/{c}".
func TaskOfName(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "tasks/")
	if !ok {
		return "", false
	}
	id, sub, hasSub := strings.Cut(rest, "/")
	if id == "" || (hasSub && !strings.HasPrefix(sub, "pushNotificationConfigs/")) {
		return "", false
	}
	return id, true
}
