package classifier

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/capgate/capgate/sidecar/router/classifier/wordvec"
)

// linear is a multinomial logistic regression trained when the index is
// built, on top of the cosine scores: a candidate's score is
//
//	cosine score + lr · w_c · x
//
// with x the message's features (its word, character n-gram and word-bigram
// vectors, concatenated). It is fitted by SGD on the softmax loss of those
// scores (÷ lr) over each skill's examples and its name, each scored
// against its own skill's document without itself (leave one out), so that
// the weights learn what the cosine gets wrong rather than restate what it
// gets right. Weights are stored by feature, classes contiguous: scoring a
// message walks only the message's features.
//
// The skills that share a tag also share weights (Config.LRGroup): a
// skill's logit is (w_c + LRGroup · Σ u_t) · x over its tags t, fitted
// together, so that what one skill's examples teach about its domain ("a
// trip", "my card") reaches the others of its tag, which have their own
// ten examples to learn from and the tag's hundred. Trained alike (same
// step and L2), the shared weights are added into each skill's once
// training ends: scoring is unchanged. A tag on one skill shares nothing and
// is left out (tagGroups); one on every skill cannot change a softmax and
// learns nothing.
type linear struct {
	classes int
	w       []float32 // w[f*classes+c]: weight of feature f for class c
	bi      space     // word-bigram vocabulary (features after word and char)
	offChar int32     // first char feature
	offBi   int32     // first bigram feature
	offVec  int32     // first word-vector feature (vectors.go); none when Config.Embed is 0
	epochs  int       // the epochs it was trained for (train)
}

// minEpochs is the fewest epochs the linear model is trained for; a
// registry too large for them within Config.LRMaxWork is not trained.
// At ten examples per skill, 2 epochs keep most of the model's gain over
// the cosine (usage folds: 83.1 / 76.1 % top-1 against 84.1 / 77.6 % at
// 10 epochs and 78.1 / 69.6 % without the model).
const minEpochs = 2

// tagGroups numbers the tags that two or more skills share, compared in
// lower case without surrounding space, in the order of their first use,
// and lists each skill's numbers in increasing order: the linear model's
// groups of shared weights.
func tagGroups(docs []Doc) (groups [][]int32, n int) {
	skills := map[string][]int32{}
	var order []string
	for i, d := range docs {
		for _, t := range d.Tags {
			t = strings.ToLower(strings.TrimSpace(t))
			if t == "" {
				continue
			}
			if s := skills[t]; len(s) > 0 && s[len(s)-1] == int32(i) {
				continue // the same tag twice on one skill
			}
			if _, ok := skills[t]; !ok {
				order = append(order, t)
			}
			skills[t] = append(skills[t], int32(i))
		}
	}
	groups = make([][]int32, len(docs))
	for _, t := range order {
		if len(skills[t]) < 2 {
			continue
		}
		for _, c := range skills[t] {
			groups[c] = append(groups[c], int32(n))
		}
		n++
	}
	return groups, n
}

// trainDoc is one training document.
type trainDoc struct {
	x     sparse  // features
	q     query   // cosine vectors
	class int32   // its skill
	own   float64 // leave-one-out cosine score with its own skill
}

// addBigrams adds the stem bigrams of ts, with boundary marks.
func addBigrams(b bag, ts []token, weight float64) {
	prev := "^"
	for _, t := range ts {
		b[fnv64('b', prev+" "+t.stem)] += weight
		prev = t.stem
	}
	if len(ts) > 0 {
		b[fnv64('b', prev+" $")] += weight
	}
}

// appendLinFeatures concatenates the message's word, char n-gram and
// bigram vectors and its mean word vector (vec, nil for none) into the
// linear model's feature space, into dst's backing arrays.
func (ix *Index) appendLinFeatures(dst sparse, m *linear, q query, bi sparse, vec []float32) sparse {
	x := sparse{ids: dst.ids[:0], w: dst.w[:0]}
	x.ids = append(x.ids, q.word.ids...)
	x.w = append(x.w, q.word.w...)
	for i, id := range q.char.ids {
		x.ids = append(x.ids, m.offChar+id)
		x.w = append(x.w, q.char.w[i]*float32(ix.cfg.Char))
	}
	for i, id := range bi.ids {
		x.ids = append(x.ids, m.offBi+id)
		x.w = append(x.w, bi.w[i]*float32(ix.cfg.LRBigram))
	}
	for d, v := range vec {
		x.ids = append(x.ids, m.offVec+int32(d))
		x.w = append(x.w, v*float32(ix.cfg.Embed))
	}
	return x
}

// train fits the linear model on each skill's name and examples; nil when
// there is nothing to train on, or when the registry is too large for the
// build to stay within about two seconds and a bounded memory: a weight matrix
// over cfg.LRMaxWeights, or fewer than minEpochs epochs within
// cfg.LRMaxWork (about 600 skills of 5 examples). The index then ranks by
// the cosine scores alone, with the confidence fitted for them. Below that,
// a registry whose LREpochs epochs would exceed cfg.LRMaxWork is trained
// for as many epochs as fit: as a deployment accepts examples the model
// keeps learning from them instead of being dropped (at 150 skills, past
// about 24 examples a skill). groups lists each skill's groups of shared
// weights (tagGroups), of which there are ngroups.
func (ix *Index) train(exToks [][][]token, nameToks [][]token, wordBags, charBags []bag, groups [][]int32, ngroups int) *linear {
	cfg := ix.cfg
	classes := len(exToks)
	if classes < 2 || cfg.LREpochs == 0 {
		return nil
	}
	if cfg.LRGroup == 0 {
		groups, ngroups = nil, 0
	}
	// A text of n words has about 12n features (words, related words,
	// char 2–3-grams, bigrams), and wordvec.Dim more with the word-vector
	// block; each SGD step costs features × (skills + groups) × 2.
	var words, texts int
	for c := range exToks {
		words += len(nameToks[c])
		texts += 1 + len(exToks[c])
		for _, ts := range exToks[c] {
			words += len(ts)
		}
	}
	features := 12 * float64(words)
	if cfg.Embed > 0 {
		features += wordvec.Dim * float64(texts)
	}
	epochs := cfg.LREpochs
	if perEpoch := features * float64(classes+ngroups) * 2; float64(epochs)*perEpoch > cfg.LRMaxWork {
		epochs = int(cfg.LRMaxWork / perEpoch) // perEpoch > 0 here
	}
	if epochs < minEpochs {
		return nil
	}
	m := &linear{classes: classes, epochs: epochs}
	if cfg.LRBigram > 0 {
		bags := make([]bag, classes)
		for c := range exToks {
			bags[c] = bag{}
			addBigrams(bags[c], nameToks[c], 1)
			for _, ts := range exToks[c] {
				addBigrams(bags[c], ts, 1)
			}
		}
		m.bi = newSpace(bags, cfg.IDFOffset, cfg.Unknown)
	}
	m.offChar = int32(len(ix.word.idf))
	m.offBi = m.offChar + int32(len(ix.char.idf))
	m.offVec = m.offBi + int32(len(m.bi.idf))
	nfeat := int(m.offVec)
	if cfg.Embed > 0 {
		nfeat += wordvec.Dim
	}
	if nfeat*(classes+ngroups) > cfg.LRMaxWeights {
		return nil
	}

	var docs []trainDoc
	sc := &scratch{} // the message vectoriser's buffers; each doc keeps copies
	addDoc := func(ts []token, c int, inDoc float64) {
		if len(ts) == 0 {
			return
		}
		q := ix.vectorizeInto(ts, sc)
		q.word, q.char = q.word.clone(), q.char.clone()
		d := trainDoc{x: ix.linFeaturesInto(m, q, ts, sc).clone(), q: q, class: int32(c)}
		// The skill's document without this text.
		wb, cb := bag{}, bag{}
		for h, v := range wordBags[c] {
			wb[h] = v
		}
		for h, v := range charBags[c] {
			cb[h] = v
		}
		addWords(wb, ts, -inDoc)
		addChars(cb, ts, cfg.CharMin, cfg.CharMax, -inDoc)
		for h, v := range wb {
			if v < 1e-9 {
				delete(wb, h)
			}
		}
		for h, v := range cb {
			if v < 1e-9 {
				delete(cb, h)
			}
		}
		d.own = cfg.Word*float64(q.word.dot(ix.word.vector(wb, false))) +
			cfg.Char*float64(q.char.dot(ix.char.vector(cb, false)))
		docs = append(docs, d)
	}
	for c := range exToks {
		addDoc(nameToks[c], c, cfg.NameWeight)
		for _, ts := range exToks[c] {
			addDoc(ts, c, 1)
		}
	}
	if len(docs) == 0 {
		return nil
	}
	m.w = ix.sgd(docs, classes, nfeat, epochs, groups, ngroups)
	return m
}

// sgd fits the weights by stochastic gradient descent on the softmax loss
// of (cosine + lr · w·x) / lr, with L2 decay (weights kept as scale × v so
// that decay is O(1) a step), and returns them with the shared weights of
// each skill's groups (ngroups in all) added in. Deterministic.
func (ix *Index) sgd(docs []trainDoc, classes, nfeat, epochs int, groups [][]int32, ngroups int) []float32 {
	cfg := ix.cfg
	v := make([]float32, nfeat*classes)
	u := make([]float32, nfeat*ngroups) // u[f*ngroups+t]: shared weight of feature f for group t
	scale := 1.0
	rng := rand.New(rand.NewPCG(1, 2))
	order := make([]int, len(docs))
	for i := range order {
		order[i] = i
	}
	z := make([]float64, classes)
	zg := make([]float64, ngroups) // u_t · x, then the gradient of the loss w.r.t. u_t · x
	accW := make([]float32, classes)
	accC := make([]float32, classes)
	for range epochs {
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, di := range order {
			d := docs[di]
			clear(z)
			clear(zg)
			for i, f := range d.x.ids {
				x := float64(d.x.w[i])
				row := v[int(f)*classes : int(f+1)*classes]
				for c, w := range row {
					z[c] += x * float64(w)
				}
				for t, w := range u[int(f)*ngroups : int(f+1)*ngroups] {
					zg[t] += x * float64(w)
				}
			}
			if ngroups > 0 {
				for c, ts := range groups {
					for _, t := range ts {
						z[c] += cfg.LRGroup * zg[t]
					}
				}
			}
			clear(accW)
			clear(accC)
			accumulate(ix.postWord, d.q.word, accW)
			accumulate(ix.postChar, d.q.char, accC)
			accW[d.class], accC[d.class] = 0, 0
			mx := math.Inf(-1)
			for c := range z {
				z[c] = z[c]*scale + (cfg.Word*float64(accW[c])+cfg.Char*float64(accC[c]))/cfg.LR
				mx = max(mx, z[c])
			}
			z[d.class] += d.own / cfg.LR
			mx = max(mx, z[d.class])
			var sum float64
			for c := range z {
				z[c] = math.Exp(z[c] - mx)
				sum += z[c]
			}
			for c := range z {
				z[c] /= sum
			}
			z[d.class] -= 1 // gradient of the loss w.r.t. the logits
			if ngroups > 0 {
				clear(zg)
				for c, ts := range groups {
					for _, t := range ts {
						zg[t] += cfg.LRGroup * z[c]
					}
				}
			}
			scale *= 1 - cfg.LRRate*cfg.LRL2
			g := cfg.LRRate / scale
			for i, f := range d.x.ids {
				x := float64(d.x.w[i]) * g
				row := v[int(f)*classes : int(f+1)*classes]
				for c := range row {
					if z[c] > 1e-4 || z[c] < -1e-4 {
						row[c] -= float32(x * z[c])
					}
				}
				shared := u[int(f)*ngroups : int(f+1)*ngroups]
				for t := range shared {
					shared[t] -= float32(x * zg[t])
				}
			}
			if scale < 1e-3 {
				for i := range v {
					v[i] *= float32(scale)
				}
				for i := range u {
					u[i] *= float32(scale)
				}
				scale = 1
			}
		}
	}
	for f := range nfeat {
		row := v[f*classes : (f+1)*classes]
		shared := u[f*ngroups : (f+1)*ngroups]
		for c, ts := range groups {
			for _, t := range ts {
				row[c] += float32(cfg.LRGroup * float64(shared[t]))
			}
		}
		for c := range row {
			row[c] *= float32(scale)
		}
	}
	return v
}

// addLogits adds lr × the linear model's logit of each of a few candidates
// (at most directLimit; every skill's are allScores') to scores and returns
// the logits (nil without a model), in sc's buffer.
func (ix *Index) addLogits(q query, ts []token, cands []int, scores []float64, sc *scratch) []float64 {
	m := ix.lin
	if m == nil {
		return nil
	}
	x := ix.linFeaturesInto(m, q, ts, sc)
	out := resize(&sc.candLogits, len(cands))
	for k, c := range cands {
		var s float64
		for i, f := range x.ids {
			s += float64(x.w[i]) * float64(m.w[int(f)*m.classes+c])
		}
		out[k] = s
	}
	for k := range cands {
		scores[k] += ix.cfg.LR * out[k]
	}
	return out
}

// logitsInto sets acc[c] to w_c · x for every class c, summed in float64
// feature by feature in x's order, as addLogits sums a candidate's. It
// walks the weights row by row (one row per feature, classes contiguous),
// four features a pass: acc[c] gets the same additions in the
// same order, with a quarter of the loads and stores of acc and no bounds
// checks in the inner loop. BenchmarkClassify150: addLogits 137 k → 75 k
// instructions a message (callgrind); TestClassifyMatchesPlain holds the
// logits to the per-candidate sum bit for bit.
func (m *linear) logitsInto(acc []float64, x sparse) {
	n := m.classes
	acc = acc[:n]
	clear(acc)
	i := 0
	for ; i+4 <= len(x.ids); i += 4 {
		x0, x1, x2, x3 := float64(x.w[i]), float64(x.w[i+1]), float64(x.w[i+2]), float64(x.w[i+3])
		r0 := m.w[int(x.ids[i])*n:][:len(acc)]
		r1 := m.w[int(x.ids[i+1])*n:][:len(acc)]
		r2 := m.w[int(x.ids[i+2])*n:][:len(acc)]
		r3 := m.w[int(x.ids[i+3])*n:][:len(acc)]
		for c := range acc {
			a := acc[c]
			a += x0 * float64(r0[c])
			a += x1 * float64(r1[c])
			a += x2 * float64(r2[c])
			a += x3 * float64(r3[c])
			acc[c] = a
		}
	}
	for ; i < len(x.ids); i++ {
		xf := float64(x.w[i])
		row := m.w[int(x.ids[i])*n:][:len(acc)]
		for c := range acc {
			acc[c] += xf * float64(row[c])
		}
	}
}
