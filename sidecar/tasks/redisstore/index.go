package redisstore

// This file holds the Redis store's owner index: Owned and OwnedPage, read page by page from each
// owner's index, built once from an earlier release's owner set.

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/tasks"
)

// Owned implements Store, page by page (OwnedPage).
func (r *Store) Owned(ctx context.Context, o tasks.Owner) ([]tasks.Binding, error) {
	return tasks.OwnedAll(ctx, o, r.OwnedPage)
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
func (r *Store) OwnedPage(ctx context.Context, o tasks.Owner, after *tasks.Position, contextID string, limit int) (tasks.Page, error) {
	if o.Subject == "" || limit <= 0 {
		return tasks.Page{}, nil
	}
	limit = min(limit, tasks.MaxOwnedPage)
	ctx, cancel := r.op(ctx)
	defer cancel()
	owners := []tasks.Owner{{Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant}}
	if o.Legacy && o.Issuer != "" {
		owners = append(owners, tasks.Owner{Subject: o.Subject, Tenant: o.Tenant})
	}
	var page tasks.Page
	var hits []found
	var frontier *tasks.Position // where the least-read index that has more stopped
	for _, so := range owners {
		if err := r.buildIndex(ctx, so); err != nil {
			return tasks.Page{}, err
		}
		s, err := r.scanIndex(ctx, so, after, contextID, limit)
		if err != nil {
			return tasks.Page{}, err
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
	page.Bindings = make([]tasks.Binding, len(hits))
	for i, f := range hits {
		page.Bindings[i] = f.b
	}
	return page, nil
}

// found is a live binding read from an index, at its position.
type found struct {
	b   tasks.Binding
	pos tasks.Position
}

// scanned is what scanIndex read from one index.
type scanned struct {
	found []found
	// more: the index has entries after last (the last entry read).
	more  bool
	last  tasks.Position
	total int
}

// scanIndex reads up to limit+1 live bindings of so after after from so's
// index (or its context's), reading at most indexScan(limit) entries.
func (r *Store) scanIndex(ctx context.Context, so tasks.Owner, after *tasks.Position, contextID string, limit int) (scanned, error) {
	key := r.keys.index(so)
	if contextID != "" {
		key = r.keys.contextIndex(so, contextID)
	}
	from := "-"
	if after != nil {
		from = "(" + positionKey(*after) + ";" // past every member of that position (key:<id>)
	}
	var out scanned
	budget := indexScan(limit)
	now := r.opts.Now()
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
			case !ok || b.Owner() != so || b.Expired(now):
				gone = append(gone, idOf(m))
				stale = append(stale, m)
			case !okKey || tasks.PositionOf(b) != pos || (contextID != "" && b.ContextID != contextID):
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
func (r *Store) dropStale(ctx context.Context, so tasks.Owner, key string, stale, gone []any) {
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
		r.opts.Log.Debug("stale task index entries not removed", zap.Error(err))
	}
}

// buildChunk is how many ids of an owner set buildIndex reads at once, and
// buildChunks how many chunks one read builds at most.
const buildChunk = 256

var buildChunks = 40

// errBuilding is the answer to a read whose owner's index is still being
// built: the caller tries again, and the next read continues the build.
var errBuilding = fmt.Errorf("%w: the owner's task index is being built from an earlier release's set; try again", tasks.ErrUnavailable)

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
func (r *Store) buildIndex(ctx context.Context, so tasks.Owner) error {
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
	now := r.opts.Now()
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
				if err != nil || !ok || b.Owner() != so || b.Expired(now) {
					gone = append(gone, id)
					continue
				}
				m := redis.Z{Member: member(id, b.CreatedAt)}
				p.ZAdd(ctx, r.keys.index(so), m)
				p.PExpire(ctx, r.keys.index(so), r.opts.BindingTTL)
				if b.ContextID != "" {
					p.ZAdd(ctx, r.keys.contextIndex(so, b.ContextID), m)
					p.PExpire(ctx, r.keys.contextIndex(so, b.ContextID), r.opts.BindingTTL)
				}
			}
			if len(gone) > 0 {
				p.SRem(ctx, r.keys.owner(so), gone...)
			}
			if next != 0 {
				p.Set(ctx, r.keys.unindexed(so), strconv.FormatUint(next, 10), r.opts.BindingTTL)
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

// keyLen is the length of positionKey.
const keyLen = 16 + 8 + 2*tasks.DigestBytes

// positionKey is p as lowercase hex that orders bytewise as Compare orders: the
// created seconds (sign bit flipped, then inverted, so a later time is a
// smaller key), the nanoseconds (inverted), the digest. The index's
// members are positionKey:<task id>.
func positionKey(p tasks.Position) string {
	var b [8 + 4 + tasks.DigestBytes]byte
	binary.BigEndian.PutUint64(b[:8], ^(uint64(p.Sec) ^ 1<<63))
	binary.BigEndian.PutUint32(b[8:12], ^p.Nsec)
	copy(b[12:], p.Digest[:])
	return hex.EncodeToString(b[:])
}

// positionOfKey parses positionKey; ok is false for anything else.
func positionOfKey(k string) (tasks.Position, bool) {
	var b [8 + 4 + tasks.DigestBytes]byte
	if len(k) != keyLen {
		return tasks.Position{}, false
	}
	if _, err := hex.Decode(b[:], []byte(k)); err != nil {
		return tasks.Position{}, false
	}
	p := tasks.Position{Sec: int64(^binary.BigEndian.Uint64(b[:8]) ^ 1<<63), Nsec: ^binary.BigEndian.Uint32(b[8:12])}
	copy(p.Digest[:], b[12:])
	return p, true
}
