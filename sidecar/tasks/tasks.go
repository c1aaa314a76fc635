// Package tasks keeps task bindings — which capability and handler a task
// belongs to, and who owns it — and per-capability usage counters, behind a
// small store interface (memory here; Redis when replicas share work).
package tasks

import (
	"context"
	"errors"
	"time"
)

// Binding ties a task id (as the handler issued it) to its capability,
// handler and owner.
type Binding struct {
	TaskID     string    `json:"taskId"`
	ContextID  string    `json:"contextId,omitempty"`
	Capability string    `json:"capability"`
	Handler    string    `json:"handler"`
	Issuer     string    `json:"issuer,omitempty"`
	Subject    string    `json:"subject"`
	Tenant     string    `json:"tenant"`
	CreatedAt  time.Time `json:"createdAt"`
	// Pending marks a clarification task held by capgate itself (the router
	// asked the caller to choose); Candidates are the offered capability ids.
	Pending    bool     `json:"pending,omitempty"`
	Candidates []string `json:"candidates,omitempty"`
}

// Owner is who owns a task: the credential's issuer, subject and tenant.
// Legacy marks an owner that also owns bindings written before issuers were
// recorded (Binding.Issuer == "") with the same subject and tenant; the caller
// sets it only when exactly one issuer could have written them (see docs).
type Owner struct {
	Issuer, Subject, Tenant string
	Legacy                  bool
}

// Owner is the binding's owner.
func (b Binding) Owner() Owner { return Owner{Issuer: b.Issuer, Subject: b.Subject, Tenant: b.Tenant} }

// OwnedBy reports whether o owns the task: same subject and tenant, and the
// same issuer (or a legacy binding with no issuer, when o.Legacy). An empty
// subject never owns anything.
func (b Binding) OwnedBy(o Owner) bool {
	if o.Subject == "" || b.Subject != o.Subject || b.Tenant != o.Tenant {
		return false
	}
	return b.Issuer == o.Issuer || (b.Issuer == "" && o.Legacy)
}

// Usage is a capability's call history.
type Usage struct {
	Capability string    `json:"capability"`
	Calls30d   int64     `json:"calls30d"`
	Total      int64     `json:"total"`
	LastUsed   time.Time `json:"lastUsed,omitzero"`
}

// ErrConflict is returned by Bind when the task id is already bound to
// another owner or handler: a binding is never silently overwritten.
var ErrConflict = errors.New("task id already bound")

// ErrUnavailable wraps store failures (e.g. Redis unreachable); callers fail
// closed on it.
var ErrUnavailable = errors.New("task store unavailable")

// Store holds bindings and usage.
type Store interface {
	// Bind records b. Re-binding the same task to the same owner, capability
	// and handler is a no-op update; anything else is ErrConflict.
	Bind(ctx context.Context, b Binding) error
	// Lookup returns the binding of a task id.
	Lookup(ctx context.Context, taskID string) (Binding, bool, error)
	// Owned lists the tasks of one owner, newest first.
	Owned(ctx context.Context, subject, tenant string) ([]Binding, error)
	// Delete drops a binding (e.g. a resolved clarification task).
	Delete(ctx context.Context, taskID string) error
	// RecordCall counts one call of a capability at t.
	RecordCall(ctx context.Context, capability string, t time.Time) error
	// Usage returns a capability's usage as of now.
	Usage(ctx context.Context, capability string, now time.Time) (Usage, error)
}

// Owners is the one method the ext_authz server needs.
type Owners interface {
	Lookup(ctx context.Context, taskID string) (Binding, bool, error)
}

var (
	_ Store  = (*Memory)(nil)
	_ Owners = (*Memory)(nil)
)
