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

// usageTTL is how long the per-day counter of a call at t lives from t: to
// the end of the usageDays-th day after t's. It is relative (PEXPIRE), never
// an instant (EXPIREAT), so that Redis, which expires keys by its own clock,
// keeps a counter as long whatever the skew between its clock and capgate's.
func usageTTL(t time.Time) time.Duration {
	return time.UnixMilli((day(t) + usageDays) * 86400 * 1000).Sub(time.UnixMilli(t.UnixMilli()))
}

// Redis is a Store shared by replicas: bindings are hashes with a TTL,
// each owner's task ids a set, each owner's pending task ids a sorted set
// by expiry, usage per-day counters. Every Redis failure is returned as
// ErrUnavailable. It runs on one Redis server, a Sentinel set or a Cluster
// (go-redis's UniversalClient); see keys for the key layout and why no
// script or transaction crosses a Cluster slot.
//
// An ownership write runs in two steps, each a script on the keys of one
// slot: first the owner's sets (task id added; pending cap checked and the
// id reserved), then the task's binding (conflict checked, written). So a
// binding is never written without its owner's set listing it; a failure
// or conflict after the first step leaves at most an id in the owner's set
// that Owned drops (it checks every binding's owner) and, for BindPending,
// a reservation that counts toward the owner's cap until its expiry.
//
// Keys (prefix "capgate:" by default; owner components query-escaped; in a
// Cluster the part after the kind is a hash tag, see keys):
//
//	<prefix>task:<task id>                      hash: subject tenant issuer capability handler pending created contextId candidates expires
//	<prefix>context:<context id>                hash: subject tenant issuer created
//	<prefix>owner:<issuer>:<tenant>:<subject>   set of task ids
//	<prefix>owner:<tenant>:<subject>            set of task ids of bindings without an issuer (and of every binding written before issuers were recorded)
//	<prefix>pending:<issuer>:<tenant>:<subject> sorted set of pending task ids, scored by expiry (unix ms)
//	<prefix>usage:<capability>                  hash: total last (unix ns, zero-padded)
//	<prefix>usage:<capability>:<day>            calls on that unix day, expires 32 days after it
//	<prefix>usage-since                         when usage counting began (unix ns), set once
type Redis struct {
	rdb      redis.UniversalClient
	keys     keys
	contexts *contextCache
	health   *health // whether Redis answers (health.go)
	options
}

var (
	_ Store  = (*Redis)(nil)
	_ Owners = (*Redis)(nil)
)

// NewRedis returns a store on rdb (a *redis.Client, a failover client or a
// *redis.ClusterClient, whose keys get hash tags). It does not contact
// Redis.
func NewRedis(rdb redis.UniversalClient, opts ...Option) *Redis {
	o := newOptions(opts)
	_, cluster := rdb.(*redis.ClusterClient)
	r := &Redis{rdb: rdb, options: o, keys: keys{prefix: o.prefix, tagged: cluster}, contexts: newContextCache(o.contextCacheAge), health: newHealth(o)}
	watchHealth(rdb, r.health)
	return r
}

// OpenRedis connects to the Redis store URL raw (see Open; parseStoreURL
// for the forms) and writes the usage-since mark. A failed write is logged,
// not returned: the store is usable as soon as Redis answers, and until
// then its operations fail with ErrUnavailable (capgate keeps serving its
// cards). Only a malformed URL is an error.
//
// Besides go-redis's query parameters (dial_timeout, read_timeout,
// write_timeout, max_retries, pool_size, ...), the URL may carry key_prefix,
// binding_ttl (a Go duration), min_replicas and replica_timeout; options
// given here take precedence.
func OpenRedis(ctx context.Context, raw string, opts ...Option) (*Redis, error) {
	su, err := parseStoreURL(raw)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	opts = append(su.own, opts...)
	o := newOptions(opts)
	if o.password != "" {
		su.setPassword(o.password)
	}
	if o.sentinelPassword != "" {
		if su.mode != modeSentinel {
			return nil, fmt.Errorf("store: %s: a Sentinel password, but the store is not %s:// or %s://", su.display, SchemeSentinel, SchemeSentinelTLS)
		}
		su.failover.SentinelPassword = o.sentinelPassword
	}
	r := NewRedis(su.client(), opts...)
	r.logStart(su)
	pctx, cancel := context.WithTimeout(ctx, r.opTimeout)
	defer cancel()
	// The first store opened on this Redis marks when usage counting began.
	if err := r.rdb.SetNX(pctx, r.keys.since(), r.now().UnixNano(), 0).Err(); err != nil {
		r.log.Warn("task store unreachable at start; task operations fail closed until it answers",
			zap.String("store", su.display), zap.Error(err))
	}
	r.checkReplicas(pctx, su.mode)
	return r, nil
}

// Close closes the Redis client.
func (r *Redis) Close() error { return r.rdb.Close() }

// keys builds every Redis key, <prefix><kind>:<slot part>[:<rest>…].
// Each operation's script or transaction touches keys of one slot part
// only: a task's binding (its id), an owner's task set and pending set (the
// owner), a capability's usage hash and day counters (the capability). In a
// Cluster the slot part is a hash tag, {…}, so those keys share a slot;
// elsewhere it is written bare, the layout of a single Redis, so a store
// moved from one Redis to a Sentinel set keeps its keys. Owner components
// are query-escaped ({, } and : included), so no owner key holds a brace of
// its own; task ids and capabilities are written as they are, and a brace
// in one ends or starts the tag at the same place in every key of the
// operation. The Cluster URL refuses a prefix with a brace.
//
// A record kept per id and owned like a task (a context, say) gets a kind
// of its own with the id as slot part, and lists its ids in a set keyed by
// the owner's slot part, as task and owner do.
type keys struct {
	prefix string
	tagged bool
}

// key is <prefix><kind>:<slot>[:<rest>…], with slot tagged in a Cluster.
func (k keys) key(kind, slot string, rest ...string) string {
	var b strings.Builder
	b.WriteString(k.prefix)
	b.WriteString(kind)
	b.WriteByte(':')
	if k.tagged {
		b.WriteByte('{')
		b.WriteString(tag(slot))
		b.WriteByte('}')
	} else {
		b.WriteString(slot)
	}
	for _, r := range rest {
		b.WriteByte(':')
		b.WriteString(r)
	}
	return b.String()
}

// tagEscaper keeps braces out of a hash tag (a } would end it early, and
// the text between would not be the whole slot part).
var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// tag is the content of the hash tag of slot part s: s with %, { and }
// escaped, or "%" for an empty s (an empty tag, {}, is no tag to Redis,
// which would then hash the whole key). No escaped part is "%" alone.
func tag(s string) string {
	if s == "" {
		return "%"
	}
	return tagEscaper.Replace(s)
}

// task is a binding's hash.
func (k keys) task(id string) string { return k.key("task", id) }

// context is the hash of a context's owner; its slot part is the id.
func (k keys) context(id string) string { return k.key("context", id) }

// owner is the set of o's task ids. An owner without an issuer keeps, on a
// single Redis, the key of the bindings written before issuers were
// recorded; with an issuer the key has one component more, so the two
// never meet. In a Cluster every owner key is the owner's full path, the
// slot part it shares with its pending set.
func (k keys) owner(o Owner) string {
	if o.Issuer == "" && !k.tagged {
		return k.key("owner", url.QueryEscape(o.Tenant)+":"+url.QueryEscape(o.Subject))
	}
	return k.key("owner", ownerPath(o))
}

// pending is the sorted set of o's pending task ids.
func (k keys) pending(o Owner) string { return k.key("pending", ownerPath(o)) }

// index is o's ordered index of task ids: a sorted set whose members, all
// scored 0, are <Position.key>:<task id>, so that ZRANGE BYLEX reads them in
// list order.
func (k keys) index(o Owner) string { return k.key("index", ownerPath(o)) }

// contextIndex is o's ordered index of the task ids in one context.
func (k keys) contextIndex(o Owner, contextID string) string {
	return k.key("index", ownerPath(o), "context", url.QueryEscape(contextID))
}

// unindexed marks an owner whose set holds ids written before the index
// existed (an upgraded store): the next read builds the index from the set.
// It holds the SSCAN cursor the build has reached.
func (k keys) unindexed(o Owner) string { return k.key("index", ownerPath(o), "unbuilt") }

// ownerSets are the keys of the owner step of a bind and a delete: the
// owner's set, pending set, index, the index of the task's context (the
// index again for a task without one) and the unindexed mark.
func (k keys) ownerSets(o Owner, contextID string) []string {
	ci := k.index(o)
	if contextID != "" {
		ci = k.contextIndex(o, contextID)
	}
	return []string{k.owner(o), k.pending(o), k.index(o), ci, k.unindexed(o)}
}

// member is a task's entry in its owner's indexes.
func member(taskID string, created time.Time) string {
	return PositionOf(Binding{TaskID: taskID, CreatedAt: created}).key() + ":" + taskID
}

// storedCreated is created as the binding's hash keeps it (unix ns; "" for
// the zero time) and as decodeBinding reads it back.
func storedCreated(created time.Time) (string, time.Time) {
	if created.IsZero() {
		return "", time.Time{}
	}
	ns := created.UnixNano()
	return strconv.FormatInt(ns, 10), time.Unix(0, ns).UTC()
}

func ownerPath(o Owner) string {
	return url.QueryEscape(o.Issuer) + ":" + url.QueryEscape(o.Tenant) + ":" + url.QueryEscape(o.Subject)
}

// usage is a capability's hash of total and last call.
func (k keys) usage(capability string) string { return k.key("usage", capability) }

// day is a capability's counter of one unix day.
func (k keys) day(capability string, d int64) string {
	return k.key("usage", capability, strconv.FormatInt(d, 10))
}

// usageKeys are the keys of RecordCall's script.
func (k keys) usageKeys(capability string, d int64) []string {
	return []string{k.day(capability, d), k.usage(capability)}
}

// since is when usage counting began.
func (k keys) since() string { return k.prefix + "usage-since" }

func (r *Redis) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opTimeout)
}

// unavailable wraps a Redis error as ErrUnavailable.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: redis %s: %w", ErrUnavailable, what, err)
}

// ownerScript is the owner step of a bind (see Redis): the owner's set
// gains the task id, the owner's index and the index of the task's context
// gain its member, and their TTLs are renewed to at least owner_ttl_ms. An
// owner set that exists without an index was written before the index
// existed: the unindexed mark makes the next read build the index.
// Without an expiry (Bind) the id leaves the owner's pending set. With one
// (BindPending) the pending set first loses its expired ids; if it holds
// max_pending others the answer is 'full' and nothing is written;
// otherwise the id is entered at its expiry and the set expires with its
// last entry.
//
// KEYS: owner set, pending set, index, context index, unindexed mark
// (keys.ownerSets). ARGV: taskId now_ms owner_ttl_ms expires_ms (empty for
// Bind) max_pending member has_context ('1' or '0').
var ownerScript = redis.NewScript(`
if ARGV[4] ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
  if not redis.call('ZSCORE', KEYS[2], ARGV[1]) and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return 'full' end
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', KEYS[2], math.max(1, tonumber(last[2]) - tonumber(ARGV[2])))
else
  redis.call('ZREM', KEYS[2], ARGV[1])
end
if redis.call('EXISTS', KEYS[3]) == 0 and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('SET', KEYS[5], '0', 'PX', ARGV[3], 'NX')
end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[3], 0, ARGV[6])
if ARGV[7] == '1' then redis.call('ZADD', KEYS[4], 0, ARGV[6]) end
for i = 1, 4 do
  if (i ~= 2) and (i ~= 4 or ARGV[7] == '1') and redis.call('PTTL', KEYS[i]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
end
return 'ok'
`)

// bindScript is the task step of a bind: it sets the binding unless it
// would overwrite another one, exactly as Memory.bind decides: an unexpired
// binding may be rewritten only by its owner (issuer, subject and tenant; a
// binding without an issuer field has issuer ""), and only to the same
// capability and handler unless it is pending. A created time of "" keeps
// the stored one. Without an expiry (Bind) the binding lives
// binding_ttl_ms; with one (BindPending) it expires then.
//
// KEYS: task. ARGV: subject tenant issuer capability handler pending
// created contextId candidates now_ms binding_ttl_ms expires_ms (empty for
// Bind) held heldVersion (the first message of a pending binding; empty
// for others). The answer is 'conflict', or {'ok', created, contextId,
// '1'} of the binding overwritten ({'ok', ”, ”, ”} when there was none),
// so that the
// caller moves the task's index member.
var bindScript = redis.NewScript(`
local old = redis.call('HMGET', KEYS[1], 'subject', 'tenant', 'issuer', 'capability', 'handler', 'pending', 'expires', 'created', 'contextId')
local exists = old[1]
if exists and old[7] and old[7] ~= '' and tonumber(old[7]) <= tonumber(ARGV[10]) then
  redis.call('DEL', KEYS[1])
  exists = false
end
if exists then
  if old[1] ~= ARGV[1] or old[2] ~= ARGV[2] or (old[3] or '') ~= ARGV[3] then return 'conflict' end
  if old[6] ~= '1' and (old[4] ~= ARGV[4] or old[5] ~= ARGV[5]) then return 'conflict' end
end
redis.call('HSET', KEYS[1], 'subject', ARGV[1], 'tenant', ARGV[2], 'issuer', ARGV[3], 'capability', ARGV[4], 'handler', ARGV[5],
  'pending', ARGV[6], 'contextId', ARGV[8], 'candidates', ARGV[9])
if ARGV[13] ~= '' then
  redis.call('HSET', KEYS[1], 'held', ARGV[13], 'heldVersion', ARGV[14])
else
  redis.call('HDEL', KEYS[1], 'held', 'heldVersion')
end
if ARGV[7] ~= '' or not exists then redis.call('HSET', KEYS[1], 'created', ARGV[7]) end
if ARGV[12] == '' then
  redis.call('HDEL', KEYS[1], 'expires')
  redis.call('PEXPIRE', KEYS[1], ARGV[11])
else
  redis.call('HSET', KEYS[1], 'expires', ARGV[12])
  redis.call('PEXPIRE', KEYS[1], math.max(1, tonumber(ARGV[12]) - tonumber(ARGV[10])))
end
if exists then return {'ok', old[8] or '', old[9] or '', '1'} end
return {'ok', '', '', ''}
`)

// deleteScript is the task step of a delete: it drops the binding and
// answers its owner (subject tenant issuer), created and contextId, or
// nothing when there is no binding. KEYS: task.
var deleteScript = redis.NewScript(`
local old = redis.call('HMGET', KEYS[1], 'subject', 'tenant', 'issuer', 'created', 'contextId')
if not old[1] then return {} end
redis.call('DEL', KEYS[1])
return {old[1], old[2] or '', old[3] or '', old[4] or '', old[5] or ''}
`)

// ownerDeleteScript is the owner step of a delete. KEYS: owner set,
// pending set, index, context index (keys.ownerSets). ARGV: taskId member.
var ownerDeleteScript = redis.NewScript(`
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[2])
return 'ok'
`)

// write runs an ownership script on keys (of one slot) and, with
// min_replicas, waits on the connection that wrote until that many
// replicas confirmed it (WAIT may not run inside a script). Fewer
// confirmations in time fail the write: it was applied on the master but is
// not acknowledged.
func (r *Redis) write(ctx context.Context, s *redis.Script, keys []string, args ...any) (any, error) {
	if r.minReplicas == 0 {
		return s.Run(ctx, r.rdb, keys, args...).Result()
	}
	// One connection: the master of the keys' slot in a Cluster (WAIT has
	// no key to route by), the master itself otherwise.
	var conn interface {
		Pipelined(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error)
	} = r.rdb
	cc, cluster := r.rdb.(*redis.ClusterClient)
	if cluster {
		m, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		conn = m
	}
	res, err := r.writeWait(ctx, conn, s.EvalSha, keys, args)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		res, err = r.writeWait(ctx, conn, s.Eval, keys, args)
	}
	if err != nil && cluster && !errors.Is(err, errNotReplicated) {
		// The slot may have moved (failover, resharding): refresh the map.
		cc.ReloadState(ctx)
	}
	return res, err
}

type evalFunc func(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd

func (r *Redis) writeWait(ctx context.Context, conn interface {
	Pipelined(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error)
}, eval evalFunc, keys []string, args []any) (any, error) {
	var cmd *redis.Cmd
	var wait *redis.IntCmd
	_, perr := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmd = eval(ctx, p, keys, args...)
		// go-redis's Wait (not in the Pipeliner interface) reads for as
		// long as WAIT may block.
		wait = p.(interface {
			Wait(context.Context, int, time.Duration) *redis.IntCmd
		}).Wait(ctx, r.minReplicas, r.replicaTimeout)
		return nil
	})
	res, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	n, err := wait.Result()
	if err != nil {
		return nil, err
	}
	if perr != nil {
		// No connection (e.g. a Sentinel refused the credentials): the
		// commands were never sent and carry no error of their own.
		return nil, perr
	}
	if n < int64(r.minReplicas) {
		return nil, fmt.Errorf("%w (%d of %d)", errNotReplicated, n, r.minReplicas)
	}
	return res, nil
}

// claimContextScript makes an owner the holder of a context unless another
// owner holds it, and returns the holder and the record's time to live:
// subject, tenant, issuer, created, pttl (ms, as a string). The holder's
// own claim renews the key to binding_ttl_ms. KEYS: context. ARGV: subject
// tenant issuer created binding_ttl_ms.
var claimContextScript = redis.NewScript(`
local old = redis.call('HMGET', KEYS[1], 'subject', 'tenant', 'issuer', 'created')
if old[1] then
  if old[1] == ARGV[1] and old[2] == ARGV[2] and (old[3] or '') == ARGV[3] then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
  return {old[1], old[2] or '', old[3] or '', old[4] or '', tostring(redis.call('PTTL', KEYS[1]))}
end
redis.call('HSET', KEYS[1], 'subject', ARGV[1], 'tenant', ARGV[2], 'issuer', ARGV[3], 'created', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]}
`)

// recordScript counts one call. KEYS: per-day counter, usage hash. ARGV:
// the counter's time to live (ms, from the call's time), time (zero-padded
// unix ns, so strings order as times).
var recordScript = redis.NewScript(`
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
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
	created, createdAt := storedCreated(b.CreatedAt)
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
	written := member(b.TaskID, createdAt)
	hasContext := "0"
	if b.ContextID != "" {
		hasContext = "1"
	}
	res, err := r.write(ctx, ownerScript, r.keys.ownerSets(o, b.ContextID), b.TaskID, now.UnixMilli(), ownerTTL.Milliseconds(), exp, maxPending,
		written, hasContext)
	if err != nil {
		return r.unavailable("bind", err)
	}
	if res == "full" {
		// A conflict is the answer when both hold, as in Memory.
		if old, ok, err := r.Lookup(ctx, b.TaskID); err == nil && ok && conflicts(old, b) {
			return ErrConflict
		}
		return ErrTooManyPending
	}
	res, err = r.write(ctx, bindScript, []string{r.keys.task(b.TaskID)},
		b.Subject, b.Tenant, b.Issuer, b.Capability, b.Handler, pending, created, b.ContextID, candidates,
		now.UnixMilli(), r.ttl.Milliseconds(), exp, held, heldVersion)
	if err != nil {
		return r.unavailable("bind", err)
	}
	if res == "conflict" {
		return ErrConflict
	}
	r.reindex(ctx, b, written, res)
	return nil
}

// reindex moves a re-bound task's index member to where the binding now
// is: a created time of "" kept the old one, and a new created time or
// context leaves the old member behind. res is bindScript's answer. Best
// effort: a member left behind is dropped by the read that finds it
// (OwnedPage checks every member against its binding).
func (r *Redis) reindex(ctx context.Context, b Binding, written string, res any) {
	old, _ := res.([]any)
	if len(old) != 4 || old[3] != "1" {
		return // no binding was overwritten
	}
	oldCreated, _ := old[1].(string)
	oldContext, _ := old[2].(string)
	oldAt := parseCreated(oldCreated)
	now := written
	if b.CreatedAt.IsZero() {
		now = member(b.TaskID, oldAt) // the stored created time was kept
	}
	stale := member(b.TaskID, oldAt)
	o := b.Owner()
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if now != written {
			p.ZAdd(ctx, r.keys.index(o), redis.Z{Member: now})
			p.ZRem(ctx, r.keys.index(o), written)
			if b.ContextID != "" {
				p.ZAdd(ctx, r.keys.contextIndex(o, b.ContextID), redis.Z{Member: now})
				p.ZRem(ctx, r.keys.contextIndex(o, b.ContextID), written)
			}
		}
		if stale != now {
			p.ZRem(ctx, r.keys.index(o), stale)
		}
		if oldContext != "" && (stale != now || oldContext != b.ContextID) {
			p.ZRem(ctx, r.keys.contextIndex(o, oldContext), stale)
		}
		return nil
	}); err != nil {
		r.log.Debug("task index not moved", zap.Error(err))
	}
}

// parseCreated reads a binding's stored created time ("" or garbage: the
// zero time, as the member of a binding without one).
func parseCreated(s string) time.Time {
	ns, err := strconv.ParseInt(s, 10, 64)
	if s == "" || err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
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
	vals, err := r.rdb.HMGet(ctx, r.keys.task(taskID), bindingFields...).Result()
	if err != nil {
		return Binding{}, false, r.unavailable("lookup", err)
	}
	b, ok, err := decodeBinding(taskID, vals)
	if err != nil || !ok || b.expired(r.now()) {
		return Binding{}, false, err
	}
	return b, true, nil
}

// ClaimContext implements Store: one script, so two replicas claiming one
// new id cannot both win. A context whose holder the store already knows
// (contextCache) is answered without a round trip.
func (r *Redis) ClaimContext(ctx context.Context, c Context) (Context, error) {
	start := r.now()
	if held, ok := r.contexts.get(c.ContextID, start); ok {
		return held, nil
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	if c.CreatedAt.IsZero() {
		c.CreatedAt = start
	}
	// An ownership write like a bind: with min_replicas it is acknowledged
	// only once replicas confirmed it (write).
	res, err := r.write(ctx, claimContextScript, []string{r.keys.context(c.ContextID)},
		c.Subject, c.Tenant, c.Issuer, strconv.FormatInt(c.CreatedAt.UnixNano(), 10), r.ttl.Milliseconds())
	if err != nil {
		return Context{}, r.unavailable("claim context", err)
	}
	vals, err := redis.NewCmdResult(res, nil).StringSlice()
	if err != nil || len(vals) != len(contextFields)+1 {
		return Context{}, r.unavailable("claim context", fmt.Errorf("unexpected answer of %d values (%v)", len(vals), err))
	}
	held, ok, err := decodeContext(c.ContextID, vals[:len(contextFields)])
	if err == nil && !ok {
		err = fmt.Errorf("%w: the claim of context %s answered no holder", ErrUnavailable, c.ContextID)
	}
	if err != nil {
		return Context{}, err
	}
	// With min_replicas only the holder's own claim is confirmed (it wrote).
	if r.minReplicas == 0 || held.Owner() == c.Owner() {
		if ms, perr := strconv.ParseInt(vals[len(contextFields)], 10, 64); perr == nil {
			r.contexts.put(held, start, time.Duration(ms)*time.Millisecond)
		}
	}
	return held, nil
}

var contextFields = []string{"subject", "tenant", "issuer", "created"}

// decodeContext reads the values of contextFields; ok is false when the
// hash does not exist.
func decodeContext(contextID string, vals []string) (Context, bool, error) {
	if len(vals) != len(contextFields) {
		return Context{}, false, nil
	}
	c := Context{ContextID: contextID, Subject: vals[0], Tenant: vals[1], Issuer: vals[2]}
	if vals[3] != "" {
		ns, err := strconv.ParseInt(vals[3], 10, 64)
		if err != nil {
			return Context{}, false, fmt.Errorf("%w: context %s has a malformed created time", ErrUnavailable, contextID)
		}
		c.CreatedAt = time.Unix(0, ns).UTC()
	}
	return c, true, nil
}

// LookupContext implements Store. A context whose holder the store already
// knows (contextCache) is answered without a round trip.
func (r *Redis) LookupContext(ctx context.Context, contextID string) (Context, bool, error) {
	start := r.now()
	if held, ok := r.contexts.get(contextID, start); ok {
		return held, true, nil
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	key := r.keys.context(contextID)
	// A record read, not written, is kept only where no write is confirmed by
	// replicas (min_replicas 0), and only while it still has time: its PTTL is
	// read only then.
	keep := r.minReplicas == 0 && r.contexts.age > 0
	var hm *redis.SliceCmd
	var pttl *redis.DurationCmd
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		hm = p.HMGet(ctx, key, contextFields...)
		if keep {
			pttl = p.PTTL(ctx, key)
		}
		return nil
	}); err != nil {
		return Context{}, false, r.unavailable("lookup context", err)
	}
	vals := hm.Val()
	if len(vals) != len(contextFields) || vals[0] == nil {
		return Context{}, false, nil
	}
	s := make([]string, len(vals))
	for i, v := range vals {
		s[i], _ = v.(string)
	}
	held, ok, err := decodeContext(contextID, s)
	if err == nil && ok && keep {
		if left := pttl.Val(); left > 0 || left == -1 {
			r.contexts.put(held, start, left)
		}
	}
	return held, ok, err
}

// Owned implements Store, page by page (OwnedPage).
func (r *Redis) Owned(ctx context.Context, o Owner) ([]Binding, error) {
	return ownedAll(ctx, o, r.OwnedPage)
}

// indexScan is how many index entries one OwnedPage reads at most per
// owner key, live or not: 4×limit+64.
func indexScan(limit int) int { return 4*limit + 64 }

// OwnedPage implements Store. It reads o's index (with contextID, the
// index of that context) and, with o.Legacy, the index of the bindings
// without an issuer, in list order with ZRANGE BYLEX … LIMIT, and each
// entry's binding: at most indexScan(limit) entries per index. An entry
// whose binding is gone, expired, another owner's, or elsewhere in the
// order (re-bound since) is dropped from the index on the way, and its id
// from the owner's set when the binding is not the owner's any more. An
// owner whose set predates the index gets its index built first
// (buildIndex).
func (r *Redis) OwnedPage(ctx context.Context, o Owner, after *Position, contextID string, limit int) (Page, error) {
	if o.Subject == "" || limit <= 0 {
		return Page{}, nil
	}
	limit = min(limit, MaxOwnedPage)
	ctx, cancel := r.op(ctx)
	defer cancel()
	owners := []Owner{{Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant}}
	if o.Legacy && o.Issuer != "" {
		owners = append(owners, Owner{Subject: o.Subject, Tenant: o.Tenant})
	}
	var page Page
	var hits []found
	var frontier *Position // where the least-read index that has more stopped
	for _, so := range owners {
		if err := r.buildIndex(ctx, so); err != nil {
			return Page{}, err
		}
		s, err := r.scanIndex(ctx, so, after, contextID, limit)
		if err != nil {
			return Page{}, err
		}
		page.Total += s.total
		hits = append(hits, s.found...)
		if s.more && (frontier == nil || s.last.Compare(*frontier) < 0) {
			frontier = &s.last
		}
	}
	slices.SortFunc(hits, func(a, b found) int { return a.pos.Compare(b.pos) })
	if frontier != nil { // past it, one index has not been read
		hits = slices.DeleteFunc(hits, func(f found) bool { return f.pos.Compare(*frontier) > 0 })
	}
	switch {
	case len(hits) > limit:
		hits = hits[:limit]
		page.More, page.Next = true, hits[limit-1].pos
	case frontier != nil:
		page.More, page.Next = true, *frontier
	}
	page.Bindings = make([]Binding, len(hits))
	for i, f := range hits {
		page.Bindings[i] = f.b
	}
	return page, nil
}

// found is a live binding read from an index, at its position.
type found struct {
	b   Binding
	pos Position
}

// scanned is what scanIndex read from one index.
type scanned struct {
	found []found
	// more: the index has entries after last (the last entry read).
	more  bool
	last  Position
	total int
}

// scanIndex reads up to limit+1 live bindings of so after after from so's
// index (or its context's), reading at most indexScan(limit) entries.
func (r *Redis) scanIndex(ctx context.Context, so Owner, after *Position, contextID string, limit int) (scanned, error) {
	key := r.keys.index(so)
	if contextID != "" {
		key = r.keys.contextIndex(so, contextID)
	}
	from := "-"
	if after != nil {
		from = "(" + after.key() + ";" // past every member of that position (key:<id>)
	}
	var out scanned
	budget := indexScan(limit)
	now := r.now()
	for first := true; budget > 0 && len(out.found) <= limit; first = false {
		n := min(limit+1-len(out.found), budget)
		var rng *redis.StringSliceCmd
		var card *redis.IntCmd
		if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			rng = p.ZRangeArgs(ctx, redis.ZRangeArgs{Key: key, Start: from, Stop: "+", ByLex: true, Count: int64(n)})
			if first {
				card = p.ZCard(ctx, key)
			}
			return nil
		}); err != nil {
			return scanned{}, r.unavailable("owned", err)
		}
		if first {
			out.total = int(card.Val())
		}
		members := rng.Val()
		budget -= len(members)
		out.more = len(members) == n
		if len(members) == 0 {
			break
		}
		cmds := make([]*redis.SliceCmd, len(members))
		if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, m := range members {
				cmds[i] = p.HMGet(ctx, r.keys.task(idOf(m)), bindingFields...)
			}
			return nil
		}); err != nil {
			return scanned{}, r.unavailable("owned", err)
		}
		var stale, gone []any
		for i, m := range members {
			b, ok, err := decodeBinding(idOf(m), cmds[i].Val())
			if err != nil {
				return scanned{}, err
			}
			pos, okKey := positionOfKey(m[:min(len(m), keyLen)])
			if okKey {
				out.last = pos
			}
			switch {
			case !ok || b.Owner() != so || b.expired(now):
				gone = append(gone, idOf(m))
				stale = append(stale, m)
			case !okKey || PositionOf(b) != pos || (contextID != "" && b.ContextID != contextID):
				stale = append(stale, m) // re-bound: its binding has another member
			default:
				out.found = append(out.found, found{b, pos})
			}
		}
		from = "(" + members[len(members)-1]
		r.dropStale(ctx, so, key, stale, gone)
		if !out.more {
			break
		}
	}
	return out, nil
}

// idOf is the task id of an index member (<Position.key>:<task id>).
func idOf(m string) string {
	if len(m) <= keyLen {
		return ""
	}
	return m[keyLen+1:]
}

// dropStale removes stale members from the index key read, and the ids of
// bindings gone from so's set and main index. Best effort: a binding bound
// again meanwhile has re-added its member.
func (r *Redis) dropStale(ctx context.Context, so Owner, key string, stale, gone []any) {
	if len(stale) == 0 {
		return
	}
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, key, stale...)
		if len(gone) > 0 {
			p.SRem(ctx, r.keys.owner(so), gone...)
		}
		return nil
	}); err != nil {
		r.log.Debug("stale task index entries not removed", zap.Error(err))
	}
}

// buildChunk is how many ids of an owner set buildIndex reads at once, and
// buildChunks how many chunks one read builds at most.
const buildChunk = 256

var buildChunks = 40

// errBuilding is the answer to a read whose owner's index is still being
// built: the caller tries again, and the next read continues the build.
var errBuilding = fmt.Errorf("%w: the owner's task index is being built from an earlier release's set; try again", ErrUnavailable)

// buildIndex builds so's index (and its contexts' indexes) from so's set
// when the set was written before the index existed: the set exists and
// the index does not, or the unindexed mark is set (by a bind that created
// the index first, or by a build not finished). It reads the set in chunks
// (SSCAN) and each id's binding; ids of bindings gone or another owner's
// leave the set. One call builds at most buildChunks chunks and keeps the
// cursor in the mark, so a large set takes a few reads (answered
// errBuilding until done) and no read is longer than its chunks. Until it
// is done, a read on another replica that finds the mark gone early (two
// builds racing) may list fewer tasks.
func (r *Redis) buildIndex(ctx context.Context, so Owner) error {
	var setN, idxN *redis.IntCmd
	var mark *redis.StringCmd
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		setN = p.Exists(ctx, r.keys.owner(so))
		idxN = p.Exists(ctx, r.keys.index(so))
		mark = p.Get(ctx, r.keys.unindexed(so))
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return r.unavailable("owned", err)
	}
	marked := mark.Err() == nil
	if setN.Val() == 0 || (idxN.Val() == 1 && !marked) {
		return nil
	}
	cursor, _ := strconv.ParseUint(mark.Val(), 10, 64) // no mark: from the start
	now := r.now()
	for range buildChunks {
		ids, next, err := r.rdb.SScan(ctx, r.keys.owner(so), cursor, "", buildChunk).Result()
		if err != nil {
			return r.unavailable("owned", err)
		}
		cmds := make([]*redis.SliceCmd, len(ids))
		if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HMGet(ctx, r.keys.task(id), bindingFields...)
			}
			return nil
		}); err != nil {
			return r.unavailable("owned", err)
		}
		var gone []any
		if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				b, ok, err := decodeBinding(id, cmds[i].Val())
				if err != nil || !ok || b.Owner() != so || b.expired(now) {
					gone = append(gone, id)
					continue
				}
				m := redis.Z{Member: member(id, b.CreatedAt)}
				p.ZAdd(ctx, r.keys.index(so), m)
				p.PExpire(ctx, r.keys.index(so), r.ttl)
				if b.ContextID != "" {
					p.ZAdd(ctx, r.keys.contextIndex(so, b.ContextID), m)
					p.PExpire(ctx, r.keys.contextIndex(so, b.ContextID), r.ttl)
				}
			}
			if len(gone) > 0 {
				p.SRem(ctx, r.keys.owner(so), gone...)
			}
			if next != 0 {
				p.Set(ctx, r.keys.unindexed(so), strconv.FormatUint(next, 10), r.ttl)
			} else {
				p.Del(ctx, r.keys.unindexed(so))
			}
			return nil
		}); err != nil {
			return r.unavailable("owned", err)
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
	return errBuilding
}

// Delete implements Store: the binding goes first (waiting for replicas
// like a bind), then its id leaves its owner's sets (an id left behind by a
// failure there is dropped by Owned, or by its pending expiry).
func (r *Redis) Delete(ctx context.Context, taskID string) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	res, err := r.write(ctx, deleteScript, []string{r.keys.task(taskID)})
	if err != nil {
		return r.unavailable("delete", err)
	}
	old, _ := res.([]any)
	if len(old) != 5 {
		return nil
	}
	var o Owner
	o.Subject, _ = old[0].(string)
	o.Tenant, _ = old[1].(string)
	o.Issuer, _ = old[2].(string)
	created, _ := old[3].(string)
	contextID, _ := old[4].(string)
	if err := ownerDeleteScript.Run(ctx, r.rdb, r.keys.ownerSets(o, contextID)[:4], taskID, member(taskID, parseCreated(created))).Err(); err != nil {
		return r.unavailable("delete", err)
	}
	return nil
}

// RecordCall implements Store.
func (r *Redis) RecordCall(ctx context.Context, capability string, t time.Time) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	d := day(t)
	ns := max(t.UnixNano(), 0)
	err := recordScript.Run(ctx, r.rdb, r.keys.usageKeys(capability, d),
		usageTTL(t).Milliseconds(), fmt.Sprintf("%020d", ns)).Err()
	if err != nil {
		return r.unavailable("record call", err)
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
