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

// sentKey is an owner and a message id.
type sentKey struct {
	owner     ownerKey
	messageID string
}

func ownerKeyOf(o Owner) ownerKey { return ownerKey{o.Issuer, o.Subject, o.Tenant} }

// memorySent is the memory store's records: by owner and id, and each owner's ids in the order
// reserved (oldest first).
type memorySent struct {
	records map[sentKey]Sent
	order   map[ownerKey][]string
}

// Reserve implements Messages.
func (m *Memory) Reserve(_ context.Context, s Sent, window time.Duration, maxPerOwner int) (Sent, bool, error) {
	if s.Owner.Subject == "" {
		return Sent{}, false, ErrNoOwner
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	o := ownerKeyOf(s.Owner)
	m.pruneSent(o, now, window)
	k := sentKey{o, s.MessageID}
	if old, ok := m.sent.records[k]; ok {
		return old, false, nil
	}
	ids := m.sent.order[o]
	if len(m.sent.records) >= m.max && len(ids) == 0 {
		return Sent{}, false, ErrUnavailable
	}
	for len(ids) > 0 && (len(ids) >= max(maxPerOwner, 1) || len(m.sent.records) >= m.max) {
		delete(m.sent.records, sentKey{o, ids[0]})
		ids = ids[1:]
	}
	s.Done, s.Lost, s.TaskID, s.ContextID, s.Capability, s.Handler = false, false, "", "", "", ""
	m.sent.records[k] = s
	m.sent.order[o] = append(ids, s.MessageID)
	return s, true, nil
}

// pruneSent drops o's records older than window.
func (m *Memory) pruneSent(o ownerKey, now time.Time, window time.Duration) {
	ids := m.sent.order[o]
	n := 0
	for n < len(ids) {
		r, ok := m.sent.records[sentKey{o, ids[n]}]
		if ok && now.Sub(r.Started) < window {
			break
		}
		delete(m.sent.records, sentKey{o, ids[n]})
		n++
	}
	if n == len(ids) {
		delete(m.sent.order, o)
		return
	}
	m.sent.order[o] = ids[n:]
}

// Settle implements Messages.
func (m *Memory) Settle(_ context.Context, s Sent, window time.Duration) error {
	if s.Owner.Subject == "" {
		return ErrNoOwner
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := ownerKeyOf(s.Owner)
	k := sentKey{o, s.MessageID}
	s.Done = true
	if _, ok := m.sent.records[k]; !ok {
		if m.now().Sub(s.Started) >= window {
			return nil // its window is over: nothing to keep
		}
		m.sent.order[o] = append(m.sent.order[o], s.MessageID)
	}
	m.sent.records[k] = s
	return nil
}

// Release implements Messages.
func (m *Memory) Release(_ context.Context, s Sent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := ownerKeyOf(s.Owner)
	k := sentKey{o, s.MessageID}
	if r, found := m.sent.records[k]; !found || !r.Started.Equal(s.Started) {
		return nil
	}
	delete(m.sent.records, k)
	ids := m.sent.order[o]
	for i, id := range ids {
		if id == s.MessageID {
			m.sent.order[o] = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(m.sent.order[o]) == 0 {
		delete(m.sent.order, o)
	}
	return nil
}
