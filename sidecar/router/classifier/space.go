package classifier

import (
	"math"
	"math/bits"
	"slices"
)

// bag counts weighted term occurrences by hashed term.
type bag map[uint64]float64

// sparse is a sparse vector sorted by term id.
type sparse struct {
	ids []int32
	w   []float32
}

// dot returns the inner product of two sparse vectors by merge join.
func (a sparse) dot(b sparse) float32 {
	var s float32
	i, j := 0, 0
	for i < len(a.ids) && j < len(b.ids) {
		switch {
		case a.ids[i] < b.ids[j]:
			i++
		case a.ids[i] > b.ids[j]:
			j++
		default:
			s += a.w[i] * b.w[j]
			i++
			j++
		}
	}
	return s
}

// dotOnes returns the inner product of a with every weight set to 1 and b:
// the sum of b's weights on a's terms.
func (a sparse) dotOnes(b sparse) float32 {
	var s float32
	i, j := 0, 0
	for i < len(a.ids) && j < len(b.ids) {
		switch {
		case a.ids[i] < b.ids[j]:
			i++
		case a.ids[i] > b.ids[j]:
			j++
		default:
			s += b.w[j]
			i++
			j++
		}
	}
	return s
}

// clone returns a copy of a that shares no memory with it.
func (a sparse) clone() sparse {
	return sparse{ids: slices.Clone(a.ids), w: slices.Clone(a.w)}
}

// sorted returns a with its entries sorted by id.
func (a sparse) sorted() sparse {
	idx := make([]int, len(a.ids))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(x, y int) int { return int(a.ids[x] - a.ids[y]) })
	out := sparse{ids: make([]int32, len(idx)), w: make([]float32, len(idx))}
	for i, k := range idx {
		out.ids[i], out.w[i] = a.ids[k], a.w[k]
	}
	return out
}

// postings transposes rows into one postings list per term: the term's
// column, a sparse vector over the rows (ids are row positions).
func postings(rows []sparse, terms int) []sparse {
	n := make([]int32, terms)
	for _, r := range rows {
		for _, id := range r.ids {
			n[id]++
		}
	}
	// One backing array of each kind for all lists, each list cut to its
	// capacity.
	var total int
	for _, k := range n {
		total += int(k)
	}
	allRows, allW := make([]int32, total), make([]float32, total)
	post := make([]sparse, terms)
	off := 0
	for id, k := range n {
		end := off + int(k)
		post[id] = sparse{ids: allRows[off:off:end], w: allW[off:off:end]}
		off = end
	}
	for r, row := range rows {
		for i, id := range row.ids {
			p := &post[id]
			p.ids = append(p.ids, int32(r))
			p.w = append(p.w, row.w[i])
		}
	}
	return post
}

// accumulate adds q · row into acc for every row sharing a term with q.
// It is not inlined: inlined into allScores its loop spilled its indexes
// to the stack (BenchmarkClassify150: 261 k → 240 k instructions a message,
// callgrind). A postings list is two arrays (rows, weights) rather than
// one of pairs: the loop reads each with one indexed load (240 k → 232 k
// instructions).
//
//go:noinline
func accumulate(post []sparse, q sparse, acc []float32) {
	for i, id := range q.ids {
		qw := q.w[i]
		rows := post[id].ids
		w := post[id].w[:len(rows)]
		for j, row := range rows {
			acc[row] += qw * w[j]
		}
	}
}

// space is one feature family (stemmed words, or character n-grams): its
// vocabulary and its inverse document frequencies computed over skills,
//
//	idf(t) = ln((N+1)/(df(t)+1)) + offset
//
// with N skills, df(t) the skills whose document has t. The offset keeps
// frequent words (pronouns, "what", "my") from weighing nothing: in short
// requests they carry intent ("my name" against "your name").
type space struct {
	ids        map[uint64]int32
	table      vocabTable // ids, for the lookups of a classification
	idf        []float32
	unknownIDF float32
	unknown    float64 // weight of unknown query terms in the query norm
}

// newSpace builds the vocabulary of the skill documents. Term ids follow
// the order of first occurrence (bags are walked in sorted key order) so
// that the index is deterministic.
func newSpace(skills []bag, idfOffset, unknown float64) space {
	sp := space{ids: make(map[uint64]int32), unknown: unknown}
	var df []int32
	for _, bg := range skills {
		for _, h := range sortedKeys(bg) {
			id, ok := sp.ids[h]
			if !ok {
				id = int32(len(df))
				sp.ids[h] = id
				df = append(df, 0)
			}
			df[id]++
		}
	}
	n := float64(len(skills))
	sp.idf = make([]float32, len(df))
	for i, d := range df {
		sp.idf[i] = float32(math.Log((n+1)/(float64(d)+1)) + idfOffset)
	}
	sp.unknownIDF = float32(math.Log(n+1) + idfOffset)
	sp.table = newVocabTable(sp.ids)
	return sp
}

// vocabTable is a read-only hash table from hashed term to term id, open
// addressing with linear probing, at most half full: a classification
// looks up every distinct term of the message, and the hashes are FNV-1a
// already, so a multiplicative slot and a flat probe do in a few
// instructions what a Go map does with its own hashing and groups
// (BenchmarkClassify150: 226 k → 218 k instructions a message, callgrind).
// TestVocabTableMatchesMap holds it to the map it is built from.
type vocabTable struct {
	keys  []uint64
	ids   []int32 // -1: an empty slot
	shift uint    // 64 − log2(slots)
}

func newVocabTable(m map[uint64]int32) vocabTable {
	size := 1 << bits.Len(uint(2*len(m))) // more than twice the entries
	t := vocabTable{keys: make([]uint64, size), ids: make([]int32, size), shift: 64 - uint(bits.TrailingZeros(uint(size)))}
	for i := range t.ids {
		t.ids[i] = -1
	}
	for h, id := range m {
		i := t.slot(h)
		for t.ids[i] >= 0 {
			i = (i + 1) & uint64(size-1)
		}
		t.keys[i], t.ids[i] = h, id
	}
	return t
}

// slot is h's first slot: the top bits of h × 2⁶⁴/φ (a shift by 64, for a
// table of one slot, gives 0).
func (t *vocabTable) slot(h uint64) uint64 {
	return (h * 0x9e3779b97f4a7c15) >> t.shift
}

// lookup returns the id of the term hashed h.
func (t *vocabTable) lookup(h uint64) (int32, bool) {
	if len(t.ids) == 0 {
		return 0, false
	}
	mask := uint64(len(t.ids) - 1)
	for i := t.slot(h); ; i = (i + 1) & mask {
		id := t.ids[i]
		if id < 0 {
			return 0, false
		}
		if t.keys[i] == h {
			return id, true
		}
	}
}

func sortedKeys(bg bag) []uint64 {
	ks := make([]uint64, 0, len(bg))
	for h := range bg {
		ks = append(ks, h)
	}
	slices.Sort(ks)
	return ks
}

// vector weights a bag with sublinear tf (1 + ln tf; a fractional count is
// kept as it is) × idf and L2-normalises it. For a query (query = true)
// terms unknown to the vocabulary are dropped but still count in the norm,
// weighted by unknown, so that a message mostly about something else scores
// low everywhere.
func (sp *space) vector(bg bag, query bool) sparse {
	var entries []uint64
	v := sp.vectorOf(bagTerms(bg), query, sparse{}, &entries)
	if len(v.ids) == 0 {
		return sparse{}
	}
	return v
}

// vectorOf is vector over a bag given as merged terms (sorted by hash, one
// per hash), into dst's backing arrays, with entries as the sorting buffer.
func (sp *space) vectorOf(terms []term, query bool, dst sparse, entries *[]uint64) sparse {
	es := (*entries)[:0]
	var norm float64
	for _, t := range terms {
		tf := t.w
		if tf > 1 { // 1 + ln 1 is 1 (TestLogOfOneIsZero): most terms are seen once
			tf = 1 + math.Log(tf)
		}
		id, ok := sp.table.lookup(t.h)
		if !ok {
			if query {
				w := sp.unknown * tf * float64(sp.unknownIDF)
				norm += w * w
			}
			continue
		}
		w := tf * float64(sp.idf[id])
		if w <= 0 {
			continue
		}
		norm += w * w
		es = append(es, packEntry(id, float32(w)))
	}
	*entries = es
	v := sparse{ids: dst.ids[:0], w: dst.w[:0]}
	if norm == 0 {
		return v
	}
	inv := float32(1 / math.Sqrt(norm))
	// Ids are distinct (one per hash): sorting the packed entries as
	// integers orders them by id.
	slices.Sort(es)
	for _, e := range es {
		id, w := unpackEntry(e)
		v.ids = append(v.ids, id)
		v.w = append(v.w, w*inv)
	}
	return v
}

// packEntry packs a vector component into an integer that sorts by id (a
// term id is not negative): the id above, the weight's bits below.
func packEntry(id int32, w float32) uint64 {
	return uint64(id)<<32 | uint64(math.Float32bits(w))
}

// unpackEntry is packEntry's inverse.
func unpackEntry(e uint64) (int32, float32) {
	return int32(e >> 32), math.Float32frombits(uint32(e))
}

// coverage weighs the terms of a bag by idf over their total, so that its
// dot product with a 0/1 query vector is the idf-weighted share of the
// bag's terms that the query has.
func (sp *space) coverage(bg bag) sparse {
	var v sparse
	var total float32
	for _, h := range sortedKeys(bg) {
		id, ok := sp.ids[h]
		if !ok || sp.idf[id] <= 0 {
			continue
		}
		v.ids = append(v.ids, id)
		v.w = append(v.w, sp.idf[id])
		total += sp.idf[id]
	}
	for i := range v.w {
		v.w[i] /= total
	}
	return v.sorted()
}

const fnvOffset, fnvPrime = 14695981039346656037, 1099511628211

// fnv64 is FNV-1a over a namespace byte and s.
func fnv64(ns byte, s string) uint64 {
	h := (fnvOffset ^ uint64(ns)) * fnvPrime
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// fnv64Bytes is fnv64 over bytes.
func fnv64Bytes(ns byte, s []byte) uint64 {
	h := (fnvOffset ^ uint64(ns)) * fnvPrime
	for _, c := range s {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// fnv64Pair is fnv64(ns, a+" "+b) without building the string.
func fnv64Pair(ns byte, a, b string) uint64 {
	h := (fnvOffset ^ uint64(ns)) * fnvPrime
	for i := 0; i < len(a); i++ {
		h ^= uint64(a[i])
		h *= fnvPrime
	}
	h ^= ' '
	h *= fnvPrime
	for i := 0; i < len(b); i++ {
		h ^= uint64(b[i])
		h *= fnvPrime
	}
	return h
}
