package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/capgate/capgate/sidecar/tasks"
)

var _ tasks.Examples = (*Store)(nil)

// examples is the hash of a capability's candidate examples (field: the text,
// value: "<count>:<first seen, unix ms>"); examplesOrder the sorted set of the
// same texts by when they were last seen (unix ms, capgate's clock). Both are
// keyed by the capability as the slot part, so that one script reads and
// writes them in one Cluster slot, and both expire ttl after the last answer.
func (k keys) examples(capability string) string { return k.key("examples", capability) }

func (k keys) examplesOrder(capability string) string { return k.key("examples", capability, "order") }

func (k keys) exampleKeys(capability string) []string {
	return []string{k.examples(capability), k.examplesOrder(capability)}
}

// addExampleScript records one answer. It first drops the texts last seen
// more than ttl ago and, for a new text at max_per_capability, the least
// recently seen. The keys expire ttl after this write, relative (PEXPIRE): no
// instant of capgate's clock is given to Redis as an expiry.
//
// KEYS: examples hash, order (keys.exampleKeys). ARGV: text now_ms ttl_ms max.
var addExampleScript = redis.NewScript(`
local cutoff = tonumber(ARGV[2]) - tonumber(ARGV[3])
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', cutoff, 'LIMIT', 0, 1000)
for _, t in ipairs(gone) do
  redis.call('HDEL', KEYS[1], t)
  redis.call('ZREM', KEYS[2], t)
end
local count, first = 1, ARGV[2]
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  local c, f = string.match(old, '^(%d+):(%d+)$')
  if c then count, first = tonumber(c) + 1, f end
else
  local n = redis.call('ZCARD', KEYS[2])
  local max = tonumber(ARGV[4])
  if n >= max then
    local out = redis.call('ZPOPMIN', KEYS[2], n - max + 1)
    for i = 1, #out, 2 do redis.call('HDEL', KEYS[1], out[i]) end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], count .. ':' .. first)
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 'ok'
`)

// AddExample implements Examples.
func (r *Store) AddExample(ctx context.Context, capability, text string, ttl time.Duration, maxPerCapability int) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	if _, err := r.write(ctx, addExampleScript, r.keys.exampleKeys(capability), text, r.opts.Now().UnixMilli(),
		max(ttl.Milliseconds(), 1), max(maxPerCapability, 1)); err != nil {
		return r.unavailable("add example", err)
	}
	return nil
}

// ExamplesOf implements Examples.
func (r *Store) ExamplesOf(ctx context.Context, capability string, ttl time.Duration) ([]tasks.Example, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	cutoff := r.opts.Now().Add(-ttl).UnixMilli()
	var all *redis.MapStringStringCmd
	var order *redis.ZSliceCmd
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		all = p.HGetAll(ctx, r.keys.examples(capability))
		order = p.ZRangeWithScores(ctx, r.keys.examplesOrder(capability), 0, -1)
		return nil
	}); err != nil {
		return nil, r.unavailable("read examples", err)
	}
	var out []tasks.Example
	for _, z := range order.Val() {
		text, _ := z.Member.(string)
		last := int64(z.Score)
		v, ok := all.Val()[text]
		if !ok || last <= cutoff {
			continue
		}
		count, first, err := parseExample(v)
		if err != nil {
			return nil, fmt.Errorf("%w: a candidate example record is malformed", tasks.ErrUnavailable)
		}
		out = append(out, tasks.Example{Capability: capability, Text: text, Count: count,
			First: time.UnixMilli(first), Last: time.UnixMilli(last)})
	}
	slices.SortFunc(out, func(a, b tasks.Example) int { return strings.Compare(a.Text, b.Text) })
	return out, nil
}

// parseExample reads "<count>:<first ms>".
func parseExample(v string) (int, int64, error) {
	c, f, ok := strings.Cut(v, ":")
	if !ok {
		return 0, 0, fmt.Errorf("no separator")
	}
	count, err := strconv.Atoi(c)
	if err != nil {
		return 0, 0, err
	}
	first, err := strconv.ParseInt(f, 10, 64)
	return count, first, err
}

// DropExamples implements Examples.
func (r *Store) DropExamples(ctx context.Context, capability string, texts []string) error {
	if len(texts) == 0 {
		return nil
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	members := make([]any, len(texts))
	for i, t := range texts {
		members[i] = t
	}
	if _, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, r.keys.examples(capability), texts...)
		p.ZRem(ctx, r.keys.examplesOrder(capability), members...)
		return nil
	}); err != nil {
		return r.unavailable("drop examples", err)
	}
	return nil
}
