package classifier

import (
	"cmp"
	"slices"
)

// The message's side of a classification, without maps: a message's bags
// (words, related words, character n-grams, word bigrams) are built as
// lists of hashed terms in pooled buffers, sorted by hash and summed, where
// the index build fills a map per bag. Sorting stably and summing each
// hash's weights in the order they were added gives exactly the bag the
// map would hold, walked in the order sortedKeys walks it, so the vectors
// are bit for bit the same. This is the only message vectoriser, for
// Classify and for training the linear model alike; the map-built one is
// the tests' reference (plain_test.go, TestVectorsMatchPlain,
// TestScoresMatchPlain). BenchmarkClassify150: 44 → 35 µs, 101 → 26
// allocations (docs/routing.md).

// term is one weighted occurrence of a hashed term.
type term struct {
	h   uint64
	w   float64
	seq int32 // position when added (merge)
}

// scratch is one classification's working memory, pooled per index. Nothing
// in it outlives the Classify call that took it.
type scratch struct {
	acc     []float32 // allScores: word and char accumulators, 2 × skills
	logits  []float64 // addLogits: per-class sums of the linear model
	seen    []bool    // clean: positions seen, all false between calls
	terms   []term
	entries []entry
	buf     []byte
	// backing arrays of the message's vectors and linear features
	word, char, bi, x sparse
}

// entry is one component of a sparse vector, for sorting by id.
type entry struct {
	id int32
	w  float32
}

func (ix *Index) getScratch() *scratch {
	sc, _ := ix.scratch.Get().(*scratch)
	if sc == nil {
		sc = ix.newScratch()
	}
	return sc
}

// newScratch returns working memory for one classification over ix.
func (ix *Index) newScratch() *scratch {
	n := len(ix.ids)
	sc := &scratch{acc: make([]float32, 2*n), seen: make([]bool, n)}
	if ix.lin != nil {
		sc.logits = make([]float64, ix.lin.classes)
	}
	return sc
}

func (ix *Index) putScratch(sc *scratch) { ix.scratch.Put(sc) }

// appendWordTerms is addWords as terms.
func appendWordTerms(dst []term, ts []token, weight float64) []term {
	for _, t := range ts {
		dst = append(dst, term{h: fnv64('w', t.stem), w: weight})
	}
	return dst
}

// appendRelatedTerms is addRelated as terms.
func appendRelatedTerms(dst []term, ts []token, weight float64, vocab map[uint64]int32) []term {
	if weight == 0 {
		return dst
	}
	rel := relatedStems()
	for _, t := range ts {
		for _, r := range rel[t.stem] {
			h := fnv64('w', r)
			if _, ok := vocab[h]; ok {
				dst = append(dst, term{h: h, w: weight})
			}
		}
	}
	return dst
}

// appendCharTerms is addChars as terms; buf is a reusable buffer.
func appendCharTerms(dst []term, buf []byte, ts []token, lo, hi int, weight float64) ([]term, []byte) {
	for _, t := range ts {
		buf = append(buf[:0], '<')
		buf = append(buf, t.word...)
		buf = append(buf, '>')
		for n := lo; n <= hi; n++ {
			for i := 0; i+n <= len(buf); i++ {
				dst = append(dst, term{h: fnv64Bytes('c', buf[i:i+n]), w: weight})
			}
		}
	}
	return dst, buf
}

// appendBigramTerms is addBigrams as terms.
func appendBigramTerms(dst []term, ts []token, weight float64) []term {
	prev := "^"
	for _, t := range ts {
		dst = append(dst, term{h: fnv64Pair('b', prev, t.stem), w: weight})
		prev = t.stem
	}
	if len(ts) > 0 {
		dst = append(dst, term{h: fnv64Pair('b', prev, "$"), w: weight})
	}
	return dst
}

// merge sorts terms by hash (stably: ties by position) and sums the
// weights of each hash in the order they were added, in place: the bag as
// sorted (hash, count) pairs.
func merge(terms []term) []term {
	for i := range terms {
		terms[i].seq = int32(i)
	}
	slices.SortFunc(terms, func(a, b term) int {
		if c := cmp.Compare(a.h, b.h); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	out := terms[:0]
	for i := 0; i < len(terms); {
		h, sum := terms[i].h, 0.0
		for ; i < len(terms) && terms[i].h == h; i++ {
			sum += terms[i].w
		}
		out = append(out, term{h: h, w: sum})
	}
	return out
}

// bagTerms returns a bag as merged terms: its pairs in sortedKeys order.
func bagTerms(bg bag) []term {
	ks := sortedKeys(bg)
	out := make([]term, len(ks))
	for i, h := range ks {
		out[i] = term{h: h, w: bg[h]}
	}
	return out
}

// vectorizeInto returns the message vectors of ts, in sc's buffers.
func (ix *Index) vectorizeInto(ts []token, sc *scratch) query {
	terms := appendWordTerms(sc.terms[:0], ts, 1)
	terms = appendRelatedTerms(terms, ts, ix.cfg.Related, ix.word.ids)
	sc.word = ix.word.vectorOf(merge(terms), true, sc.word, &sc.entries)
	terms, sc.buf = appendCharTerms(terms[:0], sc.buf, ts, ix.cfg.CharMin, ix.cfg.CharMax, 1)
	sc.char = ix.char.vectorOf(merge(terms), true, sc.char, &sc.entries)
	sc.terms = terms
	return query{word: sc.word, char: sc.char}
}

// linFeaturesInto returns the linear model's features for a message, in
// sc's buffers.
func (ix *Index) linFeaturesInto(m *linear, q query, ts []token, sc *scratch) sparse {
	var bi sparse
	if ix.cfg.LRBigram > 0 {
		terms := appendBigramTerms(sc.terms[:0], ts, 1)
		sc.bi = m.bi.vectorOf(merge(terms), true, sc.bi, &sc.entries)
		sc.terms, bi = terms, sc.bi
	}
	sc.x = ix.appendLinFeatures(sc.x, m, q, bi)
	return sc.x
}
