// Package metering counts admitted calls against the quotas the policy
// decided apply to them (policy/quota.Applied) and refuses a call over any
// of them before its handler runs. Counting is GCRA (the generic cell rate
// algorithm): a budget of L per window W admits a burst of L and refills
// continuously at L/W, so a caller is never locked out for a whole window
// after one burst. On Redis (one server, Sentinel or Cluster) it is
// go-redis/redis_rate's script, atomic on the server; in memory (one
// replica) the same arithmetic under a mutex.
package metering

import (
	"context"
	"errors"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Taken is a counter's answer to one charge.
type Taken struct {
	// Allowed: the cost fitted and was charged.
	Allowed bool
	// Remaining is what could still be charged now (whole calls or units).
	Remaining int64
	// RetryAfter is how long until the refused cost would fit (0 when
	// allowed).
	RetryAfter time.Duration
	// ResetAfter is how long until the counter is full again.
	ResetAfter time.Duration
}

// Counter keeps GCRA counters and once-marks on a store.
type Counter interface {
	// Take charges cost against key's budget of limit per window, when it
	// fits; a refusal charges nothing.
	Take(ctx context.Context, key string, limit int64, window time.Duration, cost int64) (Taken, error)
	// Give returns cost to key's budget (a call refused by a later quota),
	// as far as the counter still holds it.
	Give(ctx context.Context, key string, limit int64, window time.Duration, cost int64) error
	// Mark records key for ttl; false when it was marked already.
	Mark(ctx context.Context, key string, ttl time.Duration) (bool, error)
	// Unmark drops a mark.
	Unmark(ctx context.Context, key string) error
}

// Redis counts on a Redis store (redisstore.Store.Client): redis_rate's GCRA
// script for budgets, SET NX for marks. Keys are prefixed with the store's
// prefix; their hash tag (quota.Applied.CounterKey) keeps one caller's
// counters and marks in one Cluster slot.
type Redis struct {
	rdb    redis.UniversalClient
	rate   *redis_rate.Limiter
	prefix string
}

var _ Counter = (*Redis)(nil)

// NewRedis counts on rdb; prefix is the store's key prefix.
func NewRedis(rdb redis.UniversalClient, prefix string) *Redis {
	return &Redis{rdb: rdb, rate: redis_rate.NewLimiter(rdb), prefix: prefix}
}

// errLimit is a limit the counter cannot represent.
var errLimit = errors.New("quota limit out of range")

func limitOf(limit int64, window time.Duration) (redis_rate.Limit, error) {
	if limit < 1 || limit > 1<<31 || window < time.Second {
		return redis_rate.Limit{}, errLimit
	}
	return redis_rate.Limit{Rate: int(limit), Burst: int(limit), Period: window}, nil
}

// Take implements Counter.
func (r *Redis) Take(ctx context.Context, key string, limit int64, window time.Duration, cost int64) (Taken, error) {
	l, err := limitOf(limit, window)
	if err != nil {
		return Taken{}, err
	}
	res, err := r.rate.AllowN(ctx, r.prefix+key, l, int(cost))
	if err != nil {
		return Taken{}, err
	}
	t := Taken{Allowed: res.Allowed > 0 || cost == 0, Remaining: int64(res.Remaining), ResetAfter: max(res.ResetAfter, 0)}
	if !t.Allowed {
		t.RetryAfter = max(res.RetryAfter, 0)
	}
	return t, nil
}

// Give implements Counter: a negative charge moves the counter back, as
// far as it is ahead of now (redis_rate stores nothing that would be in the
// past).
func (r *Redis) Give(ctx context.Context, key string, limit int64, window time.Duration, cost int64) error {
	l, err := limitOf(limit, window)
	if err != nil {
		return err
	}
	_, err = r.rate.AllowN(ctx, r.prefix+key, l, -int(cost))
	return err
}

// Mark implements Counter.
func (r *Redis) Mark(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return r.rdb.SetNX(ctx, r.prefix+key, 1, ttl).Result()
}

// Unmark implements Counter.
func (r *Redis) Unmark(ctx context.Context, key string) error {
	return r.rdb.Del(ctx, r.prefix+key).Err()
}

// redisStore is the part of redisstore.Store a Redis counter needs.
type redisStore interface {
	Client() redis.UniversalClient
	KeyPrefix() string
}

// ForStore is the counter that shares store: a Redis counter on a Redis
// store's servers (one server, Sentinel or Cluster), taken in leases
// (Leased: one round trip per lease for a busy counter, within a stated
// error), else an in-process one (the memory store serves one replica).
func ForStore(store any) Counter {
	if r, ok := store.(redisStore); ok {
		return NewLeased(NewRedis(r.Client(), r.KeyPrefix()), nil)
	}
	return NewMemory(nil)
}
