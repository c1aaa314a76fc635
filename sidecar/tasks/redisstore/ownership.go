package redisstore

// This file holds the Redis store's ownership: Bind, BindPending (pending clarifications, capped
// per owner), Lookup, ClaimContext, LookupContext, Delete and their scripts.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/tasks"
)

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
var ownerScript = newFastScript(ownerLua)

const ownerLua = `
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
`

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
// Bind) held heldVersion heldMessageId (the first message of a pending
// binding; empty for others: a bind without held drops all three, so that
// a resolved clarification keeps none of them). A hash written by the
// previous release has no heldMessageId, and that release neither writes
// nor drops it: decodeBinding reads it only beside held, on a pending
// binding. The answer is 'conflict', or {'ok', created, contextId,
// '1'} of the binding overwritten ({'ok', ”, ”, ”} when there was none),
// so that the
// caller moves the task's index member.
var bindScript = newFastScript(bindLua)

// bindNArgs is how many arguments bindScript takes.
const bindNArgs = 15

const bindLua = `
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
  redis.call('HSET', KEYS[1], 'held', ARGV[13], 'heldVersion', ARGV[14], 'heldMessageId', ARGV[15])
else
  redis.call('HDEL', KEYS[1], 'held', 'heldVersion', 'heldMessageId')
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
return 0
`

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

// Bind implements Store.
func (r *Store) Bind(ctx context.Context, b tasks.Binding) error {
	return r.bind(ctx, b, time.Time{}, 0)
}

// BindPending implements Store.
func (r *Store) BindPending(ctx context.Context, b tasks.Binding, ttl time.Duration, maxPerOwner int) error {
	if !b.Pending || ttl <= 0 {
		return tasks.ErrNotPending
	}
	if b.Subject == "" || maxPerOwner <= 0 {
		return tasks.ErrTooManyPending
	}
	return r.bind(ctx, b, tasks.Expiry(r.opts.Now(), ttl), maxPerOwner)
}

// bind runs bindScript: without an expiry as Bind, with one as BindPending.
func (r *Store) bind(ctx context.Context, b tasks.Binding, expires time.Time, maxPending int) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	w, err := r.bindArgs(b, expires, maxPending)
	if err != nil {
		return err
	}
	res, err := r.runFast(ctx, ownerScript, []scriptKeys{w.ownerKeys}, w.ownerArgs[:])
	if err != nil {
		return r.unavailable("bind", err)
	}
	if res == "full" {
		return r.full(ctx, b)
	}
	res, err = r.runFast(ctx, bindScript, []scriptKeys{w.taskKeys}, w.bindArgs[:])
	if err != nil {
		return r.unavailable("bind", err)
	}
	return r.bound(ctx, b, w.written, res)
}

// full is a bind's error when the owner's pending set is full: a conflict when both hold, as
// in Memory.
func (r *Store) full(ctx context.Context, b tasks.Binding) error {
	if old, ok, err := r.Lookup(ctx, b.TaskID); err == nil && ok && tasks.Conflicts(old, b) {
		return tasks.ErrConflict
	}
	return tasks.ErrTooManyPending
}

// bound is a bind's error after bindScript answered res; a re-bind moves its index member.
func (r *Store) bound(ctx context.Context, b tasks.Binding, written string, res any) error {
	if res == "conflict" {
		return tasks.ErrConflict
	}
	r.reindex(ctx, b, written, res)
	return nil
}

// bindWrite is what a bind's two scripts are given: ownerScript's keys and arguments,
// bindScript's, and the index member written.
type bindWrite struct {
	ownerKeys, taskKeys scriptKeys
	ownerArgs           [7]any
	bindArgs            [bindNArgs]any
	written             string
}

// bindArgs are the keys and arguments of the bind of b (expires: zero for Bind).
func (r *Store) bindArgs(b tasks.Binding, expires time.Time, maxPending int) (bindWrite, error) {
	created, createdAt := storedCreated(b.CreatedAt)
	pending := "0"
	if b.Pending {
		pending = "1"
	}
	candidates := ""
	if len(b.Candidates) > 0 {
		c, err := json.Marshal(b.Candidates)
		if err != nil {
			return bindWrite{}, fmt.Errorf("bind %s: %w", b.TaskID, err)
		}
		candidates = string(c)
	}
	now := r.opts.Now()
	ownerTTL := r.opts.BindingTTL
	exp := ""
	if !expires.IsZero() {
		exp = strconv.FormatInt(expires.UnixMilli(), 10)
		ownerTTL = max(ownerTTL, expires.Sub(now))
	}
	held, heldVersion, heldMessageID := "", "", ""
	if b.Pending && len(b.Held) > 0 {
		held, heldVersion, heldMessageID = string(b.Held), b.HeldVersion, b.HeldMessageID
	}
	written := member(b.TaskID, createdAt)
	hasContext := "0"
	if b.ContextID != "" {
		hasContext = "1"
	}
	return bindWrite{
		ownerKeys: r.ownerKeys.of(ownerContext{b.Owner(), b.ContextID}),
		taskKeys:  newScriptKeys([]string{r.keys.task(b.TaskID)}),
		ownerArgs: [7]any{b.TaskID, now.UnixMilli(), ownerTTL.Milliseconds(), exp, maxPending, written, hasContext},
		bindArgs: [bindNArgs]any{b.Subject, b.Tenant, b.Issuer, b.Capability, b.Handler, pending, created, b.ContextID, candidates,
			now.UnixMilli(), r.opts.BindingTTL.Milliseconds(), exp, held, heldVersion, heldMessageID},
		written: written,
	}, nil
}

// reindex moves a re-bound task's index member to where the binding now
// is: a created time of "" kept the old one, and a new created time or
// context leaves the old member behind. res is bindScript's answer. Best
// effort: a member left behind is dropped by the read that finds it
// (OwnedPage checks every member against its binding).
func (r *Store) reindex(ctx context.Context, b tasks.Binding, written string, res any) {
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
		r.opts.Log.Debug("task index not moved", zap.Error(err))
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

var bindingFields = []string{"subject", "tenant", "capability", "handler", "pending", "created", "contextId", "candidates", "issuer", "expires", "held", "heldVersion",
	"heldMessageId"}

// decodeBinding reads the values of bindingFields; ok is false when the
// hash does not exist. A binding written before issuers were recorded has
// no issuer field: its Issuer is ""; one written before held message ids
// were kept has no heldMessageId: its HeldMessageID is "" (its task is
// rendered without history).
func decodeBinding(taskID string, vals []any) (tasks.Binding, bool, error) {
	if len(vals) != len(bindingFields) || vals[0] == nil {
		return tasks.Binding{}, false, nil
	}
	s := make([]string, len(vals))
	for i, v := range vals {
		s[i], _ = v.(string)
	}
	b := tasks.Binding{TaskID: taskID, Subject: s[0], Tenant: s[1], Capability: s[2], Handler: s[3], Pending: s[4] == "1", ContextID: s[6], Issuer: s[8]}
	if b.Pending && s[10] != "" {
		b.Held, b.HeldVersion, b.HeldMessageID = []byte(s[10]), s[11], s[12]
	}
	if s[5] != "" {
		ns, err := strconv.ParseInt(s[5], 10, 64)
		if err != nil {
			return tasks.Binding{}, false, fmt.Errorf("%w: binding %s has a malformed created time", tasks.ErrUnavailable, taskID)
		}
		b.CreatedAt = time.Unix(0, ns).UTC()
	}
	if s[7] != "" {
		if err := json.Unmarshal([]byte(s[7]), &b.Candidates); err != nil {
			return tasks.Binding{}, false, fmt.Errorf("%w: binding %s has malformed candidates", tasks.ErrUnavailable, taskID)
		}
	}
	if s[9] != "" {
		ms, err := strconv.ParseInt(s[9], 10, 64)
		if err != nil {
			return tasks.Binding{}, false, fmt.Errorf("%w: binding %s has a malformed expiry", tasks.ErrUnavailable, taskID)
		}
		b.ExpiresAt = time.UnixMilli(ms).UTC()
	}
	return b, true, nil
}

// Lookup implements Store. A binding past its expiry by this store's clock
// is not found (Redis drops the key by its own clock).
func (r *Store) Lookup(ctx context.Context, taskID string) (tasks.Binding, bool, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	vals, err := r.rdb.HMGet(ctx, r.keys.task(taskID), bindingFields...).Result()
	if err != nil {
		return tasks.Binding{}, false, r.unavailable("lookup", err)
	}
	b, ok, err := decodeBinding(taskID, vals)
	if err != nil || !ok || b.Expired(r.opts.Now()) {
		return tasks.Binding{}, false, err
	}
	return b, true, nil
}

// ClaimContext implements Store: one script, so two replicas claiming one
// new id cannot both win. A context whose holder the store already knows
// (contextCache) is answered without a round trip.
func (r *Store) ClaimContext(ctx context.Context, c tasks.Context) (tasks.Context, error) {
	start := r.opts.Now()
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
		c.Subject, c.Tenant, c.Issuer, strconv.FormatInt(c.CreatedAt.UnixNano(), 10), r.opts.BindingTTL.Milliseconds())
	if err != nil {
		return tasks.Context{}, r.unavailable("claim context", err)
	}
	vals, err := redis.NewCmdResult(res, nil).StringSlice()
	if err != nil || len(vals) != len(contextFields)+1 {
		return tasks.Context{}, r.unavailable("claim context", fmt.Errorf("unexpected answer of %d values (%v)", len(vals), err))
	}
	held, ok, err := decodeContext(c.ContextID, vals[:len(contextFields)])
	if err == nil && !ok {
		err = fmt.Errorf("%w: the claim of context %s answered no holder", tasks.ErrUnavailable, c.ContextID)
	}
	if err != nil {
		return tasks.Context{}, err
	}
	// With min_replicas only the holder's own claim is confirmed (it wrote).
	if r.opts.MinReplicas == 0 || held.Owner() == c.Owner() {
		if ms, perr := strconv.ParseInt(vals[len(contextFields)], 10, 64); perr == nil {
			r.contexts.put(held, start, time.Duration(ms)*time.Millisecond)
		}
	}
	return held, nil
}

var contextFields = []string{"subject", "tenant", "issuer", "created"}

// decodeContext reads the values of contextFields; ok is false when the
// hash does not exist.
func decodeContext(contextID string, vals []string) (tasks.Context, bool, error) {
	if len(vals) != len(contextFields) {
		return tasks.Context{}, false, nil
	}
	c := tasks.Context{ContextID: contextID, Subject: vals[0], Tenant: vals[1], Issuer: vals[2]}
	if vals[3] != "" {
		ns, err := strconv.ParseInt(vals[3], 10, 64)
		if err != nil {
			return tasks.Context{}, false, fmt.Errorf("%w: context %s has a malformed created time", tasks.ErrUnavailable, contextID)
		}
		c.CreatedAt = time.Unix(0, ns).UTC()
	}
	return c, true, nil
}

// LookupContext implements Store. A context whose holder the store already
// knows (contextCache) is answered without a round trip.
func (r *Store) LookupContext(ctx context.Context, contextID string) (tasks.Context, bool, error) {
	start := r.opts.Now()
	if held, ok := r.contexts.get(contextID, start); ok {
		return held, true, nil
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	key := r.keys.context(contextID)
	// A record read, not written, is kept only where no write is confirmed by
	// replicas (min_replicas 0), and only while it still has time: its PTTL is
	// read only then.
	keep := r.opts.MinReplicas == 0 && r.contexts.age > 0
	var hm *redis.SliceCmd
	var pttl *redis.DurationCmd
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		hm = p.HMGet(ctx, key, contextFields...)
		if keep {
			pttl = p.PTTL(ctx, key)
		}
		return nil
	}); err != nil {
		return tasks.Context{}, false, r.unavailable("lookup context", err)
	}
	vals := hm.Val()
	if len(vals) != len(contextFields) || vals[0] == nil {
		return tasks.Context{}, false, nil
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

// Delete implements Store: the binding goes first (waiting for replicas
// like a bind), then its id leaves its owner's sets (an id left behind by a
// failure there is dropped by Owned, or by its pending expiry).
func (r *Store) Delete(ctx context.Context, taskID string) error {
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
	var o tasks.Owner
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
