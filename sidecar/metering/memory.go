package metering

import (
	"context"
	"sync"
	"time"
)

// maxMemoryKeys bounds the counters and marks a Memory holds; past it,
// the ones that are full again (or expired) are dropped first.
const maxMemoryKeys = 1 << 20

// Memory counts in process, for one replica: the arithmetic of
// redis_rate's GCRA script (burst = limit, one cost unit every
// window/limit), under one mutex.
type Memory struct {
	mu    sync.Mutex
	now   func() time.Time
	tat   map[string]time.Time // theoretical arrival time per counter
	marks map[string]time.Time // expiry per mark
}

var _ Counter = (*Memory)(nil)

// NewMemory returns an in-process counter; now is its clock (nil:
// time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, tat: map[string]time.Time{}, marks: map[string]time.Time{}}
}

// Take implements Counter.
func (m *Memory) Take(_ context.Context, key string, limit int64, window time.Duration, cost int64) (Taken, error) {
	if _, err := limitOf(limit, window); err != nil {
		return Taken{}, err
	}
	emission := window / time.Duration(limit)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	tat := now
	if t, ok := m.tat[key]; ok && t.After(now) {
		tat = t
	}
	newTAT := tat.Add(emission * time.Duration(cost))
	allowAt := newTAT.Add(-emission * time.Duration(limit))
	diff := now.Sub(allowAt)
	if diff < 0 {
		return Taken{RetryAfter: -diff, ResetAfter: tat.Sub(now)}, nil
	}
	if newTAT.After(now) {
		m.sweep(now)
		m.tat[key] = newTAT
	}
	return Taken{Allowed: true, Remaining: int64(diff / emission), ResetAfter: newTAT.Sub(now)}, nil
}

// Give implements Counter.
func (m *Memory) Give(_ context.Context, key string, limit int64, window time.Duration, cost int64) error {
	if _, err := limitOf(limit, window); err != nil {
		return err
	}
	emission := window / time.Duration(limit)
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tat[key]
	if !ok {
		return nil
	}
	t = t.Add(-emission * time.Duration(cost))
	if now := m.now(); !t.After(now) {
		delete(m.tat, key)
		return nil
	}
	m.tat[key] = t
	return nil
}

// Mark implements Counter.
func (m *Memory) Mark(_ context.Context, key string, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if exp, ok := m.marks[key]; ok && exp.After(now) {
		return false, nil
	}
	m.sweep(now)
	m.marks[key] = now.Add(ttl)
	return true, nil
}

// Unmark implements Counter.
func (m *Memory) Unmark(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.marks, key)
	return nil
}

// sweep drops counters that are full again and expired marks once the
// maps reach maxMemoryKeys (dropping a full counter loses nothing).
func (m *Memory) sweep(now time.Time) {
	if len(m.tat)+len(m.marks) < maxMemoryKeys {
		return
	}
	for k, t := range m.tat {
		if !t.After(now) {
			delete(m.tat, k)
		}
	}
	for k, t := range m.marks {
		if !t.After(now) {
			delete(m.marks, k)
		}
	}
}
