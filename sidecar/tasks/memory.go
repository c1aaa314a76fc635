package tasks

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Window is how far back Usage.Calls30d counts.
const Window = 30 * 24 * time.Hour

// DefaultMaxBindings bounds the memory store.
const DefaultMaxBindings = 1 << 20

// Memory is an in-process Store. It forgets everything on restart.
type Memory struct {
	mu       sync.RWMutex
	bindings map[string]Binding
	byOwner  map[ownerKey]map[string]struct{}
	usage    map[string]*usageRecord
	max      int
}

type ownerKey struct{ subject, tenant string }

// usageRecord keeps one counter per day over the window.
type usageRecord struct {
	total int64
	last  time.Time
	days  map[int64]int64 // unix day -> calls
}

// NewMemory returns an empty store holding at most max bindings (0: default).
func NewMemory(max int) *Memory {
	if max <= 0 {
		max = DefaultMaxBindings
	}
	return &Memory{
		bindings: map[string]Binding{},
		byOwner:  map[ownerKey]map[string]struct{}{},
		usage:    map[string]*usageRecord{},
		max:      max,
	}
}

// Bind implements Store.
func (m *Memory) Bind(_ context.Context, b Binding) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.bindings[b.TaskID]; ok {
		if old.Owner() != b.Owner() || (!old.Pending && (old.Capability != b.Capability || old.Handler != b.Handler)) {
			return ErrConflict
		}
		if b.CreatedAt.IsZero() {
			b.CreatedAt = old.CreatedAt
		}
	} else if len(m.bindings) >= m.max {
		return ErrUnavailable
	}
	m.bindings[b.TaskID] = b
	k := ownerKey{b.Subject, b.Tenant}
	if m.byOwner[k] == nil {
		m.byOwner[k] = map[string]struct{}{}
	}
	m.byOwner[k][b.TaskID] = struct{}{}
	return nil
}

// Lookup implements Store.
func (m *Memory) Lookup(_ context.Context, taskID string) (Binding, bool, error) {
	m.mu.RLock()
	b, ok := m.bindings[taskID]
	m.mu.RUnlock()
	return b, ok, nil
}

// Owned implements Store.
func (m *Memory) Owned(_ context.Context, subject, tenant string) ([]Binding, error) {
	m.mu.RLock()
	ids := m.byOwner[ownerKey{subject, tenant}]
	out := make([]Binding, 0, len(ids))
	for id := range ids {
		out = append(out, m.bindings[id])
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].TaskID < out[j].TaskID
	})
	return out, nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, taskID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.bindings[taskID]
	if !ok {
		return nil
	}
	delete(m.bindings, taskID)
	k := ownerKey{b.Subject, b.Tenant}
	delete(m.byOwner[k], taskID)
	if len(m.byOwner[k]) == 0 {
		delete(m.byOwner, k)
	}
	return nil
}

func day(t time.Time) int64 { return t.UTC().Unix() / 86400 }

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
	d := day(t)
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
	out := Usage{Capability: capability}
	u := m.usage[capability]
	if u == nil {
		return out, nil
	}
	out.Total, out.LastUsed = u.total, u.last
	from := day(now.Add(-Window))
	for d, n := range u.days {
		if d > from {
			out.Calls30d += n
		}
	}
	return out, nil
}
