package classifier

import (
	"slices"

	"github.com/capgate/capgate/sidecar/router/classifier/wordvec"
)

// The message's side of a classification, without maps: a message's bags
// (words, related words, character n-grams, word bigrams) are built as
// lists of hashed terms in pooled buffers, sorted by hash and summed, where
// the index build fills a map per bag. Summing each hash's weights in the
// order they were added gives exactly the bag the map would hold, walked
// in the order sortedKeys walks it, so the vectors are bit for bit the
// same. This is the only message vectoriser, for Classify and for training
// the linear model alike; the map-built one is the tests' reference
// (plain_test.go, TestVectorsMatchPlain, TestScoresMatchPlain).
// BenchmarkClassify150: 44 → 35 µs, 101 → 26 allocations (docs/routing.md).
//
// A bag is added in runs of one weight (the words at 1, then their related
// words at Config.Related; every n-gram or bigram at 1), so a run is a
// plain list of hashes: sorted as integers, in any order, since its
// entries weigh the same, and merged with the next run so that a hash's
// weights are summed run by run, as a stable sort of the whole bag would
// sum them (mergeRuns).

// term is a hashed term and its summed weight.
type term struct {
	h uint64
	w float64
}

// scratch is one classification's working memory, pooled per index. Nothing
// in it outlives the Classify call that took it.
type scratch struct {
	acc    []float32 // allScores: word and char accumulators, 2 × skills
	logits []float64 // allScores: every skill's logit (logitsInto)
	global allScored // allScores: every skill's score
	seen   []bool    // clean: positions seen, all false between calls
	cands  []int     // clean: the candidates
	// the message's words and tokens (tokensOf), cleared between calls
	words  []string
	tokens []token
	// the candidates' scores and logits
	scores, candLogits []float64
	terms              []term
	runs               [2][]uint64 // hashed terms of a bag's two runs (mergeRuns)
	entries            []uint64    // vectorOf's sorting buffer (packEntry)
	buf                []byte
	// backing arrays of the message's vectors and linear features
	word, char, bi, x sparse
	vec               [wordvec.Dim]float32 // its mean word vector (meanVector)
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

// putScratch returns sc to the pool, holding no message text.
func (ix *Index) putScratch(sc *scratch) {
	clear(sc.words[:cap(sc.words)])
	clear(sc.tokens[:cap(sc.tokens)])
	ix.scratch.Put(sc)
}

// resize returns *buf with length n, grown if it is shorter; its values
// are the old ones or 0.
func resize(buf *[]float64, n int) []float64 {
	if cap(*buf) < n {
		*buf = make([]float64, n)
	}
	*buf = (*buf)[:n]
	return *buf
}

// tokensOf returns the tokens of text, in sc's buffers; the stems of
// known words are looked up (appendKnownTokens).
func (sc *scratch) tokensOf(text string, known map[string]string) []token {
	sc.words = appendWords(sc.words[:0], text)
	sc.tokens = appendKnownTokens(sc.tokens[:0], sc.words, known)
	return sc.tokens
}

// appendWordHashes is addWords as hashes (one run).
func appendWordHashes(dst []uint64, ts []token) []uint64 {
	for _, t := range ts {
		dst = append(dst, fnv64('w', t.stem))
	}
	return dst
}

// appendRelatedHashes is addRelated as hashes (one run); none when weight
// is 0.
func appendRelatedHashes(dst []uint64, ts []token, weight float64, vocab *vocabTable) []uint64 {
	if weight == 0 {
		return dst
	}
	rel := relatedStems()
	for _, t := range ts {
		for _, r := range rel[t.stem] {
			h := fnv64('w', r)
			if _, ok := vocab.lookup(h); ok {
				dst = append(dst, h)
			}
		}
	}
	return dst
}

// appendCharHashes is addChars as hashes (one run); buf is a reusable
// buffer.
func appendCharHashes(dst []uint64, buf []byte, ts []token, lo, hi int) ([]uint64, []byte) {
	for _, t := range ts {
		buf = append(buf[:0], '<')
		buf = append(buf, t.word...)
		buf = append(buf, '>')
		for n := lo; n <= hi; n++ {
			for i := 0; i+n <= len(buf); i++ {
				dst = append(dst, fnv64Bytes('c', buf[i:i+n]))
			}
		}
	}
	return dst, buf
}

// appendBigramHashes is addBigrams as hashes (one run).
func appendBigramHashes(dst []uint64, ts []token) []uint64 {
	prev := "^"
	for _, t := range ts {
		dst = append(dst, fnv64Pair('b', prev, t.stem))
		prev = t.stem
	}
	if len(ts) > 0 {
		dst = append(dst, fnv64Pair('b', prev, "$"))
	}
	return dst
}

// mergeRuns appends to dst the bag of run a, every hash weighing wa, added
// before run b, every hash weighing wb: one term per hash, by ascending
// hash, its weight summed from 0 over a's occurrences then b's. Sorting a
// run reorders only equal weights, so each sum is the one the bag's map
// accumulates in the order the terms were added. It sorts a and b.
func mergeRuns(dst []term, a []uint64, wa float64, b []uint64, wb float64) []term {
	slices.Sort(a)
	slices.Sort(b)
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var h uint64
		switch {
		case i == len(a):
			h = b[j]
		case j == len(b) || a[i] <= b[j]:
			h = a[i]
		default:
			h = b[j]
		}
		sum := 0.0
		for ; i < len(a) && a[i] == h; i++ {
			sum += wa
		}
		for ; j < len(b) && b[j] == h; j++ {
			sum += wb
		}
		dst = append(dst, term{h: h, w: sum})
	}
	return dst
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
	words := appendWordHashes(sc.runs[0][:0], ts)
	related := appendRelatedHashes(sc.runs[1][:0], ts, ix.cfg.Related, &ix.word.table)
	terms := mergeRuns(sc.terms[:0], words, 1, related, ix.cfg.Related)
	sc.word = ix.word.vectorOf(terms, true, sc.word, &sc.entries)
	chars, buf := appendCharHashes(words[:0], sc.buf, ts, ix.cfg.CharMin, ix.cfg.CharMax)
	terms = mergeRuns(terms[:0], chars, 1, nil, 0)
	sc.char = ix.char.vectorOf(terms, true, sc.char, &sc.entries)
	sc.terms, sc.runs[0], sc.runs[1], sc.buf = terms, chars, related, buf
	return query{word: sc.word, char: sc.char}
}

// linFeaturesInto returns the linear model's features for a message, in
// sc's buffers.
func (ix *Index) linFeaturesInto(m *linear, q query, ts []token, sc *scratch) sparse {
	var bi sparse
	if ix.cfg.LRBigram > 0 {
		hs := appendBigramHashes(sc.runs[0][:0], ts)
		terms := mergeRuns(sc.terms[:0], hs, 1, nil, 0)
		sc.bi = m.bi.vectorOf(terms, true, sc.bi, &sc.entries)
		sc.terms, sc.runs[0], bi = terms, hs, sc.bi
	}
	sc.x = ix.appendLinFeatures(sc.x, m, q, bi, ix.meanVector(sc.vec[:], ts))
	return sc.x
}
