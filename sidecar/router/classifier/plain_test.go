package classifier

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

// vectorizePlain returns the message vectors of ts from map bags.
func (ix *Index) vectorizePlain(ts []token) query {
	wb, cb := bag{}, bag{}
	addWords(wb, ts, 1)
	addRelated(wb, ts, ix.cfg.Related, ix.word.ids)
	addChars(cb, ts, ix.cfg.CharMin, ix.cfg.CharMax, 1)
	return query{word: ix.word.vector(wb, true), char: ix.char.vector(cb, true)}
}

// linFeaturesPlain returns the linear model's features for a message, its
// bigrams from a map bag.
func (ix *Index) linFeaturesPlain(m *linear, q query, ts []token) sparse {
	var bi sparse
	if ix.cfg.LRBigram > 0 {
		bb := bag{}
		addBigrams(bb, ts, 1)
		bi = m.bi.vector(bb, true)
	}
	return ix.appendLinFeatures(sparse{}, m, q, bi)
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
