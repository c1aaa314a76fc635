// Package classifier ranks a registry's skills against a message text with a lexical model and a calibrated confidence.
package classifier

// The model, in short (docs/routing.md has the figures and the tuning):
//
//   - Text is split into lower-case words, contractions are expanded
//     ("what's" → "what is", "dont" → "do not") and words are stemmed with
//     Porter2 (Snowball English).
//   - Two feature spaces: stemmed words, and character 2–3-grams of each
//     unstemmed word padded with boundary marks ("<card>": "<c", "<ca",
//     "ca", …), which tolerates typos and inflections the stemmer misses.
//   - A skill's document is its name (weighted ×4), its tags and its
//     examples; the templated description adds nothing the name does not
//     and is left out. Terms are weighted by sublinear tf × idf, with idf
//     computed over skills and offset so that frequent words still count.
//   - The message's words are expanded with WordNet-related words
//     (synonyms and derivations, weight 0.5) that some skill uses.
//   - A skill's cosine score is the sum of the cosine similarities between
//     the message and its document in both spaces. Query words unknown to
//     every skill still count in the message's norm (×1.5), which pulls
//     scores of out-of-scope messages down.
//   - On top of it, a multinomial logistic regression over the message's
//     word, char n-gram and word-bigram features, trained when the index is
//     built on each skill's name and examples (leave-one-out cosine as the
//     offset, see linear.go): score = cosine + 0.3 · logit. Skipped for
//     registries too large to train within about a second.
//   - The confidence is a logistic function of the best candidate's softmax
//     probability among the candidates, its score, its margin over the
//     second, how much of its name the message has, how much of the message
//     the vocabulary knows, its best cosine with a single example, and the
//     regression's own probability and logit margin. It was fitted on the
//     tuning data to estimate the chance that the best candidate is right,
//     with all 150 skills as candidates. A correction added to its logit
//     keeps it meaningful for a few candidates or a small registry: it
//     compares the best candidate with every indexed skill (a message meant
//     for a skill the caller may not use is clarified) and discounts the
//     features that inflate when there are few candidates; it is 0 with
//     150 or more skills all candidates, and was fitted on small candidate
//     sets drawn from the tuning data (test/routetune).

import (
	"math"
	"slices"
	"strings"
	"sync"
)

// Doc is what the classifier reads of one skill.
type Doc struct {
	ID          string
	Name        string
	Description string
	Tags        []string
	Examples    []string
}

// Score is one skill's score for a message.
type Score struct {
	ID    string
	Score float64
}

// Result is the classifier's answer for one message.
type Result struct {
	// Best is the highest-scoring candidate, "" when no candidate shares
	// anything with the message.
	Best string
	// Confidence in [0,1] that Best is the skill the message is meant for,
	// among the candidates (a message that fits a non-candidate skill
	// better, or none, scores low); 0 when Best is "".
	Confidence float64
	// Ranked holds the top candidates (at most RankedLen), best first.
	Ranked []Score
}

// RankedLen is the most candidates a Result lists.
const RankedLen = 5

// Config holds the model's parameters. New uses DefaultConfig, the set tuned
// on the CLINC150 dev data (docs/routing.md, "How it was tuned"); the other
// values exist to tune it (test/routetune sweeps the weights and fits the
// three coefficient vectors) and for tests of the fallbacks, not for
// deployments, which have no setting for them.
type Config struct {
	// NameWeight, DescWeight and TagWeight weigh the fields of a skill's
	// document; examples weigh 1.
	NameWeight, DescWeight, TagWeight float64
	// CharMin and CharMax are the character n-gram lengths.
	CharMin, CharMax int
	// IDFOffset is added to every idf: idf = ln((N+1)/(df+1)) + IDFOffset.
	IDFOffset float64
	// Unknown weighs the query terms unknown to every skill in the query
	// norm.
	Unknown float64
	// Word and Char weigh the two cosines: score = Word·cosWord + Char·cosChar.
	Word, Char float64
	// Related weighs the WordNet-related stems added to the message.
	Related float64
	// Temperature is the softmax temperature over candidate scores
	// (confidence features 1 and 9).
	Temperature float64
	// Conf are the coefficients of the confidence: σ(Conf · Features).
	Conf Features
	// The linear model on top of the cosine (linear.go): score += LR ·
	// logit, trained for LREpochs epochs (0: not trained) at rate LRRate
	// with L2 penalty LRL2; LRBigram weighs its word-bigram block.
	LR, LRRate, LRL2 float64
	LREpochs         int
	LRBigram         float64
	// LRGroup weighs the weights shared by the skills of a tag (linear.go,
	// tagGroups); 0 leaves them out.
	LRGroup float64
	// Build time and memory: LRMaxWork bounds epochs × features of all
	// training docs × skills × 2 (fewer epochs are run when LREpochs would
	// exceed it; below 2, training is skipped), LRMaxWeights the weight
	// matrix (above it, training is skipped).
	LRMaxWork    float64
	LRMaxWeights int
	// Embed weighs the linear model's word-vector block (vectors.go): the
	// message's mean word vector (GloVe, wordvec), each word weighted
	// r / (r + EmbedRank) by its frequency rank r, L2-normalised; 0 leaves
	// the block out.
	Embed, EmbedRank float64
	// ConfCos replaces Conf when no linear model was trained (Trained).
	ConfCos Features
	// Global scores every skill even for a few candidates (confidence
	// features 9, 10).
	Global bool
	// Outside bounds the confidence by 1 − the whole index's confidence in
	// its best skill when that skill is not a candidate (result).
	Outside bool
	// Corr are the coefficients of the small-set correction added to the
	// confidence logit (Corrections); fitted with the linear model, used
	// without it too (its terms on the linear model's features are then 0).
	Corr Corrections
}

// DefaultConfig returns the parameters New uses.
func DefaultConfig() Config {
	return Config{
		NameWeight: 4, DescWeight: 0, TagWeight: 1,
		CharMin: 2, CharMax: 3,
		IDFOffset: 2, Unknown: 1.5,
		Word: 1, Char: 1,
		Related:     0.5,
		Temperature: 0.05,
		Conf:        Features{-3.498, 2.295, 0.205, 4.123, 1.044, -0.829, 0.364, 0.834, -0.446},
		LR:          0.3, LREpochs: 10, LRRate: 0.5, LRL2: 1e-4, LRBigram: 1, LRGroup: 0.7,
		LRMaxWork: 2e9, LRMaxWeights: 1 << 24,
		Embed: 1, EmbedRank: 3000,
		ConfCos: Features{-1.881, 0.985, -1.012, 7.989, 1.245, -0.384, 2.164, 0, 0},
		Global:  true, Outside: true,
		Corr: Corrections{1.857, 5.315, 0.180, 0.346, 0.565, -0.528, 0.002, -0.459, 0.414, 0.919,
			-1.138, 0.564, 0.208, -0.409},
	}
}

// Index is a classifier built once per registry load. It is immutable and
// safe for concurrent use.
type Index struct {
	cfg  Config
	ids  []string
	byID map[string]int

	word, char         space
	skillWord          []sparse // skill documents, word space
	skillChar          []sparse // skill documents, char space
	postWord, postChar []sparse // the same by term (postings)
	names              []sparse // name stems, coverage weights
	examples           []sparse // examples, word space
	exStart            []int32  // skill → its first example; contiguous
	lin                *linear  // nil when not trained
	all                []int    // every position, in order; read only
	// stems are the stems of every word of the skill documents (the
	// build's memo), read only: a message's words are mostly among them.
	stems map[string]string

	scratch sync.Pool // *scratch (query.go)
}

// New builds an index over docs; doc i is candidate i in Classify. A later
// doc with an ID already seen is indexed, but Lookup finds the first.
func New(docs []Doc) *Index {
	return NewWithConfig(docs, DefaultConfig())
}

// NewWithConfig is New with other parameters than DefaultConfig's.
func NewWithConfig(docs []Doc, cfg Config) *Index {
	ix := &Index{
		cfg:     cfg,
		ids:     make([]string, len(docs)),
		byID:    make(map[string]int, len(docs)),
		exStart: make([]int32, len(docs)+1),
	}
	relatedStems() // parse the table now rather than in the first Classify
	memo := make(map[string]string)
	wordBags := make([]bag, len(docs))
	charBags := make([]bag, len(docs))
	nameBags := make([]bag, len(docs))
	var exBags []bag
	exToks := make([][][]token, len(docs))
	nameToks := make([][]token, len(docs))
	for i, d := range docs {
		ix.ids[i] = d.ID
		if _, ok := ix.byID[d.ID]; !ok {
			ix.byID[d.ID] = i
		}
		ix.exStart[i] = int32(len(exBags))
		wb, cb := bag{}, bag{}
		add := func(text string, weight float64) []token {
			ts := tokens(text, memo)
			if weight > 0 {
				addWords(wb, ts, weight)
				addChars(cb, ts, cfg.CharMin, cfg.CharMax, weight)
			}
			return ts
		}
		nameBags[i] = bag{}
		nameToks[i] = add(d.Name, cfg.NameWeight)
		addWords(nameBags[i], nameToks[i], 1)
		add(d.Description, cfg.DescWeight)
		for _, t := range d.Tags {
			add(t, cfg.TagWeight)
		}
		for _, e := range d.Examples {
			ts := add(e, 1)
			if len(ts) > 0 {
				exToks[i] = append(exToks[i], ts)
				eb := bag{}
				addWords(eb, ts, 1)
				exBags = append(exBags, eb)
			}
		}
		wordBags[i], charBags[i] = wb, cb
	}
	ix.exStart[len(docs)] = int32(len(exBags))

	ix.word = newSpace(wordBags, cfg.IDFOffset, cfg.Unknown)
	ix.char = newSpace(charBags, cfg.IDFOffset, cfg.Unknown)
	ix.skillWord = make([]sparse, len(docs))
	ix.skillChar = make([]sparse, len(docs))
	ix.names = make([]sparse, len(docs))
	for i := range docs {
		ix.skillWord[i] = ix.word.vector(wordBags[i], false)
		ix.skillChar[i] = ix.char.vector(charBags[i], false)
		ix.names[i] = ix.word.coverage(nameBags[i])
	}
	ix.examples = make([]sparse, len(exBags))
	for e, b := range exBags {
		ix.examples[e] = ix.word.vector(b, false)
	}
	ix.postWord = postings(ix.skillWord, len(ix.word.idf))
	ix.postChar = postings(ix.skillChar, len(ix.char.idf))
	groups, ngroups := tagGroups(docs)
	ix.lin = ix.train(exToks, nameToks, wordBags, charBags, groups, ngroups)
	ix.stems = memo
	ix.all = make([]int, len(docs))
	for i := range ix.all {
		ix.all[i] = i
	}
	return ix
}

func addWords(b bag, ts []token, weight float64) {
	for _, t := range ts {
		b[fnv64('w', t.stem)] += weight
	}
}

// addChars adds the lo–hi character n-grams of each word padded as
// "<word>".
func addChars(b bag, ts []token, lo, hi int, weight float64) {
	var buf []byte
	for _, t := range ts {
		buf = append(buf[:0], '<')
		buf = append(buf, t.word...)
		buf = append(buf, '>')
		s := string(buf)
		for n := lo; n <= hi; n++ {
			for i := 0; i+n <= len(s); i++ {
				b[fnv64('c', s[i:i+n])] += weight
			}
		}
	}
}

// Len returns the number of docs indexed.
func (ix *Index) Len() int { return len(ix.ids) }

// Lookup returns the position of the doc with the given ID.
func (ix *Index) Lookup(id string) (int, bool) {
	i, ok := ix.byID[id]
	return i, ok
}

// directLimit is the candidate count up to which scores are computed by
// merge-joining the message with each candidate's vectors rather than by
// walking the postings of every message term over the whole index.
const directLimit = 16

// Classify ranks the candidates (positions of the docs given to New; nil
// means all) for text. Positions out of range and repeats are ignored. The
// ranking is over the candidates only; the confidence also compares the best
// candidate with every indexed skill.
func (ix *Index) Classify(text string, candidates []int) Result {
	sc := ix.getScratch()
	defer ix.putScratch(sc)
	return ix.classify(text, candidates, sc)
}

// classify is Classify with sc as working memory; a nil sc means a fresh
// one, owned by the result.
func (ix *Index) classify(text string, candidates []int, sc *scratch) Result {
	cands, scores, q := ix.scores(text, candidates, sc)
	if scores == nil {
		return Result{}
	}
	return ix.result(cands, scores, q)
}

// Explanation is what the confidence in the best candidate for one message
// is computed from: σ(Conf · Features + Corr · Features.Corrections()),
// before the out-of-domain and outside-candidate rules of Classify.
type Explanation struct {
	// Best is the highest-scoring candidate, as in Result.
	Best string
	// Features are the confidence's inputs.
	Features Features
}

// Explain ranks the candidates for text as Classify does and returns the
// best one with its confidence features; false when Classify's Best would
// be "" (no candidate shares anything with the message). The confidence's
// coefficients are fitted on these (test/routetune).
func (ix *Index) Explain(text string, candidates []int) (Explanation, bool) {
	sc := ix.getScratch()
	defer ix.putScratch(sc)
	return ix.explanation(ix.scores(text, candidates, sc))
}

// explanation is Explain's answer for the candidates' scores of a message q.
func (ix *Index) explanation(cands []int, scores []float64, q query) (Explanation, bool) {
	if scores == nil {
		return Explanation{}, false
	}
	order := rankOrder(cands, scores)
	if scores[order[0]] <= 0 {
		return Explanation{}, false
	}
	return Explanation{Best: ix.ids[cands[order[0]]], Features: ix.features(cands, scores, order, q)}, true
}

// Trained reports whether the index trained its linear model: not when
// Config.LREpochs is 0 or the registry is too large (Config.LRMaxWork,
// LRMaxWeights). Without it the confidence's coefficients are
// Config.ConfCos and features 7, 8 and 10 are 0.
func (ix *Index) Trained() bool { return ix.lin != nil }

// query is a message's vectors in both spaces.
type query struct {
	word, char sparse
	logit      []float64  // linear model's logit per candidate; nil without a model
	global     *allScored // every skill's score, when the candidates are a strict subset
	// content says whether a word of the message other than a function
	// word is in the vocabulary; when none is, over a small candidate set,
	// the message says nothing about any skill ("what's the weather in
	// Paris" among invoice skills matches on "what is the" only) and the
	// result's confidence is 0.
	content bool
}

// scores returns the cleaned candidates, their scores and the message's
// vectors, or nil scores when there is nothing to rank. When the candidates
// are a strict subset of the index, q.global holds every skill's score too
// (the confidence compares the best candidate with the whole registry).
// The candidates, the scores and what q holds are sc's buffers, valid until
// sc is used again; a nil sc means a fresh one, owned by the caller.
func (ix *Index) scores(text string, candidates []int, sc *scratch) ([]int, []float64, query) {
	if sc == nil {
		sc = ix.newScratch()
	}
	if candidates == nil {
		candidates = ix.all
	} else {
		candidates = ix.clean(candidates, sc)
	}
	if len(candidates) == 0 || strings.TrimSpace(text) == "" {
		return nil, nil, query{}
	}
	ts := sc.tokensOf(text, ix.stems)
	q := ix.vectorizeInto(ts, sc)
	if len(q.word.ids) == 0 && len(q.char.ids) == 0 {
		return nil, nil, query{}
	}
	q.content = ix.knowsContent(ts)
	scores := resize(&sc.scores, len(candidates))
	subset := len(candidates) < len(ix.ids)
	if len(candidates) > directLimit || subset && ix.cfg.Global {
		// Every skill is scored (through the postings), the candidates'
		// scores taken from them: for a few candidates too when the
		// confidence needs every skill's (Global). A candidate's score is
		// the same arithmetic either way: its cosines summed in float32 over
		// the message's terms in id order, as dot sums them, and its logit
		// in float64 over the features in order (logitsInto), so scoring
		// once gives the direct path's scores bit for bit
		// (TestClassifyMatchesPlain).
		g := ix.allScores(q, ts, sc)
		for k, c := range candidates {
			scores[k] = g.scores[c]
		}
		if g.logit != nil {
			q.logit = resize(&sc.candLogits, len(candidates))
			for k, c := range candidates {
				q.logit[k] = g.logit[c]
			}
		}
		if subset {
			q.global = g
		}
		return candidates, scores, q
	}
	for k, c := range candidates {
		scores[k] = ix.cfg.Word*float64(q.word.dot(ix.skillWord[c])) +
			ix.cfg.Char*float64(q.char.dot(ix.skillChar[c]))
	}
	q.logit = ix.addLogits(q, ts, candidates, scores, sc)
	return candidates, scores, q
}

// allScored is every skill's score for a message, by position.
type allScored struct {
	scores []float64
	logit  []float64 // nil without a linear model
}

// allScores scores every skill through the postings lists, in sc's
// buffers.
func (ix *Index) allScores(q query, ts []token, sc *scratch) *allScored {
	buf := sc.acc
	clear(buf)
	accW, accC := buf[:len(ix.ids)], buf[len(ix.ids):]
	accumulate(ix.postWord, q.word, accW)
	accumulate(ix.postChar, q.char, accC)
	g := &sc.global
	g.scores = resize(&g.scores, len(ix.ids))
	for c := range g.scores {
		g.scores[c] = ix.cfg.Word*float64(accW[c]) + ix.cfg.Char*float64(accC[c])
	}
	g.logit = nil
	if m := ix.lin; m != nil {
		m.logitsInto(sc.logits, ix.linFeaturesInto(m, q, ts, sc))
		g.logit = sc.logits
		for c := range g.scores {
			g.scores[c] += ix.cfg.LR * g.logit[c]
		}
	}
	return g
}

// clean drops out-of-range positions and repeats, keeping order, in sc's
// buffer.
func (ix *Index) clean(cands []int, sc *scratch) []int {
	out, seen := sc.cands[:0], sc.seen
	for _, c := range cands {
		if c < 0 || c >= len(ix.ids) || seen[c] {
			continue
		}
		seen[c] = true
		out = append(out, c)
	}
	for _, c := range out {
		seen[c] = false
	}
	sc.cands = out
	return out
}

// result ranks the scored candidates and computes the confidence.
func (ix *Index) result(cands []int, scores []float64, q query) Result {
	order := rankOrder(cands, scores)
	if scores[order[0]] <= 0 {
		return Result{}
	}
	ft := ix.features(cands, scores, order, q)
	b := ix.cfg.Conf
	if ix.lin == nil {
		b = ix.cfg.ConfCos
	}
	var z float64
	for i := range ft {
		z += b[i] * ft[i]
	}
	c := ix.cfg.Corr
	d := ft.Corrections()
	for i := range d {
		z += c[i] * d[i]
	}
	res := Result{
		Best:       ix.ids[cands[order[0]]],
		Confidence: 1 / (1 + math.Exp(-z)),
	}
	if !q.content && len(cands) < refSize && ft[6] < outOfDomainExample {
		// Over a small candidate set nothing but function words matched
		// and no example is close: out of domain, whatever the features
		// inflated by few candidates say (docs/routing.md).
		res.Confidence = 0
	}
	if g := q.global; g != nil && ix.cfg.Outside && res.Confidence > 0 {
		// The message may fit a skill that is not a candidate (one the
		// caller may not use) better than any candidate. The chance that the
		// best candidate is right is at most the chance that the best skill
		// of the whole index is wrong: when that one is not a candidate,
		// the confidence is bounded by 1 − its own (docs/routing.md).
		gq := q
		gq.logit, gq.global = g.logit, nil
		if gr := ix.result(ix.all, g.scores, gq); gr.Best != "" && !slices.Contains(cands, ix.byID[gr.Best]) {
			res.Confidence = min(res.Confidence, 1-gr.Confidence)
		}
	}
	n := min(RankedLen, len(order))
	res.Ranked = make([]Score, n)
	for i := range n {
		res.Ranked[i] = Score{ID: ix.ids[cands[order[i]]], Score: scores[order[i]]}
	}
	return res
}

// outOfDomainExample is the best-example word cosine under which a message
// whose content words are all unknown is out of domain (see result).
const outOfDomainExample = 0.5

// knowsContent reports whether the vocabulary holds the stem of a word of
// ts that is not a function word (functionWords).
func (ix *Index) knowsContent(ts []token) bool {
	for _, t := range ts {
		if functionWords[t.word] {
			continue
		}
		if _, ok := ix.word.table.lookup(fnv64('w', t.stem)); ok {
			return true
		}
	}
	return false
}

// functionWords are English words that carry no topic: articles,
// pronouns, prepositions, conjunctions, auxiliaries, question words (after
// contraction expansion, so "what's" is "what is").
var functionWords = func() map[string]bool {
	m := map[string]bool{}
	for w := range strings.FieldsSeq(`a an the and or but nor if so than then of in on at to for from by
		with without about as into onto over under up down out off
		i me my mine myself we us our ours you your yours he him his she her hers it its they them their theirs
		this that these those there here
		what which who whom whose when where why how
		is are was were be been being am do does did doing done have has had having
		can could would should will shall may might must not no
		please just very too also some any all each every`) {
		m[w] = true
	}
	return m
}()

// rankOrder returns the positions of the (at most RankedLen) best scores,
// by descending score, ties by candidate position so that results are
// deterministic. It selects rather than sorts: candidates can be thousands.
func rankOrder(cands []int, scores []float64) []int {
	before := func(a, b int) bool {
		return scores[a] > scores[b] || scores[a] == scores[b] && cands[a] < cands[b]
	}
	top := make([]int, 0, RankedLen)
	for i := range scores {
		if len(top) == RankedLen && !before(i, top[len(top)-1]) {
			continue
		}
		if len(top) < RankedLen {
			top = append(top, i)
		} else {
			top[len(top)-1] = i
		}
		for k := len(top) - 1; k > 0 && before(top[k], top[k-1]); k-- {
			top[k], top[k-1] = top[k-1], top[k]
		}
	}
	return top
}

// Features are the inputs of the confidence logistic for one message, or
// its coefficients (Config.Conf, Config.ConfCos):
//
//	0: 1 (bias)
//	1: softmax probability of the best candidate among the candidates
//	2: best score
//	3: best score minus the second (the best score, alone)
//	4: idf-weighted share of the best skill's name stems in the message
//	5: share of the message's word vector (squared) that the vocabulary knows
//	6: best word cosine between the message and one of the best skill's examples
//	7: the linear model's softmax probability of the best among the candidates
//	8: its logit minus the highest other candidate's (7 and 8 are 0 without it)
//	9: softmax probability of the best candidate among all indexed skills
//	10: the linear model's softmax probability of it among all skills
//	11: ln(number of candidates)
//	12: ln(number of indexed skills)
type Features [13]float64

func (ix *Index) features(cands []int, scores []float64, order []int, q query) Features {
	s1 := scores[order[0]]
	s2 := 0.0
	if len(order) > 1 {
		s2 = scores[order[1]]
	}
	var z float64
	for _, s := range scores {
		if d := (s - s1) / ix.cfg.Temperature; d > -40 {
			z += math.Exp(d)
		}
	}
	best := cands[order[0]]
	var known float64
	for _, w := range q.word.w {
		known += float64(w) * float64(w)
	}
	var ex float32
	for e := ix.exStart[best]; e < ix.exStart[best+1]; e++ {
		ex = max(ex, q.word.dot(ix.examples[e]))
	}
	name := q.word.dotOnes(ix.names[best])
	var lp, lm float64
	if q.logit != nil {
		l1 := q.logit[order[0]]
		var zl float64
		l2 := math.Inf(-1)
		for k, l := range q.logit {
			if d := l - l1; d > -40 {
				zl += math.Exp(d)
			}
			if k != order[0] {
				l2 = max(l2, l)
			}
		}
		lp = 1 / zl
		if len(q.logit) > 1 {
			lm = l1 - l2
		}
	}
	gp, glp := 1/z, lp
	if g := q.global; g != nil {
		gp = softmaxOf(g.scores, s1, ix.cfg.Temperature)
		if g.logit != nil {
			glp = softmaxOf(g.logit, q.logit[order[0]], 1)
		}
	}
	return Features{1, 1 / z, s1, s1 - s2, float64(name), known, float64(ex), lp, lm,
		gp, glp, math.Log(float64(len(cands))), math.Log(float64(len(ix.ids)))}
}

// refSize is the number of skills the confidence coefficients were fitted
// with (all 150 CLINC150 skills as candidates).
const refSize = 150

// Corrections are the inputs of the small-set correction added to the
// confidence logit, or its coefficients (Config.Corr). All are 0 when the candidates are
// the whole index and it has at least refSize skills, so the correction
// leaves the 150-way calibration as it was. With a = max(0, ln refSize −
// ln candidates) and f the Features:
//
//	0: f9 − f1 (global minus candidate softmax probability)
//	1: f10 − f7 (the same for the linear model)
//	2: a
//	3–9: a × f1, f2, f3, f4, f5, f6, f7
//	10: b = max(0, ln refSize − ln indexed skills)
//	11–13: b × f4, f5, f7
type Corrections [14]float64

// Corrections returns the small-set correction's inputs for the features f.
func (f Features) Corrections() Corrections {
	a := max(0, math.Log(refSize)-f[11])
	c := Corrections{f[9] - f[1], f[10] - f[7], a,
		a * f[1], a * f[2], a * f[3], a * f[4], a * f[5], a * f[6], a * f[7],
		0, 0, 0, 0}
	b := max(0, math.Log(refSize)-f[12])
	c[10], c[11], c[12], c[13] = b, b*f[4], b*f[5], b*f[7]
	return c
}

// softmaxOf returns exp(v/t) / Σ exp(x/t) over xs (v need not be in xs).
func softmaxOf(xs []float64, v, t float64) float64 {
	mx := v
	for _, x := range xs {
		mx = max(mx, x)
	}
	var z float64
	for _, x := range xs {
		if d := (x - mx) / t; d > -40 {
			z += math.Exp(d)
		}
	}
	return math.Exp((v-mx)/t) / z
}
