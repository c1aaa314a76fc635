package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/capgate/capgate/sidecar/tasks"
)

// sent is the hash of o's Sent records (field: the query-escaped message id, value: the
// record's JSON); sentOrder the sorted set of those ids by reservation time (unix ms, capgate's
// clock). Both are keyed by the owner's slot part, as its task set is, so that one script
// reads and writes them in one Cluster slot; both expire a window after the owner's last
// reservation.
func (k keys) sent(o tasks.Owner) string { return k.key("sent", ownerPath(o)) }

func (k keys) sentOrder(o tasks.Owner) string { return k.key("sent", ownerPath(o), "order") }

// sentKeys are the keys of the message scripts.
func (k keys) sentKeys(o tasks.Owner) []string { return []string{k.sent(o), k.sentOrder(o)} }

// reserveScript reserves a message id for an owner unless a record of it younger than the
// window exists (then it answers {'held', record}); before writing it drops the owner's
// records older than the window and, at max_per_owner, the oldest. The window is compared on
// capgate's clock (the reservation times it wrote); the keys expire a window after the last
// reservation, by Redis's clock, relative (PEXPIRE): no clock is compared with another.
//
// KEYS: sent hash, sent order (keys.sentKeys). ARGV: id record now_ms window_ms max_per_owner
// started_ms (the record's score, by which Release knows it).
var reserveScript = redis.NewScript(`
local cutoff = tonumber(ARGV[3]) - tonumber(ARGV[4])
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  local at = redis.call('ZSCORE', KEYS[2], ARGV[1])
  if at and tonumber(at) > cutoff then return {'held', old} end
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', cutoff, 'LIMIT', 0, 1000)
for _, id in ipairs(gone) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
local n = redis.call('ZCARD', KEYS[2])
local max = tonumber(ARGV[5])
if n >= max then
  local out = redis.call('ZPOPMIN', KEYS[2], n - max + 1)
  for i = 1, #out, 2 do redis.call('HDEL', KEYS[1], out[i]) end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {'new', ARGV[2]}
`)

// settleScript writes a settled record. A record that is gone is written again, for what is
// left of its window (left_ms > 0). KEYS: sent hash, sent order. ARGV: id record started_ms
// left_ms.
var settleScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  if tonumber(ARGV[4]) <= 0 then return 'over' end
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
  for i = 1, 2 do
    if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local t = redis.call('PTTL', KEYS[1])
if t < 0 then redis.call('PEXPIRE', KEYS[1], math.max(tonumber(ARGV[4]), 1)) end
return 'ok'
`)

// releaseScript drops a record reserved at started_ms (its score), not one another call
// reserved. KEYS: sent hash, sent order. ARGV: id started_ms.
var releaseScript = redis.NewScript(`
local at = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not at or tonumber(at) ~= tonumber(ARGV[2]) then return 'kept' end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 'ok'
`)

// Reserve implements Messages: one script, an ownership write (with min_replicas acknowledged
// only once replicas confirmed it, so that a failover does not forget a reservation it
// acknowledged).
func (r *Store) Reserve(ctx context.Context, s tasks.Sent, window time.Duration, maxPerOwner int) (tasks.Sent, bool, error) {
	if s.Owner.Subject == "" {
		return tasks.Sent{}, false, tasks.ErrNoOwner
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	s.Done, s.Lost, s.TaskID, s.ContextID, s.Capability, s.Handler = false, false, "", "", "", ""
	rec, err := json.Marshal(s)
	if err != nil {
		return tasks.Sent{}, false, fmt.Errorf("reserve message: %w", err)
	}
	res, err := r.write(ctx, reserveScript, r.keys.sentKeys(s.Owner), url.QueryEscape(s.MessageID), rec,
		r.opts.Now().UnixMilli(), max(window.Milliseconds(), 1), max(maxPerOwner, 1), s.Started.UnixMilli())
	if err != nil {
		return tasks.Sent{}, false, r.unavailable("reserve message", err)
	}
	vals, err := redis.NewCmdResult(res, nil).StringSlice()
	if err != nil || len(vals) != 2 {
		return tasks.Sent{}, false, r.unavailable("reserve message", fmt.Errorf("unexpected answer %v", res))
	}
	if vals[0] == "new" {
		return s, true, nil
	}
	var old tasks.Sent
	if err := json.Unmarshal([]byte(vals[1]), &old); err != nil {
		return tasks.Sent{}, false, fmt.Errorf("%w: a message record is malformed", tasks.ErrUnavailable)
	}
	old.MessageID, old.Owner = s.MessageID, s.Owner
	return old, false, nil
}

// Settle implements Messages.
func (r *Store) Settle(ctx context.Context, s tasks.Sent, window time.Duration) error {
	if s.Owner.Subject == "" {
		return tasks.ErrNoOwner
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	s.Done = true
	rec, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("settle message: %w", err)
	}
	left := s.Started.Add(window).Sub(r.opts.Now()).Milliseconds()
	if _, err := r.write(ctx, settleScript, r.keys.sentKeys(s.Owner), url.QueryEscape(s.MessageID), rec,
		s.Started.UnixMilli(), left); err != nil {
		return r.unavailable("settle message", err)
	}
	return nil
}

// Release implements Messages.
func (r *Store) Release(ctx context.Context, s tasks.Sent) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	if err := releaseScript.Run(ctx, r.rdb, r.keys.sentKeys(s.Owner), url.QueryEscape(s.MessageID), s.Started.UnixMilli()).Err(); err != nil {
		return r.unavailable("release message", err)
	}
	return nil
}
