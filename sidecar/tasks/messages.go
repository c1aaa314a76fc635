package tasks

import (
	"context"
	"errors"
	"time"
)

// Sent records one message an owner sent (its A2A messageId) and what became of it, so that a
// retry of the same message does not call the handler again (idempotent SendMessage). A record
// is written before the handler is called (Reserve), completed with the task the handler
// answered with (Settle), and kept for the idempotency window.
type Sent struct {
	MessageID string `json:"-"`
	Owner     Owner  `json:"-"`
	// Started is when the message was reserved; Deadline is when a call still not settled
	// stops counting as in progress (the handler's time is up): its outcome is then unknown.
	Started  time.Time `json:"started"`
	Deadline time.Time `json:"deadline"`
	// Digest fingerprints the request the message came in (its canonical params), as the
	// caller reserved it: a later call with the same id and another digest is not a retry of
	// this message. "" (a record written before digests were kept) matches any.
	Digest string `json:"digest,omitempty"`
	// Done is set by Settle: the handler answered. TaskID is the task it answered with (""
	// for a message reply, which creates no task), ContextID the context it answered in.
	Done      bool   `json:"done,omitempty"`
	TaskID    string `json:"taskId,omitempty"`
	ContextID string `json:"contextId,omitempty"`
	// Capability and Handler are what the task was bound to ("" for a task capgate holds
	// itself, a clarification), so that a retry can bind a task whose binding was not written.
	Capability string `json:"capability,omitempty"`
	Handler    string `json:"handler,omitempty"`
	// Lost marks a settled record whose handler call failed in a way that leaves its effect
	// unknown (a timeout, a dropped connection, an answer capgate could not record).
	Lost bool `json:"lost,omitempty"`
}

// State is what a Sent record says of its message at now.
type State int

// States of a Sent record.
const (
	// InProgress: reserved, not settled, before its deadline — the first call is running.
	InProgress State = iota
	// Answered: settled; the handler answered (TaskID when with a task).
	Answered
	// Unknown: settled as Lost, or reserved, never settled and past its deadline — the handler
	// was (or may have been) called and nothing recorded its answer.
	Unknown
)

// Retries reports whether a call whose request has digest d repeats the message s records: the
// same request, or a record that kept no digest.
func (s Sent) Retries(d string) bool { return s.Digest == "" || d == "" || s.Digest == d }

// State is the record's state at now.
func (s Sent) State(now time.Time) State {
	switch {
	case s.Done && s.Lost:
		return Unknown
	case s.Done:
		return Answered
	case now.Before(s.Deadline):
		return InProgress
	}
	return Unknown
}

// Messages keeps the Sent records: at most one per owner and message id within a window, and at
// most maxPerOwner per owner (the oldest go first). The owner is compared exactly (issuer,
// subject and tenant): another owner's message with the same id is another message.
type Messages interface {
	// Reserve records s (Started and Deadline set by the caller; Done, TaskID and ContextID
	// ignored) unless s.Owner already sent s.MessageID within window: then nothing is written
	// and it returns the earlier record and false. The check and the write are atomic: of
	// concurrent reservations of one id by one owner exactly one is new. An owner without a
	// subject reserves nothing (ErrNoOwner).
	Reserve(ctx context.Context, s Sent, window time.Duration, maxPerOwner int) (Sent, bool, error)
	// Settle records what became of the reserved message s: Done is set, TaskID, ContextID,
	// Capability, Handler and Lost are kept. A record that is gone (expired, evicted) is written again for what is left
	// of window.
	Settle(ctx context.Context, s Sent, window time.Duration) error
	// Release drops the record of s.MessageID that s reserved (the one reserved at s.Started;
	// a record another call reserved is kept): the message was not accepted — refused before
	// the handler's call, by the handler itself, or not confirmed by the store — and a retry
	// is a new message.
	Release(ctx context.Context, s Sent) error
}

// ErrNoOwner is returned by Reserve for an owner without a subject (an anonymous caller, whose
// messages nobody can tell apart).
var ErrNoOwner = errors.New("an anonymous caller's messages are not recorded")

func ownerKeyOf(o Owner) ownerKey { return ownerKey{o.Issuer, o.Subject, o.Tenant} }

// memorySent is the memory store's records, by owner: an owner's key is looked up once per
// call, and its records are keyed by message id alone.
type memorySent struct {
	owners map[ownerKey]*ownerSent
	n      int // records over all owners
}

// ownerSent is one owner's records by message id, and the ids in the order reserved (oldest
// first).
type ownerSent struct {
	records map[string]sentRecord
	order   []string
}

// sentRecord is a Sent as the memory store keeps it: without the owner and message id its keys
// hold, and with the deadline as an offset from Started. That keeps it within the 128 bytes a Go
// map holds in place (a Sent is 200: one allocation per record) and leaves the collector fewer
// pointers to follow per record (BenchmarkMemoryMessages). A deadline that Started plus the
// offset does not give back (a zero time, another location) is kept whole in exact; one given
// back may gain or lose Started's monotonic clock reading.
// TestSentRecordRoundTrip holds sentOf(recordOf(s)) to s.
type sentRecord struct {
	started                                        time.Time
	deadline                                       time.Duration // Deadline - Started, unless exact is set
	exact                                          *time.Time
	digest, taskID, contextID, capability, handler string
	done, lost                                     bool
}

func recordOf(s Sent) sentRecord {
	r := sentRecord{started: s.Started, digest: s.Digest, taskID: s.TaskID, contextID: s.ContextID,
		capability: s.Capability, handler: s.Handler, done: s.Done, lost: s.Lost}
	d := s.Deadline.Sub(s.Started)
	if back := s.Started.Add(d); back.Equal(s.Deadline) && back.Location() == s.Deadline.Location() {
		r.deadline = d
	} else {
		exact := s.Deadline
		r.exact = &exact
	}
	return r
}

// sentOf is the Sent r records for the message id of owner o.
func sentOf(o ownerKey, id string, r sentRecord) Sent {
	s := Sent{MessageID: id, Owner: Owner{Issuer: o.issuer, Subject: o.subject, Tenant: o.tenant}, Started: r.started,
		Deadline: r.started.Add(r.deadline), Digest: r.digest, Done: r.done, TaskID: r.taskID, ContextID: r.contextID,
		Capability: r.capability, Handler: r.handler, Lost: r.lost}
	if r.exact != nil {
		s.Deadline = *r.exact
	}
	return s
}

// Reserve implements Messages.
func (m *Memory) Reserve(_ context.Context, s Sent, window time.Duration, maxPerOwner int) (Sent, bool, error) {
	if s.Owner.Subject == "" {
		return Sent{}, false, ErrNoOwner
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := ownerKeyOf(s.Owner)
	os := m.sent.owners[o]
	if os != nil {
		m.pruneSent(os, m.now(), window)
		if old, ok := os.records[s.MessageID]; ok {
			return sentOf(o, s.MessageID, old), false, nil
		}
	}
	if m.sent.n >= m.max && (os == nil || len(os.order) == 0) {
		if os != nil {
			delete(m.sent.owners, o) // pruned to nothing
		}
		return Sent{}, false, ErrUnavailable
	}
	if os == nil {
		os = &ownerSent{records: map[string]sentRecord{}}
		m.sent.owners[o] = os
	}
	for len(os.order) > 0 && (len(os.order) >= max(maxPerOwner, 1) || m.sent.n >= m.max) {
		m.sent.drop(os, os.order[0])
		os.order = os.order[1:]
	}
	s.Done, s.Lost, s.TaskID, s.ContextID, s.Capability, s.Handler = false, false, "", "", "", ""
	os.records[s.MessageID] = recordOf(s)
	os.order = append(os.order, s.MessageID)
	m.sent.n++
	return s, true, nil
}

// drop deletes os's record of id, if any (its order is the caller's).
func (ms *memorySent) drop(os *ownerSent, id string) {
	if _, ok := os.records[id]; ok {
		delete(os.records, id)
		ms.n--
	}
}

// pruneSent drops os's records older than window.
func (m *Memory) pruneSent(os *ownerSent, now time.Time, window time.Duration) {
	n := 0
	for n < len(os.order) {
		r, ok := os.records[os.order[n]]
		if ok && now.Sub(r.started) < window {
			break
		}
		m.sent.drop(os, os.order[n])
		n++
	}
	os.order = os.order[n:]
}

// Settle implements Messages.
func (m *Memory) Settle(_ context.Context, s Sent, window time.Duration) error {
	if s.Owner.Subject == "" {
		return ErrNoOwner
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := ownerKeyOf(s.Owner)
	s.Done = true
	os := m.sent.owners[o]
	if os != nil {
		if _, ok := os.records[s.MessageID]; ok {
			os.records[s.MessageID] = recordOf(s)
			return nil
		}
	}
	if m.now().Sub(s.Started) >= window {
		return nil // its window is over: nothing to keep
	}
	if os == nil {
		os = &ownerSent{records: map[string]sentRecord{}}
		m.sent.owners[o] = os
	}
	os.records[s.MessageID] = recordOf(s)
	os.order = append(os.order, s.MessageID)
	m.sent.n++
	return nil
}

// Release implements Messages.
func (m *Memory) Release(_ context.Context, s Sent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := ownerKeyOf(s.Owner)
	os := m.sent.owners[o]
	if os == nil {
		return nil
	}
	if r, found := os.records[s.MessageID]; !found || !r.started.Equal(s.Started) {
		return nil
	}
	m.sent.drop(os, s.MessageID)
	for i, id := range os.order {
		if id == s.MessageID {
			os.order = append(os.order[:i:i], os.order[i+1:]...)
			break
		}
	}
	if len(os.order) == 0 {
		delete(m.sent.owners, o)
	}
	return nil
}

// Call is one call of a capability at At, as Store.RecordCall counts it.
type Call struct {
	Capability string
	At         time.Time
}

// CountingMessages is implemented by a store that can count a call (Store.RecordCall) in the
// same round trip as a message's Settle or Release, so that a routed message costs the store one
// round trip fewer (the Redis store). Each returns Settle's (or Release's) error and, apart,
// RecordCall's: a call not counted does not fail the message.
type CountingMessages interface {
	SettleCounting(ctx context.Context, s Sent, window time.Duration, c Call) (err, countErr error)
	ReleaseCounting(ctx context.Context, s Sent, c Call) (err, countErr error)
}

// SettlingBinder is implemented by a store that can settle a message's record (Messages.Settle,
// with its call counted as CountingMessages does when c.Capability is not "") and bind the task
// the handler answered with (Store.Bind) in one round trip (the Redis store). The record is
// written before the binding, as when the two are called one after the other. It returns
// Settle's, the count's and Bind's errors.
type SettlingBinder interface {
	SettleBind(ctx context.Context, s Sent, window time.Duration, c Call, b Binding) (err, countErr, bindErr error)
}
