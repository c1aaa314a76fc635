// Package tasks keeps task bindings — which capability and handler a task
// belongs to, and who owns it — and per-capability usage counters, behind a
// small store interface: the memory store here, Redis (sidecar/tasks/redisstore)
// when replicas share work; sidecar/tasks/backends is the table of them.
package tasks

import (
	"context"
	"errors"
	"time"
)

// Owner is who owns a task: the credential's issuer, subject and tenant.
// Two credentials with the same subject and tenant from different issuers
// are different owners: one identity provider cannot reach the tasks of
// another's users.
//
// Legacy marks an owner that also owns bindings written before issuers were
// recorded (Binding.Issuer == "") with the same subject and tenant. The
// caller sets it only when exactly one issuer could have written them: a
// deployment with a single trusted JWT issuer and no mTLS principals (see
// docs/operations.md, "Owners and the issuer").
type Owner struct {
	Issuer, Subject, Tenant string
	Legacy                  bool
}

// Binding ties a task id (as the handler issued it) to its capability,
// handler and owner.
type Binding struct {
	TaskID     string    `json:"taskId"`
	ContextID  string    `json:"contextId,omitempty"`
	Capability string    `json:"capability"`
	Handler    string    `json:"handler"`
	Subject    string    `json:"subject"`
	Tenant     string    `json:"tenant"`
	CreatedAt  time.Time `json:"createdAt"`
	// Pending marks a clarification task held by capgate itself (the router
	// asked the caller to choose); Candidates are the offered capability ids.
	Pending    bool     `json:"pending,omitempty"`
	Candidates []string `json:"candidates,omitempty"`
	// Held is the first message's parts (its params' message.parts, as the
	// handler reads them), HeldVersion its A2A version and HeldMessageID its
	// messageId (the caller's own), kept on a pending binding so that the
	// capability the caller then chooses receives the parts with the answer,
	// and so that the clarification task's history shows the message. Only
	// pending bindings keep them (they expire with the binding); a store
	// drops them from any other. A binding written before message ids were
	// kept has none: its task is rendered without history.
	Held          []byte `json:"held,omitempty"`
	HeldVersion   string `json:"heldVersion,omitempty"`
	HeldMessageID string `json:"heldMessageId,omitempty"`
	// Issuer is the issuer of the owner's credential; "" on bindings written
	// before issuers were recorded (see Owner.Legacy).
	Issuer string `json:"issuer,omitempty"`
	// ExpiresAt is when a pending binding written by BindPending expires;
	// zero for every other binding. A store never returns an expired binding.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// Owner returns the binding's owner (issuer, subject and tenant; never
// Legacy).
func (b Binding) Owner() Owner {
	return Owner{Issuer: b.Issuer, Subject: b.Subject, Tenant: b.Tenant}
}

// OwnedBy reports whether o owns the task: same subject and tenant, and the
// same issuer — or a binding without an issuer and an o marked Legacy. An
// owner without a subject (an anonymous caller) owns nothing.
func (b Binding) OwnedBy(o Owner) bool { return b.Owner().admits(o) }

// admits reports whether the caller o is h, the owner a task or context is
// held by (see Binding.OwnedBy): the one ownership rule of both.
func (h Owner) admits(o Owner) bool {
	if o.Subject == "" || h.Subject != o.Subject || h.Tenant != o.Tenant {
		return false
	}
	return h.Issuer == o.Issuer || (h.Issuer == "" && o.Legacy)
}

// Conflicts reports whether binding b may not overwrite the unexpired
// binding old: only old's owner may rewrite it, and only to the same
// capability and handler unless old is pending (Redis's bindScript decides
// the same in Lua).
func Conflicts(old, b Binding) bool {
	return old.Owner() != b.Owner() || (!old.Pending && (old.Capability != b.Capability || old.Handler != b.Handler))
}

// Context ties an A2A context id to its owner, exactly as a Binding ties a
// task: the caller who first named it in a message (a caller-chosen new id)
// or for whom a handler answered in it. A handler keeps conversation state
// per context, so a context is its owner's alone.
type Context struct {
	ContextID string    `json:"contextId"`
	Issuer    string    `json:"issuer,omitempty"`
	Subject   string    `json:"subject"`
	Tenant    string    `json:"tenant"`
	CreatedAt time.Time `json:"createdAt"`
}

// Owner returns the context's owner (never Legacy).
func (c Context) Owner() Owner {
	return Owner{Issuer: c.Issuer, Subject: c.Subject, Tenant: c.Tenant}
}

// OwnedBy reports whether o owns the context, by the rule of
// Binding.OwnedBy: a context held by an owner without a subject (one a
// handler answered an anonymous caller in) is nobody's.
func (c Context) OwnedBy(o Owner) bool { return c.Owner().admits(o) }

// Expired reports whether b has an expiry that now has reached.
func (b Binding) Expired(now time.Time) bool {
	return !b.ExpiresAt.IsZero() && !now.Before(b.ExpiresAt)
}

// Expiry is now+ttl at millisecond precision, the precision both stores keep.
func Expiry(now time.Time, ttl time.Duration) time.Time {
	return time.UnixMilli(now.Add(ttl).UnixMilli()).UTC()
}

// Usage is a capability's call history.
type Usage struct {
	Capability string    `json:"capability"`
	Calls30d   int64     `json:"calls30d"`
	Total      int64     `json:"total"`
	LastUsed   time.Time `json:"lastUsed,omitzero"`
	// ObservedSince is when the store began counting calls (the memory
	// store: its process start); zero when unknown. A window shorter than
	// Window cannot show that a capability is unused.
	ObservedSince time.Time `json:"observedSince,omitzero"`
}

// ErrConflict is returned by Bind when the task id is already bound to
// another owner or handler: a binding is never silently overwritten.
var ErrConflict = errors.New("task id already bound")

// ErrUnavailable wraps store failures (e.g. Redis unreachable); callers fail
// closed on it.
var ErrUnavailable = errors.New("task store unavailable")

// ErrTooManyPending is returned by BindPending when the owner already holds
// the most unexpired pending bindings it may (and for an owner without a
// subject, who may hold none).
var ErrTooManyPending = errors.New("too many pending tasks for this caller")

// ErrNotPending is returned by BindPending for a binding that is not
// pending or a ttl that is not positive: a programming error.
var ErrNotPending = errors.New("BindPending needs a pending binding and a positive ttl")

// Store holds bindings and usage.
type Store interface {
	// Bind records b without an expiry (b.ExpiresAt is ignored). Re-binding
	// a task to the same owner (issuer, subject and tenant, compared
	// exactly), capability and handler is a no-op update, and a pending
	// binding may be re-bound by its owner to any capability; anything else
	// is ErrConflict. To re-bind a task owned through Owner.Legacy, pass the
	// stored binding's Issuer ("").
	Bind(ctx context.Context, b Binding) error
	// BindPending records the pending binding b (b.Pending must be true)
	// with ExpiresAt = now+ttl, under Bind's conflict rules. It returns
	// ErrTooManyPending, writing nothing, when b's owner already holds
	// maxPerOwner unexpired pending bindings other than b.TaskID, or when b
	// has no subject. The check and the write are atomic.
	BindPending(ctx context.Context, b Binding, ttl time.Duration, maxPerOwner int) error
	// Lookup returns the binding of a task id; an expired binding is not
	// found.
	Lookup(ctx context.Context, taskID string) (Binding, bool, error)
	// Owned lists all the unexpired tasks o owns (Binding.OwnedBy), in list
	// order (Position); with o.Legacy it includes the bindings without an
	// issuer. It reads them all: ListTasks reads OwnedPage.
	Owned(ctx context.Context, o Owner) ([]Binding, error)
	// OwnedPage lists at most limit (capped at MaxOwnedPage) of the
	// unexpired tasks o owns, as Owned would, that come after the position
	// after (nil: from the start) and, with a contextID, are in that
	// context. The work is bounded by the page, not by how many tasks o
	// owns (but see Memory.OwnedPage).
	OwnedPage(ctx context.Context, o Owner, after *Position, contextID string, limit int) (Page, error)
	// Delete drops a binding (e.g. a resolved clarification task).
	Delete(ctx context.Context, taskID string) error
	// RecordCall counts one call of a capability at t.
	RecordCall(ctx context.Context, capability string, t time.Time) error
	// Usage returns a capability's usage as of now.
	Usage(ctx context.Context, capability string, now time.Time) (Usage, error)
	ContextOwners
	Messages
}

// ContextOwners holds context ownership.
type ContextOwners interface {
	// ClaimContext makes c's owner the holder of context c.ContextID unless
	// another owner holds it, and returns the holder: c (CreatedAt kept from
	// an earlier claim; now when zero) when c's owner holds it, newly or
	// already (issuer, subject and tenant compared exactly), else the other
	// holder, unchanged. The check and the write are atomic: of concurrent
	// claims of one new id, exactly one owner wins. The holder's claim
	// renews the context's life as Bind renews a binding's.
	ClaimContext(ctx context.Context, c Context) (Context, error)
	// LookupContext returns the holder of a context id.
	LookupContext(ctx context.Context, contextID string) (Context, bool, error)
}

// Owners is what admission (the gateway's and the ext_authz server's) needs:
// who owns a task, and who owns — or claims — a context.
type Owners interface {
	Lookup(ctx context.Context, taskID string) (Binding, bool, error)
	ContextOwners
}

var (
	_ Store  = (*Memory)(nil)
	_ Owners = (*Memory)(nil)
)
