package tasks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Defaults of the Redis store.
const (
	DefaultKeyPrefix = "capgate:"
	// DefaultBindingTTL is how long a binding lives after its last Bind: a
	// task idle longer than the usage window is forgotten.
	DefaultBindingTTL = 30 * 24 * time.Hour
	// DefaultRedisTimeout is the dial, read and write timeout unless the URL
	// sets dial_timeout, read_timeout or write_timeout.
	DefaultRedisTimeout = 500 * time.Millisecond
	// DefaultOpTimeout bounds one store operation, retries included, so a
	// caller gets ErrUnavailable instead of hanging when Redis is away.
	DefaultOpTimeout = 2 * time.Second
	// DefaultRedisRetries is go-redis's max_retries unless the URL sets it.
	DefaultRedisRetries = 2
	// usageDays is how long a per-day usage counter is kept (the window plus
	// slack for clocks and time zones).
	usageDays = 32
)

// URL query parameters read by capgate itself (go-redis reads the others).
const (
	ParamKeyPrefix  = "key_prefix"
	ParamBindingTTL = "binding_ttl"
)

// Redis is a Store shared by replicas: bindings are hashes with a TTL,
// each owner's task ids a set, usage per-day counters. Every Redis failure
// is returned as ErrUnavailable.
//
// Keys (prefix "capgate:" by default):
//
//	<prefix>task:<task id>             hash: subject tenant capability handler pending created contextId candidates
//	<prefix>owner:<tenant>:<subject>   set of task ids (components query-escaped)
//	<prefix>usage:<capability>         hash: total last (unix ns, zero-padded)
//	<prefix>usage:<capability>:<day>   calls on that unix day, expires 32 days after it
type Redis struct {
	rdb       *redis.Client
	prefix    string
	ttl       time.Duration
	opTimeout time.Duration
	log       *zap.Logger
}

var (
	_ Store  = (*Redis)(nil)
	_ Owners = (*Redis)(nil)
)

// RedisOption configures the Redis store.
type RedisOption func(*Redis)

// WithKeyPrefix sets the prefix of every key (default DefaultKeyPrefix).
func WithKeyPrefix(p string) RedisOption { return func(r *Redis) { r.prefix = p } }

// WithBindingTTL sets how long a binding lives after its last Bind
// (default DefaultBindingTTL).
func WithBindingTTL(d time.Duration) RedisOption { return func(r *Redis) { r.ttl = d } }

// WithOpTimeout bounds each store operation (default DefaultOpTimeout).
func WithOpTimeout(d time.Duration) RedisOption { return func(r *Redis) { r.opTimeout = d } }

// WithLogger sets the logger (a Redis that is down at start is logged).
func WithLogger(l *zap.Logger) RedisOption { return func(r *Redis) { r.log = l } }

// NewRedis returns a store on rdb. It does not contact Redis.
func NewRedis(rdb *redis.Client, opts ...RedisOption) *Redis {
	r := &Redis{rdb: rdb, prefix: DefaultKeyPrefix, ttl: DefaultBindingTTL, opTimeout: DefaultOpTimeout}
	for _, o := range opts {
		o(r)
	}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	if r.ttl <= 0 {
		r.ttl = DefaultBindingTTL
	}
	if r.opTimeout <= 0 {
		r.opTimeout = DefaultOpTimeout
	}
	return r
}

// OpenRedis connects to the redis:// or rediss:// URL raw and PINGs it. A
// failed PING is logged, not returned: the store is usable as soon as Redis
// answers, and until then its operations fail with ErrUnavailable (capgate
// keeps serving its cards). Only a malformed URL is an error.
//
// Besides go-redis's query parameters (dial_timeout, read_timeout,
// write_timeout, max_retries, pool_size, ...), the URL may carry key_prefix
// and binding_ttl (a Go duration); options given here take precedence.
func OpenRedis(ctx context.Context, raw string, opts ...RedisOption) (*Redis, error) {
	ropt, own, err := parseRedisURL(raw)
	if err != nil {
		return nil, err
	}
	r := NewRedis(redis.NewClient(ropt), append(own, opts...)...)
	pctx, cancel := context.WithTimeout(ctx, r.opTimeout)
	defer cancel()
	if err := r.rdb.Ping(pctx).Err(); err != nil {
		r.log.Warn("task store unreachable at start; task operations fail closed until it answers",
			zap.String("addr", ropt.Addr), zap.Int("db", ropt.DB), zap.Error(err))
	}
	return r, nil
}

// parseRedisURL returns go-redis options (with capgate's timeouts unless the
// URL sets them) and the store options the URL carries.
func parseRedisURL(raw string) (*redis.Options, []RedisOption, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("store %s: malformed URL", redactedStore(raw)) // url.Error would quote the password
	}
	q := u.Query()
	var own []RedisOption
	if q.Has(ParamKeyPrefix) {
		own = append(own, WithKeyPrefix(q.Get(ParamKeyPrefix)))
		q.Del(ParamKeyPrefix)
	}
	if q.Has(ParamBindingTTL) {
		d, err := time.ParseDuration(q.Get(ParamBindingTTL))
		if err != nil || d <= 0 {
			return nil, nil, fmt.Errorf("store: %s=%q is not a positive duration", ParamBindingTTL, q.Get(ParamBindingTTL))
		}
		own = append(own, WithBindingTTL(d))
		q.Del(ParamBindingTTL)
	}
	u.RawQuery = q.Encode()
	ropt, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, nil, fmt.Errorf("store %s: %w", u.Redacted(), err)
	}
	if !q.Has("dial_timeout") {
		ropt.DialTimeout = DefaultRedisTimeout
	}
	if !q.Has("read_timeout") {
		ropt.ReadTimeout = DefaultRedisTimeout
	}
	if !q.Has("write_timeout") {
		ropt.WriteTimeout = DefaultRedisTimeout
	}
	if !q.Has("max_retries") {
		ropt.MaxRetries = DefaultRedisRetries
	}
	ropt.DialerRetries = 1 // fail fast; the command retries above cover a blip
	ropt.ContextTimeoutEnabled = true
	return ropt, own, nil
}

// Close closes the Redis client.
func (r *Redis) Close() error { return r.rdb.Close() }

func (r *Redis) taskKey(id string) string { return r.prefix + "task:" + id }

func (r *Redis) ownerKey(subject, tenant string) string {
	return r.prefix + "owner:" + url.QueryEscape(tenant) + ":" + url.QueryEscape(subject)
}

func (r *Redis) usageKey(capability string) string { return r.prefix + "usage:" + capability }

func (r *Redis) dayKey(capability string, d int64) string {
	return r.usageKey(capability) + ":" + strconv.FormatInt(d, 10)
}

func (r *Redis) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opTimeout)
}

// unavailable wraps a Redis error as ErrUnavailable.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: redis %s: %w", ErrUnavailable, what, err)
}

// bindScript sets a binding unless it would overwrite another one, exactly
// as Memory.Bind decides: an existing binding may be rewritten only by its
// owner, and only to the same capability and handler unless it is pending.
// A created time of "" keeps the stored one. The binding's TTL is renewed
// and the owner's set (renewed too) gains the task id.
//
// KEYS: task, owner set. ARGV: subject tenant capability handler pending
// created contextId candidates ttl_ms taskId.
var bindScript = redis.NewScript(`
local old = redis.call('HMGET', KEYS[1], 'subject', 'tenant', 'capability', 'handler', 'pending')
if old[1] then
  if old[1] ~= ARGV[1] or old[2] ~= ARGV[2] then return 'conflict' end
  if old[5] ~= '1' and (old[3] ~= ARGV[3] or old[4] ~= ARGV[4]) then return 'conflict' end
end
redis.call('HSET', KEYS[1], 'subject', ARGV[1], 'tenant', ARGV[2], 'capability', ARGV[3], 'handler', ARGV[4],
  'pending', ARGV[5], 'contextId', ARGV[7], 'candidates', ARGV[8])
if ARGV[6] ~= '' or not old[1] then redis.call('HSET', KEYS[1], 'created', ARGV[6]) end
redis.call('PEXPIRE', KEYS[1], ARGV[9])
redis.call('SADD', KEYS[2], ARGV[10])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[9]) then redis.call('PEXPIRE', KEYS[2], ARGV[9]) end
return 'ok'
`)

// deleteScript drops a binding and its owner-set entry if the binding still
// belongs to the owner the caller read. KEYS: task, owner set. ARGV:
// subject tenant taskId.
var deleteScript = redis.NewScript(`
local old = redis.call('HMGET', KEYS[1], 'subject', 'tenant')
if not old[1] then return 'gone' end
if old[1] ~= ARGV[1] or old[2] ~= ARGV[2] then return 'moved' end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[3])
return 'ok'
`)

// recordScript counts one call. KEYS: per-day counter, usage hash. ARGV:
// expire-at (unix s), time (zero-padded unix ns, so strings order as times).
var recordScript = redis.NewScript(`
redis.call('INCR', KEYS[1])
redis.call('EXPIREAT', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[2], 'total', 1)
local last = redis.call('HGET', KEYS[2], 'last')
if not last or ARGV[2] > last then redis.call('HSET', KEYS[2], 'last', ARGV[2]) end
return 'ok'
`)

// Bind implements Store.
func (r *Redis) Bind(ctx context.Context, b Binding) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	created := ""
	if !b.CreatedAt.IsZero() {
		created = strconv.FormatInt(b.CreatedAt.UnixNano(), 10)
	}
	pending := "0"
	if b.Pending {
		pending = "1"
	}
	candidates := ""
	if len(b.Candidates) > 0 {
		c, err := json.Marshal(b.Candidates)
		if err != nil {
			return fmt.Errorf("bind %s: %w", b.TaskID, err)
		}
		candidates = string(c)
	}
	res, err := bindScript.Run(ctx, r.rdb, []string{r.taskKey(b.TaskID), r.ownerKey(b.Subject, b.Tenant)},
		b.Subject, b.Tenant, b.Capability, b.Handler, pending, created, b.ContextID, candidates,
		r.ttl.Milliseconds(), b.TaskID).Text()
	if err != nil {
		return unavailable("bind", err)
	}
	if res == "conflict" {
		return ErrConflict
	}
	return nil
}

var bindingFields = []string{"subject", "tenant", "capability", "handler", "pending", "created", "contextId", "candidates"}

// decodeBinding reads the values of bindingFields; ok is false when the
// hash does not exist.
func decodeBinding(taskID string, vals []any) (Binding, bool, error) {
	if len(vals) != len(bindingFields) || vals[0] == nil {
		return Binding{}, false, nil
	}
	s := make([]string, len(vals))
	for i, v := range vals {
		s[i], _ = v.(string)
	}
	b := Binding{TaskID: taskID, Subject: s[0], Tenant: s[1], Capability: s[2], Handler: s[3], Pending: s[4] == "1", ContextID: s[6]}
	if s[5] != "" {
		ns, err := strconv.ParseInt(s[5], 10, 64)
		if err != nil {
			return Binding{}, false, fmt.Errorf("%w: binding %s has a malformed created time", ErrUnavailable, taskID)
		}
		b.CreatedAt = time.Unix(0, ns).UTC()
	}
	if s[7] != "" {
		if err := json.Unmarshal([]byte(s[7]), &b.Candidates); err != nil {
			return Binding{}, false, fmt.Errorf("%w: binding %s has malformed candidates", ErrUnavailable, taskID)
		}
	}
	return b, true, nil
}

// Lookup implements Store.
func (r *Redis) Lookup(ctx context.Context, taskID string) (Binding, bool, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	vals, err := r.rdb.HMGet(ctx, r.taskKey(taskID), bindingFields...).Result()
	if err != nil {
		return Binding{}, false, unavailable("lookup", err)
	}
	return decodeBinding(taskID, vals)
}

// Owned implements Store. Ids of expired bindings are dropped from the
// owner's set on the way.
func (r *Redis) Owned(ctx context.Context, subject, tenant string) ([]Binding, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	okey := r.ownerKey(subject, tenant)
	ids, err := r.rdb.SMembers(ctx, okey).Result()
	if err != nil {
		return nil, unavailable("owned", err)
	}
	slices.Sort(ids)
	cmds := make([]*redis.SliceCmd, len(ids))
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, r.taskKey(id), bindingFields...)
		}
		return nil
	}); err != nil {
		return nil, unavailable("owned", err)
	}
	out := make([]Binding, 0, len(ids))
	var stale []any
	for i, id := range ids {
		b, ok, err := decodeBinding(id, cmds[i].Val())
		if err != nil {
			return nil, err
		}
		if !ok || !(b.Subject == subject && b.Tenant == tenant) {
			stale = append(stale, id)
			continue
		}
		out = append(out, b)
	}
	if len(stale) > 0 {
		// Best effort: a binding bound again meanwhile re-adds its id.
		if err := r.rdb.SRem(ctx, okey, stale...).Err(); err != nil {
			r.log.Debug("stale task ids not removed", zap.Error(err))
		}
	}
	slices.SortStableFunc(out, func(a, b Binding) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.TaskID, b.TaskID)
	})
	return out, nil
}

// Delete implements Store.
func (r *Redis) Delete(ctx context.Context, taskID string) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	key := r.taskKey(taskID)
	for range 3 { // the owner read may race with an expiry and a new Bind
		vals, err := r.rdb.HMGet(ctx, key, "subject", "tenant").Result()
		if err != nil {
			return unavailable("delete", err)
		}
		if vals[0] == nil {
			return nil
		}
		subject, _ := vals[0].(string)
		tenant, _ := vals[1].(string)
		res, err := deleteScript.Run(ctx, r.rdb, []string{key, r.ownerKey(subject, tenant)}, subject, tenant, taskID).Text()
		if err != nil {
			return unavailable("delete", err)
		}
		if res != "moved" {
			return nil
		}
	}
	return unavailable("delete", errors.New("binding changed owner during delete"))
}

// RecordCall implements Store.
func (r *Redis) RecordCall(ctx context.Context, capability string, t time.Time) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	d := day(t)
	ns := max(t.UnixNano(), 0)
	err := recordScript.Run(ctx, r.rdb, []string{r.dayKey(capability, d), r.usageKey(capability)},
		(d+usageDays)*86400, fmt.Sprintf("%020d", ns)).Err()
	if err != nil {
		return unavailable("record call", err)
	}
	return nil
}

// Usage implements Store: calls on the days after now-Window up to now's day.
func (r *Redis) Usage(ctx context.Context, capability string, now time.Time) (Usage, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	out := Usage{Capability: capability}
	from, to := day(now.Add(-Window)), day(now)
	keys := make([]string, 0, to-from)
	for d := from + 1; d <= to; d++ {
		keys = append(keys, r.dayKey(capability, d))
	}
	var hm *redis.SliceCmd
	var days *redis.SliceCmd
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		hm = p.HMGet(ctx, r.usageKey(capability), "total", "last")
		if len(keys) > 0 {
			days = p.MGet(ctx, keys...)
		}
		return nil
	}); err != nil {
		return out, unavailable("usage", err)
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
