// Package redisstore is the Redis task store backend (tasks.Store) on one
// Redis server, a Sentinel set or a Cluster: its rows of the backend table
// (sidecar/tasks/backends) name Check and Open. It is built as any backend
// is (docs/walkthroughs.md, "Add a store backend"): it imports sidecar/tasks
// for the store's types, options and errors, and its tests run the
// conformance suite, storetest.Run, on real redis-server processes.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/tasks"
)

// Defaults of the Redis store (the defaults of its options are tasks',
// tasks.DefaultKeyPrefix, tasks.DefaultBindingTTL, ...).
const (
	// DefaultTimeout is the dial, read and write timeout unless the URL
	// sets dial_timeout, read_timeout or write_timeout.
	DefaultTimeout = 500 * time.Millisecond
	// DefaultRetries is go-redis's max_retries unless the URL sets it.
	DefaultRetries = 2
	// usageDays is how long a per-day usage counter is kept (the window plus
	// slack for clocks and time zones).
	usageDays = 32
)

// Store is a tasks.Store shared by replicas: bindings are hashes with a TTL,
// each owner's task ids a set, each owner's pending task ids a sorted set
// by expiry, usage per-day counters. Every Redis failure is returned as
// tasks.ErrUnavailable. It runs on one Redis server, a Sentinel set or a Cluster
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
type Store struct {
	rdb      redis.UniversalClient
	keys     keys
	contexts *contextCache
	// sentKeys, usageKeys and ownerKeys cache keys.sentKeys, keys.usageKeys and
	// keys.ownerSets.
	sentKeys  *keyCache[tasks.Owner]
	usageKeys *keyCache[capabilityDay]
	ownerKeys *keyCache[ownerContext]
	health    *health        // whether Redis answers (health.go)
	opts      tasks.Settings // the options it was opened with, resolved
}

var (
	_ tasks.Store  = (*Store)(nil)
	_ tasks.Owners = (*Store)(nil)
)

// New returns a store on rdb (a *redis.Client, a failover client or a
// *redis.ClusterClient, whose keys get hash tags). It does not contact
// Redis.
func New(rdb redis.UniversalClient, opts ...tasks.Option) *Store {
	o := tasks.ApplyOptions(opts...)
	_, cluster := rdb.(*redis.ClusterClient)
	k := keys{prefix: o.KeyPrefix, tagged: cluster}
	r := &Store{rdb: rdb, opts: o, keys: k, contexts: newContextCache(o.ContextCacheAge), health: newHealth(o),
		sentKeys:  newKeyCache(k.sentKeys),
		usageKeys: newKeyCache(func(c capabilityDay) []string { return k.usageKeys(c.capability, c.day) }),
		ownerKeys: newKeyCache(func(c ownerContext) []string { return k.ownerSets(c.owner, c.contextID) })}
	watchHealth(rdb, r.health)
	return r
}

// Open is Dial as a Backend's Open (tasks.Backend): a Redis store shared
// by replicas (a Redis that does not answer at start is logged, not an
// error; task operations then fail closed with tasks.ErrUnavailable).
func Open(ctx context.Context, url string, opts ...tasks.Option) (tasks.Store, error) {
	r, err := Dial(ctx, url, opts...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Dial connects to the Redis store URL raw (see Check; parseStoreURL
// for the forms) and writes the usage-since mark. A failed write is logged,
// not returned: the store is usable as soon as Redis answers, and until
// then its operations fail with ErrUnavailable (capgate keeps serving its
// cards). Only a malformed URL is an error.
//
// Besides go-redis's query parameters (dial_timeout, read_timeout,
// write_timeout, max_retries, pool_size, ...), the URL may carry key_prefix,
// binding_ttl (a Go duration), min_replicas and replica_timeout; options
// given here take precedence.
func Dial(ctx context.Context, raw string, opts ...tasks.Option) (*Store, error) {
	su, err := parseStoreURL(raw)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	opts = append(su.own, opts...)
	o := tasks.ApplyOptions(opts...)
	if o.Password != "" {
		su.setPassword(o.Password)
	}
	if o.SentinelPassword != "" {
		if su.mode != modeSentinel {
			return nil, fmt.Errorf("store: %s: a Sentinel password, but the store is not %s:// or %s://", su.display, SchemeSentinel, SchemeSentinelTLS)
		}
		su.failover.SentinelPassword = o.SentinelPassword
	}
	r := New(su.client(), opts...)
	r.logStart(su)
	pctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	// The first store opened on this Redis marks when usage counting began.
	if err := r.rdb.SetNX(pctx, r.keys.since(), r.opts.Now().UnixNano(), 0).Err(); err != nil {
		r.opts.Log.Warn("task store unreachable at start; task operations fail closed until it answers",
			zap.String("store", su.display), zap.Error(err))
	}
	r.checkReplicas(pctx, su.mode)
	return r, nil
}

// Close closes the Redis client.
func (r *Store) Close() error { return r.rdb.Close() }

func (r *Store) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opts.OpTimeout)
}

// unavailable wraps a Redis error as ErrUnavailable.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: redis %s: %w", tasks.ErrUnavailable, what, err)
}

// write runs an ownership script on keys (of one slot) and, with
// min_replicas, waits on the connection that wrote until that many
// replicas confirmed it (WAIT may not run inside a script). Fewer
// confirmations in time fail the write: it was applied on the master but is
// not acknowledged.
func (r *Store) write(ctx context.Context, s *redis.Script, keys []string, args ...any) (any, error) {
	if r.opts.MinReplicas == 0 {
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

// fastScript is a script of the message path (reserve; settle or release with the call's
// count) that runFast runs with its command built from parts boxed once: Script.Run boxes the
// command's name, the script's hash and every key again on each call.
type fastScript struct {
	*redis.Script
	sha any // Hash(), boxed
}

func newFastScript(src string) fastScript {
	s := redis.NewScript(src)
	return fastScript{Script: s, sha: s.Hash()}
}

// runFast is write(ctx, s, keys, args...) for a fastScript whose keys and arguments are the
// concatenations of keys and args: without min_replicas as Script.Run does it (EVALSHA, then
// EVAL on NOSCRIPT), through Do with the keys and hash boxed once. TestRunFastMatchesRun holds
// it to Script.Run.
func (r *Store) runFast(ctx context.Context, s fastScript, keys []scriptKeys, args ...[]any) (any, error) {
	if r.opts.MinReplicas > 0 {
		return r.write(ctx, s.Script, keyNames(keys), joined(args)...)
	}
	n, m := 0, 0
	for _, k := range keys {
		n += len(k.boxed)
	}
	for _, a := range args {
		m += len(a)
	}
	cmd := make([]any, 0, 3+n+m)
	cmd = append(cmd, "evalsha", s.sha, n)
	for _, k := range keys {
		cmd = append(cmd, k.boxed...)
	}
	for _, a := range args {
		cmd = append(cmd, a...)
	}
	res, err := r.rdb.Do(ctx, cmd...).Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return s.Eval(ctx, r.rdb, keyNames(keys), joined(args)...).Result()
	}
	return res, err
}

// keyNames is the concatenation of keys' names, in a slice of its own.
func keyNames(keys []scriptKeys) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.names...)
	}
	return out
}

// joined is the concatenation of args, in a slice of its own (so that runFast's caller may
// build args on its stack).
func joined(args [][]any) []any {
	var out []any
	for _, a := range args {
		out = append(out, a...)
	}
	return out
}

type evalFunc func(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd

func (r *Store) writeWait(ctx context.Context, conn interface {
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
		}).Wait(ctx, r.opts.MinReplicas, r.opts.ReplicaTimeout)
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
	if n < int64(r.opts.MinReplicas) {
		return nil, fmt.Errorf("%w (%d of %d)", errNotReplicated, n, r.opts.MinReplicas)
	}
	return res, nil
}
