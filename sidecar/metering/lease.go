package metering

import (
	"context"
	"sync"
	"time"
)

// Lease bounds. A lease is valid for min(maxLeaseTTL, window/leaseTTLShare)
// and holds at most maxLeaseUnits.
const (
	maxLeaseTTL   = time.Second
	leaseTTLShare = 100
	maxLeaseUnits = 256
	// maxLeaseKeys bounds the keys a Leased remembers; past it, expired
	// leases are given back and dropped.
	maxLeaseKeys = 1 << 16
)

// Leased is a Counter that takes budget from a shared one (Redis) in
// leases, so that a busy counter costs one round trip per lease rather
// than per call. Each key's lease is sized to what the key used here in
// the previous lease period: a key used once per period takes exactly its
// cost (as without leases), a busy one takes ahead what it used last
// period, up to maxLeaseUnits. A lease lasts min(1 s, window/100); the
// units it did not use are given back when it expires.
//
// Error bound: every call is charged on the shared counter before it is
// admitted, at most one lease period earlier, so in any window the calls
// admitted stay within what the shared counter admits over the window plus
// one lease period: the limit × ttl / window more (≤ 1 % of the limit)
// than without leases. The other way, a caller may be refused early by at
// most the units other replicas hold in unexpired leases (each at most
// what that replica used in its previous period, ≤ maxLeaseUnits).
type Leased struct {
	inner Counter
	now   func() time.Time
	mu    sync.Mutex
	keys  map[string]*lease
}

type lease struct {
	limit     int64
	window    time.Duration
	units     int64 // charged on the shared counter, not yet admitted here
	until     time.Time
	used      int64 // admitted in the current period
	last      int64 // admitted in the previous period: the next lease's size
	remaining int64 // the shared counter's answer at the last take
	reset     time.Duration
}

var _ Counter = (*Leased)(nil)

// NewLeased leases from inner; now is its clock (nil: time.Now).
func NewLeased(inner Counter, now func() time.Time) *Leased {
	if now == nil {
		now = time.Now
	}
	return &Leased{inner: inner, now: now, keys: map[string]*lease{}}
}

func leaseTTL(window time.Duration) time.Duration {
	return min(maxLeaseTTL, window/leaseTTLShare)
}

// giveBack returns units of a lease to the shared counter (best effort:
// units not given back are only reserved until the counter refills).
type giveBack struct {
	key    string
	limit  int64
	window time.Duration
	units  int64
}

func (l *Leased) give(ctx context.Context, gs []giveBack) {
	for _, g := range gs {
		if g.units > 0 {
			_ = l.inner.Give(ctx, g.key, g.limit, g.window, g.units)
		}
	}
}

// Take implements Counter.
func (l *Leased) Take(ctx context.Context, key string, limit int64, window time.Duration, cost int64) (Taken, error) {
	if cost <= 0 || window <= 0 {
		return l.inner.Take(ctx, key, limit, window, cost)
	}
	now := l.now()
	var back []giveBack
	l.mu.Lock()
	if len(l.keys) >= maxLeaseKeys {
		back = l.sweep(now)
	}
	le := l.keys[key]
	if le != nil && (le.limit != limit || le.window != window) {
		back = append(back, giveBack{key, le.limit, le.window, le.units})
		le = nil
	}
	if le == nil {
		le = &lease{limit: limit, window: window, until: now.Add(leaseTTL(window))}
		l.keys[key] = le
	}
	if !now.Before(le.until) { // a new period: unused units go back
		back = append(back, giveBack{key, limit, window, le.units})
		le.units, le.last, le.used, le.until = 0, le.used, 0, now.Add(leaseTTL(window))
	}
	if le.units >= cost {
		le.units -= cost
		le.used += cost
		t := Taken{Allowed: true, Remaining: le.remaining + le.units, ResetAfter: le.reset}
		l.mu.Unlock()
		l.give(ctx, back)
		return t, nil
	}
	held := le.units // reserved for this call while the shared counter is asked
	le.units = 0
	ahead := min(max(le.last-cost, 0), maxLeaseUnits, limit/2)
	l.mu.Unlock()
	l.give(ctx, back)

	need := cost - held
	t, err := l.inner.Take(ctx, key, limit, window, need+ahead)
	if err == nil && !t.Allowed && ahead > 0 {
		ahead = 0 // near the limit: take exactly what this call needs
		t, err = l.inner.Take(ctx, key, limit, window, need)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	le = l.keys[key]
	if le == nil || le.limit != limit || le.window != window {
		le = &lease{limit: limit, window: window, until: now.Add(leaseTTL(window))}
		l.keys[key] = le
	}
	if err != nil || !t.Allowed {
		le.units += held
		return t, err
	}
	le.units += ahead
	le.used += cost
	le.remaining, le.reset = t.Remaining, t.ResetAfter
	t.Remaining += le.units
	return t, nil
}

// sweep drops expired leases and returns their unused units (l.mu held).
func (l *Leased) sweep(now time.Time) []giveBack {
	var back []giveBack
	for k, le := range l.keys {
		if !now.Before(le.until) {
			back = append(back, giveBack{k, le.limit, le.window, le.units})
			delete(l.keys, k)
		}
	}
	return back
}

// Give implements Counter: the units go back to the shared counter.
func (l *Leased) Give(ctx context.Context, key string, limit int64, window time.Duration, cost int64) error {
	return l.inner.Give(ctx, key, limit, window, cost)
}

// Mark implements Counter.
func (l *Leased) Mark(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return l.inner.Mark(ctx, key, ttl)
}

// Unmark implements Counter.
func (l *Leased) Unmark(ctx context.Context, key string) error { return l.inner.Unmark(ctx, key) }
