package tasks

import (
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
// each owner's task ids a set, each owner's pending task ids a sorted set
// by expiry, usage per-day counters. Every Redis failure is returned as
// ErrUnavailable.
//
// Keys (prefix "capgate:" by default; owner components query-escaped):
//
//	<prefix>task:<task id>                      hash: subject tenant issuer capability handler pending created contextId candidates expires
//	<prefix>owner:<issuer>:<tenant>:<subject>   set of task ids
//	<prefix>owner:<tenant>:<subject>            set of task ids of bindings without an issuer (and of every binding written before issuers were recorded)
//	<prefix>pending:<issuer>:<tenant>:<subject> sorted set of pending task ids, scored by expiry (unix ms)
//	<prefix>usage:<capability>                  hash: total last (unix ns, zero-padded)
//	<prefix>usage:<capability>:<day>            calls on that unix day, expires 32 days after it
//	<prefix>usage-since                         when usage counting began (unix ns), set once
type Redis struct {
	rdb *redis.Client
	options
}

var (
	_ Store  = (*Redis)(nil)
	_ Owners = (*Redis)(nil)
)

// NewRedis returns a store on rdb. It does not contact Redis.
func NewRedis(rdb *redis.Client, opts ...Option) *Redis {
	return &Redis{rdb: rdb, options: newOptions(opts)}
}

// OpenRedis connects to the redis:// or rediss:// URL raw and PINGs it. A
// failed PING is logged, not returned: the store is usable as soon as Redis
// answers, and until then its operations fail with ErrUnavailable (capgate
// keeps serving its cards). Only a malformed URL is an error.
//
// Besides go-redis's query parameters (dial_timeout, read_timeout,
// write_timeout, max_retries, pool_size, ...), the URL may carry key_prefix
// and binding_ttl (a Go duration); options given here take precedence.
func OpenRedis(ctx context.Context, raw string, opts ...Option) (*Redis, error) {
	ropt, own, err := parseRedisURL(raw)
	if err != nil {
		return nil, err
	}
	r := NewRedis(redis.NewClient(ropt), append(own, opts...)...)
	pctx, cancel := context.WithTimeout(ctx, r.opTimeout)
	defer cancel()
	// The first store opened on this Redis marks when usage counting began.
	if err := r.rdb.SetNX(pctx, r.sinceKey(), time.Now().UnixNano(), 0).Err(); err != nil {
		r.log.Warn("task store unreachable at start; task operations fail closed until it answers",
			zap.String("addr", ropt.Addr), zap.Int("db", ropt.DB), zap.Error(err))
	}
	return r, nil
}

// parseRedisURL returns go-redis options (with capgate's timeouts unless the
// URL sets them) and the store options the URL carries.
func parseRedisURL(raw string) (*redis.Options, []Option, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("store %s: malformed URL", redactedStore(raw)) // url.Error would quote the password
	}
	q := u.Query()
	var own []Option
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

// ownerKey is the set of o's task ids. An owner without an issuer keeps the
// key of the bindings written before issuers were recorded; with an issuer
// the key has one component more, so the two never meet, and escaping keeps
// ":" out of every component.
func (r *Redis) ownerKey(o Owner) string {
	if o.Issuer == "" {
		return r.prefix + "owner:" + url.QueryEscape(o.Tenant) + ":" + url.QueryEscape(o.Subject)
	}
	return r.prefix + "owner:" + ownerPath(o)
}

// pendingKey is the sorted set of o's pending task ids.
func (r *Redis) pendingKey(o Owner) string { return r.prefix + "pending:" + ownerPath(o) }

func ownerPath(o Owner) string {
	return url.QueryEscape(o.Issuer) + ":" + url.QueryEscape(o.Tenant) + ":" + url.QueryEscape(o.Subject)
}

func (r *Redis) usageKey(capability string) string { return r.prefix + "usage:" + capability }

func (r *Redis) sinceKey() string { return r.prefix + "usage-since" }

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
// as Memory.bind decides: an unexpired binding may be rewritten only by its
// owner (issuer, subject and tenant; a binding without an issuer field has
// issuer ""), and only to the same capability and handler unless it is
// pending. A created time of "" keeps the stored one. The owner's set gains
// the task id and its TTL is renewed to at least owner_ttl_ms.
//
// Without an expiry (Bind) the binding lives binding_ttl_ms and leaves the
// owner's pending set. With one (BindPending) the owner's pending set first
// loses its expired ids; if it holds max_pending others the answer is
// 'full' and nothing is written; otherwise the binding and its pending-set
// entry expire at the expiry.
//
// KEYS: task, owner set, pending set. ARGV: subject tenant issuer capability
// handler pending created contextId candidates taskId now_ms binding_ttl_ms
// owner_ttl_ms expires_ms (empty for Bind) max_pending held heldVersion
// (the first message of a pending binding; empty for others).
var bindScript = redis.NewScript(`
local old = redis.call('HMGET', KEYS[1], 'subject', 'tenant', 'issuer', 'capability', 'handler', 'pending', 'expires')
local exists = old[1]
if exists and old[7] and old[7] ~= '' and tonumber(old[7]) <= tonumber(ARGV[11]) then
  redis.call('DEL', KEYS[1])
  exists = false
end
if exists then
  if old[1] ~= ARGV[1] or old[2] ~= ARGV[2] or (old[3] or '') ~= ARGV[3] then return 'conflict' end
  if old[6] ~= '1' and (old[4] ~= ARGV[4] or old[5] ~= ARGV[5]) then return 'conflict' end
end
if ARGV[14] ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[11])
  if not redis.call('ZSCORE', KEYS[3], ARGV[10]) and redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[15]) then return 'full' end
end
redis.call('HSET', KEYS[1], 'subject', ARGV[1], 'tenant', ARGV[2], 'issuer', ARGV[3], 'capability', ARGV[4], 'handler', ARGV[5],
  'pending', ARGV[6], 'contextId', ARGV[8], 'candidates', ARGV[9])
if ARGV[16] ~= '' then
  redis.call('HSET', KEYS[1], 'held', ARGV[16], 'heldVersion', ARGV[17])
else
  redis.call('HDEL', KEYS[1], 'held', 'heldVersion')
end
if ARGV[7] ~= '' or not exists then redis.call('HSET', KEYS[1], 'created', ARGV[7]) end
if ARGV[14] == '' then
  redis.call('HDEL', KEYS[1], 'expires')
  redis.call('PEXPIRE', KEYS[1], ARGV[12])
  redis.call('ZREM', KEYS[3], ARGV[10])
else
  redis.call('HSET', KEYS[1], 'expires', ARGV[14])
  redis.call('PEXPIREAT', KEYS[1], ARGV[14])
  redis.call('ZADD', KEYS[3], ARGV[14], ARGV[10])
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[3], last[2])
end
redis.call('SADD', KEYS[2], ARGV[10])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[13]) then redis.call('PEXPIRE', KEYS[2], ARGV[13]) end
return 'ok'
`)

// deleteScript drops a binding and its owner-set and pending-set entries if
// the binding still belongs to the owner the caller read. KEYS: task, owner
// set, pending set. ARGV: subject tenant issuer taskId.
var deleteScript = redis.NewScript(`
local old = redis.call('HMGET', KEYS[1], 'subject', 'tenant', 'issuer')
if not old[1] then return 'gone' end
if old[1] ~= ARGV[1] or old[2] ~= ARGV[2] or (old[3] or '') ~= ARGV[3] then return 'moved' end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[4])
redis.call('ZREM', KEYS[3], ARGV[4])
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
	return r.bind(ctx, b, time.Time{}, 0)
}

// BindPending implements Store.
func (r *Redis) BindPending(ctx context.Context, b Binding, ttl time.Duration, maxPerOwner int) error {
	if !b.Pending || ttl <= 0 {
		return errNotPending
	}
	if b.Subject == "" || maxPerOwner <= 0 {
		return ErrTooManyPending
	}
	return r.bind(ctx, b, expiry(r.now(), ttl), maxPerOwner)
}

// bind runs bindScript: without an expiry as Bind, with one as BindPending.
func (r *Redis) bind(ctx context.Context, b Binding, expires time.Time, maxPending int) error {
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
	now := r.now()
	ownerTTL := r.ttl
	exp := ""
	if !expires.IsZero() {
		exp = strconv.FormatInt(expires.UnixMilli(), 10)
		ownerTTL = max(ownerTTL, expires.Sub(now))
	}
	held, heldVersion := "", ""
	if b.Pending {
		held, heldVersion = string(b.Held), b.HeldVersion
	}
	o := b.Owner()
	res, err := bindScript.Run(ctx, r.rdb, []string{r.taskKey(b.TaskID), r.ownerKey(o), r.pendingKey(o)},
		b.Subject, b.Tenant, b.Issuer, b.Capability, b.Handler, pending, created, b.ContextID, candidates,
		b.TaskID, now.UnixMilli(), r.ttl.Milliseconds(), ownerTTL.Milliseconds(), exp, maxPending, held, heldVersion).Text()
	if err != nil {
		return unavailable("bind", err)
	}
	switch res {
	case "conflict":
		return ErrConflict
	case "full":
		return ErrTooManyPending
	}
	return nil
}

var bindingFields = []string{"subject", "tenant", "capability", "handler", "pending", "created", "contextId", "candidates", "issuer", "expires", "held", "heldVersion"}

// decodeBinding reads the values of bindingFields; ok is false when the
// hash does not exist. A binding written before issuers were recorded has
// no issuer field: its Issuer is "".
func decodeBinding(taskID string, vals []any) (Binding, bool, error) {
	if len(vals) != len(bindingFields) || vals[0] == nil {
		return Binding{}, false, nil
	}
	s := make([]string, len(vals))
	for i, v := range vals {
		s[i], _ = v.(string)
	}
	b := Binding{TaskID: taskID, Subject: s[0], Tenant: s[1], Capability: s[2], Handler: s[3], Pending: s[4] == "1", ContextID: s[6], Issuer: s[8]}
	if b.Pending && s[10] != "" {
		b.Held, b.HeldVersion = []byte(s[10]), s[11]
	}
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
	if s[9] != "" {
		ms, err := strconv.ParseInt(s[9], 10, 64)
		if err != nil {
			return Binding{}, false, fmt.Errorf("%w: binding %s has a malformed expiry", ErrUnavailable, taskID)
		}
		b.ExpiresAt = time.UnixMilli(ms).UTC()
	}
	return b, true, nil
}

// Lookup implements Store. A binding past its expiry by this store's clock
// is not found (Redis drops the key by its own clock).
func (r *Redis) Lookup(ctx context.Context, taskID string) (Binding, bool, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	vals, err := r.rdb.HMGet(ctx, r.taskKey(taskID), bindingFields...).Result()
	if err != nil {
		return Binding{}, false, unavailable("lookup", err)
	}
	b, ok, err := decodeBinding(taskID, vals)
	if err != nil || !ok || b.expired(r.now()) {
		return Binding{}, false, err
	}
	return b, true, nil
}

// Owned implements Store. It reads o's set and, with o.Legacy, the set of
// bindings without an issuer; ids of expired bindings, and of bindings that
// no longer belong to the set's owner, are dropped from the sets on the way.
func (r *Redis) Owned(ctx context.Context, o Owner) ([]Binding, error) {
	if o.Subject == "" {
		return nil, nil
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	owners := []Owner{{Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant}}
	if o.Legacy && o.Issuer != "" {
		owners = append(owners, Owner{Subject: o.Subject, Tenant: o.Tenant})
	}
	sets := make([]*redis.StringSliceCmd, len(owners))
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, so := range owners {
			sets[i] = p.SMembers(ctx, r.ownerKey(so))
		}
		return nil
	}); err != nil {
		return nil, unavailable("owned", err)
	}
	type member struct {
		owner Owner
		id    string
	}
	var members []member
	for i, so := range owners {
		ids := sets[i].Val()
		slices.Sort(ids)
		for _, id := range ids {
			members = append(members, member{so, id})
		}
	}
	cmds := make([]*redis.SliceCmd, len(members))
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range members {
			cmds[i] = p.HMGet(ctx, r.taskKey(m.id), bindingFields...)
		}
		return nil
	}); err != nil {
		return nil, unavailable("owned", err)
	}
	now := r.now()
	out := make([]Binding, 0, len(members))
	stale := map[Owner][]any{}
	for i, m := range members {
		b, ok, err := decodeBinding(m.id, cmds[i].Val())
		if err != nil {
			return nil, err
		}
		if !ok || b.Owner() != m.owner || b.expired(now) {
			stale[m.owner] = append(stale[m.owner], m.id)
			continue
		}
		out = append(out, b)
	}
	for so, ids := range stale {
		// Best effort: a binding bound again meanwhile re-adds its id.
		if err := r.rdb.SRem(ctx, r.ownerKey(so), ids...).Err(); err != nil {
			r.log.Debug("stale task ids not removed", zap.Error(err))
		}
	}
	sortNewestFirst(out)
	return out, nil
}

// Delete implements Store.
func (r *Redis) Delete(ctx context.Context, taskID string) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	key := r.taskKey(taskID)
	for range 3 { // the owner read may race with an expiry and a new Bind
		vals, err := r.rdb.HMGet(ctx, key, "subject", "tenant", "issuer").Result()
		if err != nil {
			return unavailable("delete", err)
		}
		if vals[0] == nil {
			return nil
		}
		var o Owner
		o.Subject, _ = vals[0].(string)
		o.Tenant, _ = vals[1].(string)
		o.Issuer, _ = vals[2].(string)
		res, err := deleteScript.Run(ctx, r.rdb, []string{key, r.ownerKey(o), r.pendingKey(o)}, o.Subject, o.Tenant, o.Issuer, taskID).Text()
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
	var since *redis.StringCmd
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		since = p.Get(ctx, r.sinceKey())
		hm = p.HMGet(ctx, r.usageKey(capability), "total", "last")
		if len(keys) > 0 {
			days = p.MGet(ctx, keys...)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return out, unavailable("usage", err)
	}
	if err := hm.Err(); err != nil {
		return out, unavailable("usage", err)
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
