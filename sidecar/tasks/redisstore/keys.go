package redisstore

// This file holds the Redis store's key layout (keys): one place for every key name and its
// Cluster hash tag.

import (
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capgate/capgate/sidecar/tasks"
)

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
func (k keys) owner(o tasks.Owner) string {
	if o.Issuer == "" && !k.tagged {
		return k.key("owner", url.QueryEscape(o.Tenant)+":"+url.QueryEscape(o.Subject))
	}
	return k.key("owner", ownerPath(o))
}

// pending is the sorted set of o's pending task ids.
func (k keys) pending(o tasks.Owner) string { return k.key("pending", ownerPath(o)) }

// index is o's ordered index of task ids: a sorted set whose members, all
// scored 0, are <Position.key>:<task id>, so that ZRANGE BYLEX reads them in
// list order.
func (k keys) index(o tasks.Owner) string { return k.key("index", ownerPath(o)) }

// contextIndex is o's ordered index of the task ids in one context.
func (k keys) contextIndex(o tasks.Owner, contextID string) string {
	return k.key("index", ownerPath(o), "context", url.QueryEscape(contextID))
}

// unindexed marks an owner whose set holds ids written before the index
// existed (an upgraded store): the next read builds the index from the set.
// It holds the SSCAN cursor the build has reached.
func (k keys) unindexed(o tasks.Owner) string { return k.key("index", ownerPath(o), "unbuilt") }

// ownerSets are the keys of the owner step of a bind and a delete: the
// owner's set, pending set, index, the index of the task's context (the
// index again for a task without one) and the unindexed mark.
func (k keys) ownerSets(o tasks.Owner, contextID string) []string {
	ci := k.index(o)
	if contextID != "" {
		ci = k.contextIndex(o, contextID)
	}
	return []string{k.owner(o), k.pending(o), k.index(o), ci, k.unindexed(o)}
}

// member is a task's entry in its owner's indexes.
func member(taskID string, created time.Time) string {
	return positionKey(tasks.PositionOf(tasks.Binding{TaskID: taskID, CreatedAt: created})) + ":" + taskID
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

func ownerPath(o tasks.Owner) string {
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

// maxCachedKeys bounds a keyCache; a full cache starts over. An entry of the message keys is
// ~0.5 KiB (two keys with an escaped issuer URL, their boxed copies, the map's slot), of the
// owner keys ~1 KiB (five), so the caches hold ~6 MiB at most: enough for the callers active at
// once, not for every caller seen.
const maxCachedKeys = 1 << 12

// keyCache remembers the keys build answers for the ids seen recently: the message keys of
// an owner (keys.sentKeys), built twice per message (reserve, settle), the usage keys of a
// capability's day (keys.usageKeys), built once per call, and the owner keys of a bind in a
// context (keys.ownerSets, five keys); each costs escapes and strings every time. The keys it answers are shared: nobody writes to them (go-redis copies them into its
// command). TestKeyCache holds its answers to build's.
type keyCache[K comparable] struct {
	build func(K) []string
	mu    sync.Mutex
	m     map[K]scriptKeys
}

// scriptKeys are a script's keys, as strings and as the values of a command's arguments, boxed
// once (runFast).
type scriptKeys struct {
	names []string
	boxed []any
}

func newScriptKeys(names []string) scriptKeys {
	boxed := make([]any, len(names))
	for i, n := range names {
		boxed[i] = n
	}
	return scriptKeys{names: names, boxed: boxed}
}

func newKeyCache[K comparable](build func(K) []string) *keyCache[K] {
	return &keyCache[K]{build: build, m: map[K]scriptKeys{}}
}

// of is build(id).
func (c *keyCache[K]) of(id K) scriptKeys {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.m[id]; ok {
		return k
	}
	if len(c.m) >= maxCachedKeys {
		clear(c.m)
	}
	k := newScriptKeys(c.build(id))
	c.m[id] = k
	return k
}

// capabilityDay is a capability's unix day, the id of its usage keys.
type capabilityDay struct {
	capability string
	day        int64
}

// ownerContext is an owner and a context id, the id of a bind's owner keys (keys.ownerSets).
type ownerContext struct {
	owner     tasks.Owner
	contextID string
}
