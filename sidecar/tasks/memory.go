package tasks

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"
)

// Window is how far back Usage.Calls30d counts.
const Window = 30 * 24 * time.Hour

// DefaultMaxBindings bounds the memory store.
const DefaultMaxBindings = 1 << 20

// Memory is an in-process Store. It forgets everything on restart.
// Expired pending bindings are never returned, and are swept by the first
// write after the earliest of them expired.
type Memory struct {
	mu       sync.RWMutex
	bindings map[string]Binding
	// pos is each binding's list position (PositionOf), kept so that a
	// page read computes no digest per task it passes.
	pos     map[string]Position
	byOwner map[ownerKey]map[string]struct{}
	// pending indexes the bindings that have an expiry, by owner;
	// nextExpiry is the earliest of their expiries (zero: none).
	pending    map[ownerKey]map[string]struct{}
	nextExpiry time.Time
	usage      map[string]*usageRecord
	contexts   map[string]Context
	sent       memorySent
	examples   memoryExamples // candidate routing examples (examples.go)
	max        int
	now        func() time.Time
	started    time.Time // the start of usage observation
}

type ownerKey struct{ issuer, subject, tenant string }

func keyOf(b Binding) ownerKey { return ownerKey{b.Issuer, b.Subject, b.Tenant} }

// usageRecord keeps one counter per day over the window.
type usageRecord struct {
	total int64
	last  time.Time
	days  map[int64]int64 // unix day -> calls
}

// NewMemory returns an empty store holding at most max bindings and max
// contexts (0: default). Of the options it reads WithClock.
func NewMemory(max int, opts ...Option) *Memory {
	if max <= 0 {
		max = DefaultMaxBindings
	}
	return &Memory{
		bindings: map[string]Binding{},
		pos:      map[string]Position{},
		byOwner:  map[ownerKey]map[string]struct{}{},
		pending:  map[ownerKey]map[string]struct{}{},
		usage:    map[string]*usageRecord{},
		contexts: map[string]Context{},
		sent:     memorySent{owners: map[ownerKey]*ownerSent{}},
		max:      max,
		now:      newOptions(opts).now,
		started:  newOptions(opts).now().UTC(),
	}
}

// Bind implements Store.
func (m *Memory) Bind(_ context.Context, b Binding) error {
	b.ExpiresAt = time.Time{}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bind(b, m.now(), 0)
}

// BindPending implements Store.
func (m *Memory) BindPending(_ context.Context, b Binding, ttl time.Duration, maxPerOwner int) error {
	if !b.Pending || ttl <= 0 {
		return ErrNotPending
	}
	if b.Subject == "" || maxPerOwner <= 0 {
		return ErrTooManyPending
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	b.ExpiresAt = Expiry(now, ttl)
	return m.bind(b, now, maxPerOwner)
}

// bind writes b (with an expiry: a pending binding capped at maxPending
// per owner) under Bind's rules. The caller holds m.mu.
func (m *Memory) bind(b Binding, now time.Time, maxPending int) error {
	m.sweep(now)
	if b.Pending && len(b.Held) > 0 {
		b.Held = bytes.Clone(b.Held)
	} else { // as Redis keeps them: the three together, on a pending binding only
		b.Held, b.HeldVersion, b.HeldMessageID = nil, "", ""
	}
	old, exists := m.bindings[b.TaskID]
	if exists {
		if Conflicts(old, b) {
			return ErrConflict
		}
		if b.CreatedAt.IsZero() {
			b.CreatedAt = old.CreatedAt
		}
	}
	k := keyOf(b)
	if !b.ExpiresAt.IsZero() {
		n := len(m.pending[k]) // all unexpired after the sweep
		if _, ok := m.pending[k][b.TaskID]; ok {
			n--
		}
		if n >= maxPending {
			return ErrTooManyPending
		}
	}
	if !exists && len(m.bindings) >= m.max {
		return ErrUnavailable
	}
	m.bindings[b.TaskID] = b
	m.pos[b.TaskID] = PositionOf(b)
	add(m.byOwner, k, b.TaskID)
	if b.ExpiresAt.IsZero() {
		remove(m.pending, k, b.TaskID)
		return nil
	}
	add(m.pending, k, b.TaskID)
	if m.nextExpiry.IsZero() || b.ExpiresAt.Before(m.nextExpiry) {
		m.nextExpiry = b.ExpiresAt
	}
	return nil
}

// sweep drops the expired bindings once the earliest expiry has passed.
// The caller holds m.mu for writing.
func (m *Memory) sweep(now time.Time) {
	if m.nextExpiry.IsZero() || now.Before(m.nextExpiry) {
		return
	}
	m.nextExpiry = time.Time{}
	for _, ids := range m.pending {
		for id := range ids {
			b := m.bindings[id]
			if b.Expired(now) {
				m.drop(id)
			} else if m.nextExpiry.IsZero() || b.ExpiresAt.Before(m.nextExpiry) {
				m.nextExpiry = b.ExpiresAt
			}
		}
	}
}

// drop deletes a binding and its index entries. The caller holds m.mu for
// writing.
func (m *Memory) drop(taskID string) {
	b, ok := m.bindings[taskID]
	if !ok {
		return
	}
	delete(m.bindings, taskID)
	delete(m.pos, taskID)
	k := keyOf(b)
	remove(m.byOwner, k, taskID)
	remove(m.pending, k, taskID)
}

func add(idx map[ownerKey]map[string]struct{}, k ownerKey, id string) {
	if idx[k] == nil {
		idx[k] = map[string]struct{}{}
	}
	idx[k][id] = struct{}{}
}

func remove(idx map[ownerKey]map[string]struct{}, k ownerKey, id string) {
	delete(idx[k], id)
	if len(idx[k]) == 0 {
		delete(idx, k)
	}
}

// Lookup implements Store.
func (m *Memory) Lookup(_ context.Context, taskID string) (Binding, bool, error) {
	now := m.now()
	m.mu.RLock()
	b, ok := m.bindings[taskID]
	m.mu.RUnlock()
	if !ok || b.Expired(now) {
		return Binding{}, false, nil
	}
	return b, true, nil
}

// Owned implements Store.
func (m *Memory) Owned(ctx context.Context, o Owner) ([]Binding, error) {
	return OwnedAll(ctx, o, m.OwnedPage)
}

// OwnedPage implements Store. The memory store keeps no ordered index: it
// scans the owner's tasks, allocating nothing per task it passes, and keeps
// the first limit+1 in order (O(owned) time, O(limit) memory).
func (m *Memory) OwnedPage(_ context.Context, o Owner, after *Position, contextID string, limit int) (Page, error) {
	if o.Subject == "" || limit <= 0 {
		return Page{}, nil
	}
	limit = min(limit, MaxOwnedPage)
	keys := [2]ownerKey{{o.Issuer, o.Subject, o.Tenant}}
	n := 1
	if o.Legacy && o.Issuer != "" {
		keys[1], n = ownerKey{"", o.Subject, o.Tenant}, 2
	}
	type entry struct {
		pos Position
		id  string
	}
	now := m.now()
	best := make([]entry, 0, limit+1) // the first limit+1 in order
	total := 0
	m.mu.RLock()
	for _, k := range keys[:n] {
		for id := range m.byOwner[k] {
			b := m.bindings[id]
			if !b.OwnedBy(o) || b.Expired(now) || (contextID != "" && b.ContextID != contextID) {
				continue
			}
			total++
			p := m.pos[id]
			if after != nil && p.Compare(*after) <= 0 {
				continue
			}
			if len(best) == limit+1 && p.Compare(best[limit].pos) >= 0 {
				continue
			}
			i, _ := slices.BinarySearchFunc(best, p, func(e entry, p Position) int { return e.pos.Compare(p) })
			if len(best) == limit+1 {
				best = best[:limit]
			}
			best = slices.Insert(best, i, entry{p, id})
		}
	}
	page := Page{Total: total, Bindings: make([]Binding, 0, min(len(best), limit))}
	for i, e := range best {
		if i == limit {
			page.More = true
			break
		}
		page.Bindings = append(page.Bindings, m.bindings[e.id])
		page.Next = e.pos
	}
	m.mu.RUnlock()
	return page, nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, taskID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(m.now())
	m.drop(taskID)
	return nil
}

// ClaimContext implements Store. Contexts, like bindings, live until the
// process ends.
func (m *Memory) ClaimContext(_ context.Context, c Context) (Context, error) {
	m.mu.RLock()
	old, ok := m.contexts[c.ContextID]
	m.mu.RUnlock()
	if ok {
		return old, nil // a held context never changes hands: no write lock for its every message
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.contexts[c.ContextID]; ok {
		return old, nil
	}
	if len(m.contexts) >= m.max {
		return Context{}, ErrUnavailable
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = m.now().UTC()
	}
	m.contexts[c.ContextID] = c
	return c, nil
}

// LookupContext implements Store.
func (m *Memory) LookupContext(_ context.Context, contextID string) (Context, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.contexts[contextID]
	return c, ok, nil
}

// Day is the unix day of t (UTC), the unit of the usage counters.
func Day(t time.Time) int64 { return t.UTC().Unix() / 86400 }

// RecordCall implements Store.
func (m *Memory) RecordCall(_ context.Context, capability string, t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.usage[capability]
	if u == nil {
		u = &usageRecord{days: map[int64]int64{}}
		m.usage[capability] = u
	}
	u.total++
	if t.After(u.last) {
		u.last = t
	}
	d := Day(t)
	u.days[d]++
	for k := range u.days { // keep the window bounded
		if k < d-31 {
			delete(u.days, k)
		}
	}
	return nil
}

// Usage implements Store.
func (m *Memory) Usage(_ context.Context, capability string, now time.Time) (Usage, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := Usage{Capability: capability, ObservedSince: m.started}
	u := m.usage[capability]
	if u == nil {
		return out, nil
	}
	out.Total, out.LastUsed = u.total, u.last
	from := Day(now.Add(-Window))
	for d, n := range u.days {
		if d > from {
			out.Calls30d += n
		}
	}
	return out, nil
}
