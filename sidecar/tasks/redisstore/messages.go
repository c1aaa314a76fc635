package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
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
// window exists (then it answers {'held', record}, else 1: an integer reply, which go-redis
// reads without allocating); before writing it drops the owner's
// records older than the window and, at max_per_owner, the oldest. The window is compared on
// capgate's clock (the reservation times it wrote); the keys expire a window after the last
// reservation, by Redis's clock, relative (PEXPIRE): no clock is compared with another.
//
// KEYS: sent hash, sent order (keys.sentKeys). ARGV: id record now_ms window_ms max_per_owner
// started_ms (the record's score, by which Release knows it).
var reserveScript = newFastScript(`
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
return 1
`)

// settleScript writes a settled record. A record that is gone is written again, for what is
// left of its window (left_ms > 0). KEYS: sent hash, sent order. ARGV: id record started_ms
// left_ms.
var settleScript = redis.NewScript(settleLua)

const settleLua = `
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
`

// releaseScript drops a record reserved at started_ms (its score), not one another call
// reserved. KEYS: sent hash, sent order. ARGV: id started_ms.
var releaseScript = redis.NewScript(releaseLua)

const releaseLua = `
local at = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not at or tonumber(at) ~= tonumber(ARGV[2]) then return 'kept' end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 'ok'
`

// settleCountScript and releaseCountScript are settleScript and releaseScript each run with
// recordScript as one script (countingScript), for a store whose keys are not in Cluster slots.
var (
	settleCountScript  = newFastScript(countingScript(settleLua, 2, 4))
	releaseCountScript = newFastScript(countingScript(releaseLua, 2, 2))
)

// countingScript is the script body (keys KEYS[1..nkeys], arguments ARGV[1..nargs]) and
// recordScript run as one: KEYS are body's, then recordScript's; ARGV body's, then
// recordScript's. The call is counted first, whatever body answers. Its keys may lie in
// different Cluster slots: only for a store without hash tags. It answers 0 (an integer reply,
// which go-redis reads without allocating), whatever body answers: nobody reads the answer of a
// settlement or a release.
func countingScript(body string, nkeys, nargs int) string {
	record := shiftLua(recordLua, "KEYS", nkeys)
	record = shiftLua(record, "ARGV", nargs)
	return "local function record()\n" + record + "end\nrecord()\nlocal function run()\n" + body + "end\nrun()\nreturn 0\n"
}

// shiftLua adds n to every index of table name (KEYS or ARGV) in the Lua src: name[x]
// becomes name[n + x], for a literal x as for a variable.
func shiftLua(src, name string, n int) string {
	if n == 0 {
		return src
	}
	return strings.ReplaceAll(src, name+"[", name+"["+strconv.Itoa(n)+" + ")
}

// settleBindScript and settleCountBindScript settle a message's record (and count its call)
// and bind the task it answered with, in one script (settleBindLua), for a store whose keys
// are not in Cluster slots.
var (
	settleBindScript      = newFastScript(settleBindLua(false))
	settleCountBindScript = newFastScript(settleBindLua(true))
)

// settleBindLua is settleScript, recordScript (with count), ownerScript and bindScript run as
// one, in that order: KEYS are settleScript's, recordScript's, ownerScript's, bindScript's;
// ARGV likewise. It answers ownerScript's 'full' (nothing bound), or bindScript's answer.
func settleBindLua(count bool) string {
	var b strings.Builder
	nk, na := 0, 0
	part := func(name, src string, keys, args int) {
		src = shiftLua(shiftLua(src, "KEYS", nk), "ARGV", na)
		b.WriteString("local function " + name + "()\n" + src + "end\n")
		nk, na = nk+keys, na+args
	}
	part("settle", settleLua, 2, 4)
	if count {
		part("record", recordLua, 2, 2)
	}
	part("owner", ownerLua, 5, 7)
	part("bind", bindLua, 1, bindNArgs)
	if count {
		b.WriteString("record()\n")
	}
	b.WriteString("settle()\nif owner() == 'full' then return 'full' end\nreturn bind()\n")
	return b.String()
}

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
	rec, buf, err := encodeSent(s)
	if err != nil {
		return tasks.Sent{}, false, fmt.Errorf("reserve message: %w", err)
	}
	defer releaseRecord(buf)
	res, err := r.runFast(ctx, reserveScript, []scriptKeys{r.sentKeys.of(s.Owner)}, []any{url.QueryEscape(s.MessageID), rec,
		r.opts.Now().UnixMilli(), max(window.Milliseconds(), 1), max(maxPerOwner, 1), s.Started.UnixMilli()})
	if err != nil {
		return tasks.Sent{}, false, r.unavailable("reserve message", err)
	}
	if res == int64(1) {
		return s, true, nil
	}
	vals, _ := res.([]any)
	held, ok := "", len(vals) == 2 && vals[0] == "held"
	if ok {
		held, ok = vals[1].(string)
	}
	if !ok {
		return tasks.Sent{}, false, r.unavailable("reserve message", fmt.Errorf("unexpected answer %v", res))
	}
	var old tasks.Sent
	if err := json.Unmarshal([]byte(held), &old); err != nil {
		return tasks.Sent{}, false, fmt.Errorf("%w: a message record is malformed", tasks.ErrUnavailable)
	}
	old.MessageID, old.Owner = s.MessageID, s.Owner
	return old, false, nil
}

// Settle implements Messages.
func (r *Store) Settle(ctx context.Context, s tasks.Sent, window time.Duration) error {
	keys, args, buf, err := r.settleArgs(s, window)
	if err != nil {
		return err
	}
	defer releaseRecord(buf)
	ctx, cancel := r.op(ctx)
	defer cancel()
	if _, err := r.write(ctx, settleScript, keys.names, args[:]...); err != nil {
		return r.unavailable("settle message", err)
	}
	return nil
}

// settleArgs are settleScript's keys and arguments for the settled record of s; buf is the
// record's buffer, for releaseRecord once the script ran.
func (r *Store) settleArgs(s tasks.Sent, window time.Duration) (keys scriptKeys, args [4]any, buf *[]byte, err error) {
	if s.Owner.Subject == "" {
		return scriptKeys{}, args, nil, tasks.ErrNoOwner
	}
	s.Done = true
	rec, buf, err := encodeSent(s)
	if err != nil {
		return scriptKeys{}, args, nil, fmt.Errorf("settle message: %w", err)
	}
	left := s.Started.Add(window).Sub(r.opts.Now()).Milliseconds()
	return r.sentKeys.of(s.Owner), [4]any{url.QueryEscape(s.MessageID), rec, s.Started.UnixMilli(), left}, buf, nil
}

// SettleCounting implements tasks.CountingMessages: Settle and RecordCall in one round trip,
// one script (settleCountScript) on a store without hash tags, a pipeline of the two scripts in
// a Cluster, where their keys lie in different slots (two round trips, Settle's then
// RecordCall's, in a Cluster with min_replicas: the settlement waits for replicas).
func (r *Store) SettleCounting(ctx context.Context, s tasks.Sent, window time.Duration, c tasks.Call) (error, error) {
	keys, args, buf, err := r.settleArgs(s, window)
	if err != nil {
		return err, r.RecordCall(ctx, c.Capability, c.At)
	}
	defer releaseRecord(buf)
	err, cerr := r.withCount(ctx, c, settleScript, settleCountScript, keys, args[:])
	if err != nil {
		err = r.unavailable("settle message", err)
	}
	return err, cerr
}

// ReleaseCounting implements tasks.CountingMessages: Release and RecordCall in one round trip,
// as SettleCounting.
func (r *Store) ReleaseCounting(ctx context.Context, s tasks.Sent, c tasks.Call) (error, error) {
	err, cerr := r.withCount(ctx, c, releaseScript, releaseCountScript, r.sentKeys.of(s.Owner), []any{url.QueryEscape(s.MessageID), s.Started.UnixMilli()})
	if err != nil {
		err = r.unavailable("release message", err)
	}
	return err, cerr
}

// SettleBind implements tasks.SettlingBinder: on a store without hash tags one script
// (settleBindLua) settles s, counts c (unless its capability is "") and binds b, as Settle
// (SettleCounting), then Bind, would; in a Cluster, where they lie in different slots, it is
// those calls one after the other. One script's failure is all three's.
func (r *Store) SettleBind(ctx context.Context, s tasks.Sent, window time.Duration, c tasks.Call, b tasks.Binding) (err, countErr, bindErr error) {
	if r.keys.tagged {
		return r.settleThenBind(ctx, s, window, c, b)
	}
	keys, args, buf, err := r.settleArgs(s, window)
	if err != nil {
		return r.settleThenBind(ctx, s, window, c, b)
	}
	defer releaseRecord(buf)
	w, err := r.bindArgs(b, time.Time{}, 0)
	if err != nil {
		return r.Settle(ctx, s, window), nil, err
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	var res any
	if c.Capability != "" {
		rk, rargs := r.recordArgs(c.Capability, c.At)
		res, err = r.runFast(ctx, settleCountBindScript, []scriptKeys{keys, rk, w.ownerKeys, w.taskKeys}, args[:], rargs[:], w.ownerArgs[:], w.bindArgs[:])
	} else {
		res, err = r.runFast(ctx, settleBindScript, []scriptKeys{keys, w.ownerKeys, w.taskKeys}, args[:], w.ownerArgs[:], w.bindArgs[:])
	}
	if err != nil {
		err = r.unavailable("settle and bind", err)
		if c.Capability != "" {
			countErr = err
		}
		return err, countErr, err
	}
	if res == "full" {
		return nil, nil, r.full(ctx, b)
	}
	return nil, nil, r.bound(ctx, b, w.written, res)
}

// settleThenBind is SettleBind as the calls it stands for, one after the other: in a
// Cluster, and for a record settleArgs refuses (Settle then says why).
func (r *Store) settleThenBind(ctx context.Context, s tasks.Sent, window time.Duration, c tasks.Call, b tasks.Binding) (err, countErr, bindErr error) {
	if c.Capability != "" {
		err, countErr = r.SettleCounting(ctx, s, window, c)
	} else {
		err = r.Settle(ctx, s, window)
	}
	return err, countErr, r.Bind(ctx, b)
}

// withCount runs script on keys with args and recordScript for c: as counted, the two as one
// script, on a store without hash tags (through write, waiting for replicas as the settlement
// does); in a Cluster in one pipeline (go-redis sends each to its slot's master, in parallel),
// or one after the other with min_replicas. It returns script's error and the count's
// (RecordCall's; one error for both when they ran as one). A script Redis does not hold
// (NOSCRIPT: after a restart flushed its cache) is run again on its own, as Script.Run does.
func (r *Store) withCount(ctx context.Context, c tasks.Call, script *redis.Script, counted fastScript, sk scriptKeys, args []any) (error, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	rk, rargs := r.recordArgs(c.Capability, c.At)
	if !r.keys.tagged {
		_, err := r.runFast(ctx, counted, []scriptKeys{sk, rk}, args, rargs[:])
		if err != nil {
			return err, r.unavailable("record call", err)
		}
		return nil, nil
	}
	// The slower paths take copies: args and rargs may be on the caller's stack.
	keys, rkeys, sargs, cargs := sk.names, rk.names, slices.Clone(args), slices.Clone(rargs[:])
	if r.opts.MinReplicas > 0 {
		_, err := r.write(ctx, script, keys, sargs...)
		return err, r.RecordCall(ctx, c.Capability, c.At)
	}
	var cmd, count *redis.Cmd
	_, perr := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmd = script.EvalSha(ctx, p, keys, sargs...)
		count = recordScript.EvalSha(ctx, p, rkeys, cargs...)
		return nil
	})
	err, cerr := cmd.Err(), count.Err()
	if perr != nil && err == nil && cerr == nil {
		// No connection: the commands were never sent and carry no error of their own.
		err, cerr = perr, perr
	}
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		err = script.Run(ctx, r.rdb, keys, sargs...).Err()
	}
	if cerr != nil && redis.HasErrorPrefix(cerr, "NOSCRIPT") {
		cerr = recordScript.Run(ctx, r.rdb, rkeys, cargs...).Err()
	}
	if cerr != nil {
		cerr = r.unavailable("record call", cerr)
	}
	return err, cerr
}

// Release implements Messages.
func (r *Store) Release(ctx context.Context, s tasks.Sent) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	if err := releaseScript.Run(ctx, r.rdb, r.sentKeys.of(s.Owner).names, url.QueryEscape(s.MessageID), s.Started.UnixMilli()).Err(); err != nil {
		return r.unavailable("release message", err)
	}
	return nil
}
