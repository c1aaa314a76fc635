package redisstore

import (
	"sync"
	"time"

	"github.com/capgate/capgate/sidecar/tasks"
)

// maxCachedContexts bounds the context cache; a full cache starts over.
const maxCachedContexts = 1 << 16

// contextCache remembers the holders of contexts a Redis store has read or
// claimed, so that the claims and lookups of a context that repeat with
// every message of a conversation (at the ext_authz door and the gateway)
// need no round trip. It is safe because a context's holder never changes
// while its record lives: capgate never deletes or rewrites a held context,
// it only lets it expire. So an answer is served:
//
//   - never past the record's expiry: an entry ends by the earlier of its
//     record's expiry, as known at the read (the time left Redis answered,
//     counted from before the call, so never later than Redis's own), and
//     its age limit;
//   - never for a claim not yet confirmed: with min_replicas, only the
//     holder's own claims are kept, which wrote (renewed) the record and were
//     acknowledged by the replicas; a lookup, or a claim answered by another
//     holder, is not kept, since its record may not be on the replicas yet;
//   - renewing: the holder's claim served from memory does not renew the
//     record, so an entry from a claim lives at most its age limit, after
//     which the next claim writes again: an active conversation's record is
//     renewed at least once per age limit.
//
// An unknown context is never kept: anyone may claim it the next moment.
type contextCache struct {
	age time.Duration // 0: off
	mu  sync.Mutex
	m   map[string]cachedContext
}

type cachedContext struct {
	held  tasks.Context
	until time.Time
}

func newContextCache(age time.Duration) *contextCache {
	return &contextCache{age: age, m: map[string]cachedContext{}}
}

// get returns the cached holder of contextID, if an entry is live at now.
func (c *contextCache) get(contextID string, now time.Time) (tasks.Context, bool) {
	if c.age <= 0 {
		return tasks.Context{}, false
	}
	c.mu.Lock()
	e, ok := c.m[contextID]
	c.mu.Unlock()
	if !ok || !now.Before(e.until) {
		return tasks.Context{}, false
	}
	return e.held, true
}

// put keeps held, read or written at start (taken before the call) with
// left to live in the store, for the earlier of left and the age limit.
// A record without an expiry (left < 0) is kept for the age limit.
func (c *contextCache) put(held tasks.Context, start time.Time, left time.Duration) {
	if c.age <= 0 || left == 0 {
		return
	}
	life := c.age
	if left > 0 && left < life {
		life = left
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedContexts {
		clear(c.m)
	}
	c.m[held.ContextID] = cachedContext{held: held, until: start.Add(life)}
}
