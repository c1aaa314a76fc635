package redisstore

// This file holds the Redis store's usage counters: RecordCall, Usage and their script.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/capgate/capgate/sidecar/tasks"
)

// usageTTL is how long the per-day counter of a call at t lives from t: to
// the end of the usageDays-th day after t's. It is relative (PEXPIRE), never
// an instant (EXPIREAT), so that Redis, which expires keys by its own clock,
// keeps a counter as long whatever the skew between its clock and capgate's.
func usageTTL(t time.Time) time.Duration {
	return time.UnixMilli((tasks.Day(t) + usageDays) * 86400 * 1000).Sub(time.UnixMilli(t.UnixMilli()))
}

// recordScript counts one call. KEYS: per-day counter, usage hash. ARGV:
// the counter's time to live (ms, from the call's time), time (zero-padded
// unix ns, so strings order as times).
var recordScript = redis.NewScript(recordLua)

const recordLua = `
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[2], 'total', 1)
local last = redis.call('HGET', KEYS[2], 'last')
if not last or ARGV[2] > last then redis.call('HSET', KEYS[2], 'last', ARGV[2]) end
return 'ok'
`

// RecordCall implements Store.
func (r *Store) RecordCall(ctx context.Context, capability string, t time.Time) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	keys, args := r.recordArgs(capability, t)
	if err := recordScript.Run(ctx, r.rdb, keys.names, args[:]...).Err(); err != nil {
		return r.unavailable("record call", err)
	}
	return nil
}

// recordArgs are recordScript's keys and arguments for a call of capability at t.
func (r *Store) recordArgs(capability string, t time.Time) (scriptKeys, [2]any) {
	return r.usageKeys.of(capabilityDay{capability, tasks.Day(t)}), [2]any{usageTTL(t).Milliseconds(), padded(max(t.UnixNano(), 0))}
}

// padded is fmt.Sprintf("%020d", n) for n >= 0 (TestPadded), without its boxing of n: the time
// of a call as recordScript compares it, as a string.
func padded(n int64) string {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], n, 10)
	out := [20]byte{'0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0'}
	copy(out[max(len(out)-len(d), 0):], d)
	return string(out[:])
}

// Usage implements Store: calls on the days after now-Window up to now's day.
func (r *Store) Usage(ctx context.Context, capability string, now time.Time) (tasks.Usage, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	out := tasks.Usage{Capability: capability}
	from, to := tasks.Day(now.Add(-tasks.Window)), tasks.Day(now)
	keys := make([]string, 0, to-from)
	for d := from + 1; d <= to; d++ {
		keys = append(keys, r.keys.day(capability, d))
	}
	var hm *redis.SliceCmd
	var days *redis.SliceCmd
	var since *redis.StringCmd
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		since = p.Get(ctx, r.keys.since())
		hm = p.HMGet(ctx, r.keys.usage(capability), "total", "last")
		if len(keys) > 0 {
			days = p.MGet(ctx, keys...)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return out, r.unavailable("usage", err)
	}
	if err := hm.Err(); err != nil {
		return out, r.unavailable("usage", err)
	}
	if ns, err := since.Int64(); err == nil && ns > 0 {
		out.ObservedSince = time.Unix(0, ns).UTC()
	}
	v := hm.Val()
	if s, ok := v[0].(string); ok {
		out.Total, _ = strconv.ParseInt(s, 10, 64)
	}
	if s, ok := v[1].(string); ok {
		if ns, err := strconv.ParseInt(strings.TrimLeft(s, "0"), 10, 64); err == nil && ns > 0 {
			out.LastUsed = time.Unix(0, ns).UTC()
		}
	}
	if days != nil {
		for _, c := range days.Val() {
			if s, ok := c.(string); ok {
				n, _ := strconv.ParseInt(s, 10, 64)
				out.Calls30d += n
			}
		}
	}
	return out, nil
}
