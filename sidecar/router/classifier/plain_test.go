package classifier

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/capgate/capgate/sidecar/router/classifier/wordvec"
)

// The map-built message vectoriser: the reference the one in product code
// (query.go, term lists in pooled buffers) is held to. It builds the
// message's bags as maps, as the index build does for the skills, and
// scores every skill with plain dot products.

// addRelated adds the WordNet-related stems of ts that are in the
// vocabulary, with the given weight.
func addRelated(b bag, ts []token, weight float64, vocab map[uint64]int32) {
	if weight == 0 {
		return
	}
	rel := relatedStems()
	for _, t := range ts {
		for _, r := range rel[t.stem] {
			h := fnv64('w', r)
			if _, ok := vocab[h]; ok {
				b[h] += weight
			}
		}
	}
}

// vectorPlain is space.vector as a plain loop: the bag walked in
// sortedKeys order, its components sorted by id as structs.
func (sp *space) vectorPlain(bg bag, query bool) sparse {
	type entry struct {
		id int32
		w  float32
	}
	var es []entry
	var norm float64
	for _, h := range sortedKeys(bg) {
		tf := bg[h]
		if tf >= 1 {
			tf = 1 + math.Log(tf)
		}
		id, ok := sp.ids[h]
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
		es = append(es, entry{id: id, w: float32(w)})
	}
	if norm == 0 {
		return sparse{}
	}
	inv := float32(1 / math.Sqrt(norm))
	for i := range es {
		es[i].w *= inv
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.id, b.id) })
	var v sparse
	for _, e := range es {
		v.ids = append(v.ids, e.id)
		v.w = append(v.w, e.w)
	}
	return v
}

// vectorizePlain returns the message vectors of ts from map bags.
func (ix *Index) vectorizePlain(ts []token) query {
	wb, cb := bag{}, bag{}
	addWords(wb, ts, 1)
	addRelated(wb, ts, ix.cfg.Related, ix.word.ids)
	addChars(cb, ts, ix.cfg.CharMin, ix.cfg.CharMax, 1)
	return query{word: ix.word.vectorPlain(wb, true), char: ix.char.vectorPlain(cb, true)}
}

// linFeaturesPlain returns the linear model's features for a message, its
// bigrams from a map bag.
func (ix *Index) linFeaturesPlain(m *linear, q query, ts []token) sparse {
	var bi sparse
	if ix.cfg.LRBigram > 0 {
		bb := bag{}
		addBigrams(bb, ts, 1)
		bi = m.bi.vectorPlain(bb, true)
	}
	// The word-vector block has one computation (meanVector), in a fresh
	// buffer here.
	return ix.appendLinFeatures(sparse{}, m, q, bi, ix.meanVector(make([]float32, wordvec.Dim), ts))
}

// scoresPlain returns every skill's score for text, by position: the
// cosine scores by dot products with each skill's vectors (no postings),
// plus lr × the linear model's logit summed per skill; nil when the
// message has no vector.
func (ix *Index) scoresPlain(text string) []float64 {
	ts := tokens(text, nil)
	q := ix.vectorizePlain(ts)
	if len(q.word.ids) == 0 && len(q.char.ids) == 0 {
		return nil
	}
	var x sparse
	if ix.lin != nil {
		x = ix.linFeaturesPlain(ix.lin, q, ts)
	}
	out := make([]float64, len(ix.ids))
	for c := range out {
		out[c] = ix.cfg.Word*float64(q.word.dot(ix.skillWord[c])) +
			ix.cfg.Char*float64(q.char.dot(ix.skillChar[c]))
		if m := ix.lin; m != nil {
			var s float64
			for i, f := range x.ids {
				s += float64(x.w[i]) * float64(m.w[int(f)*m.classes+c])
			}
			out[c] += ix.cfg.LR * s
		}
	}
	return out
}

// scoresPlainQuery is scores computed the plain way: candidates cleaned
// with a map, the message vectorised from map bags, each candidate's
// cosine by dot products with its vectors and its logit summed over the
// message's features; every skill's the same way when the confidence
// compares the best candidate with the whole index (a strict subset of
// more than directLimit candidates, or of fewer with Config.Global).
// Result and Explanation are then what result and features make of it:
// the reference of TestClassifyMatchesPlain.
func (ix *Index) scoresPlainQuery(text string, candidates []int) ([]int, []float64, query) {
	var cands []int
	if candidates == nil {
		for c := range ix.ids {
			cands = append(cands, c)
		}
	} else {
		seen := map[int]bool{}
		for _, c := range candidates {
			if c >= 0 && c < len(ix.ids) && !seen[c] {
				seen[c] = true
				cands = append(cands, c)
			}
		}
	}
	if len(cands) == 0 || strings.TrimSpace(text) == "" {
		return nil, nil, query{}
	}
	ts := tokens(text, nil)
	q := ix.vectorizePlain(ts)
	if len(q.word.ids) == 0 && len(q.char.ids) == 0 {
		return nil, nil, query{}
	}
	q.content = ix.knowsContent(ts)
	var x sparse
	if ix.lin != nil {
		x = ix.linFeaturesPlain(ix.lin, q, ts)
	}
	score := func(cs []int) ([]float64, []float64) {
		scores := make([]float64, len(cs))
		var logits []float64
		if ix.lin != nil {
			logits = make([]float64, len(cs))
		}
		for k, c := range cs {
			scores[k] = ix.cfg.Word*float64(q.word.dot(ix.skillWord[c])) +
				ix.cfg.Char*float64(q.char.dot(ix.skillChar[c]))
			if m := ix.lin; m != nil {
				var s float64
				for i, f := range x.ids {
					s += float64(x.w[i]) * float64(m.w[int(f)*m.classes+c])
				}
				logits[k] = s
				scores[k] += ix.cfg.LR * s
			}
		}
		return scores, logits
	}
	scores, logits := score(cands)
	q.logit = logits
	if len(cands) < len(ix.ids) && (len(cands) > directLimit || ix.cfg.Global) {
		var g allScored
		g.scores, g.logit = score(ix.all)
		q.global = &g
	}
	return cands, scores, q
}

// classifyPlain is classify over scoresPlainQuery.
func (ix *Index) classifyPlain(text string, candidates []int) Result {
	cands, scores, q := ix.scoresPlainQuery(text, candidates)
	if scores == nil {
		return Result{}
	}
	return ix.result(cands, scores, q)
}

// explainPlain is Explain over scoresPlainQuery.
func (ix *Index) explainPlain(text string, candidates []int) (Explanation, bool) {
	return ix.explanation(ix.scoresPlainQuery(text, candidates))
}
