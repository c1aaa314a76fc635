package tasks

import (
	"context"
	"crypto/sha256"
)

// DigestBytes is the length of a task id's digest in a Position.
const DigestBytes = 16

// Position is a place in the order an owner's tasks are listed in: created
// time, newest first, then the task id's digest (the first DigestBytes of
// its SHA-256), ascending. OwnedPage reads in this order, and ListTasks's
// page tokens name a Position.
type Position struct {
	Sec    int64
	Nsec   uint32
	Digest [DigestBytes]byte
}

// PositionOf is b's place in the list order.
func PositionOf(b Binding) Position {
	p := Position{Sec: b.CreatedAt.Unix(), Nsec: uint32(b.CreatedAt.Nanosecond())}
	sum := sha256.Sum256([]byte(b.TaskID))
	copy(p.Digest[:], sum[:DigestBytes])
	return p
}

// Compare orders positions as the list does: a later created time first.
func (p Position) Compare(o Position) int {
	switch {
	case p.Sec != o.Sec:
		if p.Sec > o.Sec {
			return -1
		}
		return 1
	case p.Nsec != o.Nsec:
		if p.Nsec > o.Nsec {
			return -1
		}
		return 1
	}
	for i := range p.Digest {
		if p.Digest[i] != o.Digest[i] {
			if p.Digest[i] < o.Digest[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Page is one page of an owner's tasks (Store.OwnedPage).
type Page struct {
	// Bindings are in list order, at most the limit asked for.
	Bindings []Binding
	// More reports that tasks after the page may exist; the next page
	// starts after Next: the last binding's position, or further when the
	// store skipped index entries of bindings that are gone.
	More bool
	Next Position
	// Total is how many tasks the owner's index lists for the query: exact
	// in the memory store; in Redis an upper bound, counting entries of
	// expired bindings until a read drops them.
	Total int
}

// MaxOwnedPage bounds the limit of one OwnedPage call.
const MaxOwnedPage = 1000

// OwnedAll reads every page of o's tasks (Store.Owned) through pages.
func OwnedAll(ctx context.Context, o Owner, pages func(context.Context, Owner, *Position, string, int) (Page, error)) ([]Binding, error) {
	var out []Binding
	var after *Position
	for {
		p, err := pages(ctx, o, after, "", MaxOwnedPage)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Bindings...)
		if !p.More {
			return out, nil
		}
		next := p.Next
		after = &next
	}
}
