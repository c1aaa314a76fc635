package classifier

import (
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireSameVector compares two sparse vectors component by component
// (bit-exact weights); an empty vector equals a nil one.
func requireSameVector(t *testing.T, want, got sparse, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, slices.Clip(want.ids), slices.Clip(append([]int32(nil), got.ids...)), msgAndArgs...)
	require.Equal(t, len(want.w), len(got.w), msgAndArgs...)
	for i := range want.w {
		require.Equal(t, want.w[i], got.w[i], msgAndArgs...)
	}
}

// routingTexts are the texts the differential tests run over: edge cases,
// every message of the tuning set (dev.jsonl), and every name,
// description, tag and example of the routing manifests.
func routingTexts(docs []Doc, cases []Case) []string {
	texts := []string{"", "?!", "what's the weather in Paris", "can't won't shouldn't", "cafés and naïve résumés"}
	for _, c := range cases {
		texts = append(texts, c.Text)
	}
	for _, d := range docs {
		texts = append(texts, d.Name, d.Description)
		texts = append(texts, d.Tags...)
		texts = append(texts, d.Examples...)
	}
	return texts
}

// TestVectorsMatchPlain is the differential test of the message
// vectoriser: built from term lists in pooled buffers, a message's tokens,
// vectors and linear features equal, bit for bit, those built from map
// bags as the index build does (plain_test.go), over the tuning set and
// the manifests' texts, one scratch reused across all of them as the pool
// does.
func TestVectorsMatchPlain(t *testing.T) {
	docs, cases := loadData(t)
	ix := New(docs)
	require.NotNil(t, ix.lin)
	sc := ix.getScratch()
	for _, text := range routingTexts(docs, cases) {
		ts := tokens(text, nil)
		require.Equal(t, slices.Clip(append([]token(nil), ts...)), slices.Clip(append([]token(nil), sc.tokensOf(text, ix.stems)...)), "tokens of %q", text)
		plain := ix.vectorizePlain(ts)
		fast := ix.vectorizeInto(ts, sc)
		requireSameVector(t, plain.word, fast.word, "word vector of %q", text)
		requireSameVector(t, plain.char, fast.char, "char vector of %q", text)
		requireSameVector(t, ix.linFeaturesPlain(ix.lin, plain, ts), ix.linFeaturesInto(ix.lin, fast, ts, sc), "linear features of %q", text)
	}
}

// TestScoresMatchPlain: every skill's score (cosine and linear model) for
// every text of the tuning set and the manifests equals the plain
// vectoriser's with plain dot products, through the postings walk (all
// skills, and more than directLimit candidates) and through the direct
// path (a few candidates); on an index with a linear model and one
// without. Training reads the manifests' texts through the same
// vectoriser, whose vectors TestVectorsMatchPlain holds to the plain ones,
// so the weights are those the map-built vectors gave; a second build
// gives the same weights.
func TestScoresMatchPlain(t *testing.T) {
	docs, cases := loadData(t)
	cosineOnly := DefaultConfig()
	cosineOnly.LREpochs = 0
	for name, ix := range map[string]*Index{"150 skills": New(docs), "150 skills, cosine only": NewWithConfig(docs, cosineOnly)} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(23, 3))
			sc := ix.getScratch()
			n := ix.Len()
			for _, text := range routingTexts(docs, cases) {
				want := ix.scoresPlain(text)
				for _, cands := range [][]int{nil, rng.Perm(n)[:directLimit+4], rng.Perm(n)[:5]} {
					got, scores, _ := ix.scores(text, cands, sc)
					if want == nil {
						require.Nil(t, scores, "%q has no vector", text)
						continue
					}
					require.Len(t, scores, len(got), "%q", text)
					for k, c := range got {
						require.Equal(t, want[c], scores[k], "%q, skill %d of %d candidates", text, c, len(got))
					}
				}
			}
			if ix.lin != nil {
				require.Equal(t, ix.lin.w, New(docs).lin.w)
			}
		})
	}
}

// TestClassifyPooledMatchesFresh: over the dev set (and the indexes a
// large registry and a small one get: without a linear model, and with
// few candidates), Classify with pooled working memory and classify with a
// fresh scratch give identical results: best, confidence, ranked ids and
// scores (nothing of one call's scratch leaks into the next).
func TestClassifyPooledMatchesFresh(t *testing.T) {
	docs, cases := loadData(t)
	cosineOnly := DefaultConfig()
	cosineOnly.LREpochs = 0
	indexes := map[string]*Index{
		"150 skills":               New(docs),
		"150 skills, cosine only":  NewWithConfig(docs, cosineOnly),
		"12 skills (direct paths)": New(docs[:12]),
	}
	rng := rand.New(rand.NewPCG(16, 3))
	for name, ix := range indexes {
		t.Run(name, func(t *testing.T) {
			n := ix.Len()
			reversed := make([]int, n)
			for i := range reversed {
				reversed[i] = n - 1 - i
			}
			step := 1
			if n == 150 && name != "150 skills" {
				step = 3 // the cosine-only index on a third of the cases
			}
			for i := 0; i < len(cases); i += step {
				text := cases[i].Text
				sets := [][]int{
					nil,
					reversed, // every skill, as the router passes them
					{rng.IntN(n), rng.IntN(n), rng.IntN(n), -1, n, rng.IntN(n)}, // out of range, maybe repeats
					rng.Perm(n)[:min(n, 20)],                                    // more than directLimit
				}
				for _, cands := range sets {
					want := ix.classify(text, cands, nil)
					got := ix.Classify(text, cands)
					require.Equal(t, want, got, "%q over %v", text, cands)
				}
			}
		})
	}
}

// TestClassifyPooledConcurrent classifies different messages over
// different candidate sets at once: pooled scratch never leaks between
// calls (each result equals a fresh scratch's). Run with -race.
func TestClassifyPooledConcurrent(t *testing.T) {
	ix := New(synthDocs(100, 5))
	texts := synthQueries(synthDocs(100, 5), 40, 6)
	sets := [][]int{nil, {1, 2, 3, 4, 5}, {7, 7, 99, 150, -1, 42}}
	want := make([][]Result, len(texts))
	for i, text := range texts {
		for _, cands := range sets {
			want[i] = append(want[i], ix.classify(text, cands, nil))
		}
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for k := range 3 * len(texts) {
				i := (k*7 + g) % len(texts)
				s := (k + g) % len(sets)
				if got := ix.Classify(texts[i], sets[s]); !reflect.DeepEqual(want[i][s], got) {
					t.Errorf("%q over %v: got %+v, want %+v", texts[i], sets[s], got, want[i][s])
					return
				}
			}
		})
	}
	wg.Wait()
}

// candidateSets returns the candidate sets TestClassifyMatchesPlain runs
// each text over, for an index of n skills: all (nil, in order, reversed),
// random subsets of sizes around directLimit and far from it, one skill,
// and a set with repeats and positions out of range.
func candidateSets(rng *rand.Rand, n int) [][]int {
	all := make([]int, n)
	reversed := make([]int, n)
	for i := range all {
		all[i], reversed[i] = i, n-1-i
	}
	sets := [][]int{nil, all, reversed, {}}
	for _, size := range []int{1, 2, 3, 7, directLimit - 1, directLimit, directLimit + 1, 2 * directLimit, n / 2, n - 1} {
		if size >= 1 && size <= n {
			sets = append(sets, rng.Perm(n)[:size])
		}
	}
	return append(sets, []int{rng.IntN(n), -1, rng.IntN(n), n, rng.IntN(n), rng.IntN(n)})
}

// sample returns every n-th of texts.
func sample(texts []string, n int) []string {
	var out []string
	for i := 0; i < len(texts); i += n {
		out = append(out, texts[i])
	}
	return out
}

// requireSameResult compares two results bit for bit (a float compared by
// its bits: == would take -0 for +0).
func requireSameResult(t *testing.T, want, got Result, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, want.Best, got.Best, msgAndArgs...)
	require.Equal(t, math.Float64bits(want.Confidence), math.Float64bits(got.Confidence), msgAndArgs...)
	require.Equal(t, len(want.Ranked), len(got.Ranked), msgAndArgs...)
	for i := range want.Ranked {
		require.Equal(t, want.Ranked[i].ID, got.Ranked[i].ID, msgAndArgs...)
		require.Equal(t, math.Float64bits(want.Ranked[i].Score), math.Float64bits(got.Ranked[i].Score), msgAndArgs...)
	}
}

// TestClassifyMatchesPlain is the differential test of the whole
// classification: Classify and Explain give, bit for bit, the result and
// the confidence features of the plain reference (plain_test.go: map-built
// vectors, one dot product and one logit sum per candidate, every skill
// scored again when the confidence needs them) for every message of the
// tuning set and every candidate set of candidateSets; on the 150-skill
// index, the same without a linear model and without Config.Global, and the
// finance example's registry (under the race detector, every 20th message).
func TestClassifyMatchesPlain(t *testing.T) {
	docs, cases := loadData(t)
	cosineOnly := DefaultConfig()
	cosineOnly.LREpochs = 0
	local := DefaultConfig()
	local.Global = false
	texts := routingTexts(nil, cases)
	if raceEnabled {
		texts = append(texts[:5:5], sample(texts[5:], 20)...) // the edge cases, and every 20th message
	}
	indexes := []struct {
		name  string
		ix    *Index
		texts []string
	}{
		{"150 skills", New(docs), texts},
		{"150 skills, cosine only", NewWithConfig(docs, cosineOnly), texts},
		{"150 skills, not global", NewWithConfig(docs, local), texts},
		{"finance", financeIndex(t), append(slices.Clip(texts[:min(500, len(texts))]), "look up invoice INV-1", "extract the fields from this invoice",
			"has invoice INV-77 been paid", "hello there", "reconcile invoice INV-3 against its PO")},
	}
	for _, x := range indexes {
		t.Run(x.name, func(t *testing.T) {
			ix := x.ix
			rng := rand.New(rand.NewPCG(33, 6))
			for _, text := range x.texts {
				for _, cands := range candidateSets(rng, ix.Len()) {
					requireSameResult(t, ix.classifyPlain(text, cands), ix.Classify(text, cands), "%q over %v", text, cands)
					want, wok := ix.explainPlain(text, cands)
					got, ok := ix.Explain(text, cands)
					require.Equal(t, wok, ok, "%q over %v", text, cands)
					require.Equal(t, want.Best, got.Best, "%q over %v", text, cands)
					for i := range want.Features {
						require.Equal(t, math.Float64bits(want.Features[i]), math.Float64bits(got.Features[i]),
							"%q over %v: feature %d", text, cands, i)
					}
				}
			}
		})
	}
}

// BenchmarkClassify150Restricted classifies the dev messages over a few
// of the 150 skills (a caller entitled to a handful): the candidates
// scored, and every skill for the confidence (Config.Global).
func BenchmarkClassify150Restricted(b *testing.B) {
	docs, cases := loadData(b)
	ix := New(docs)
	cands := []int{3, 14, 15, 92, 65, 35, 89, 79}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ix.Classify(cases[i%len(cases)].Text, cands)
		i++
	}
}

// TestSpaceVectorsMatchPlain: the index build's vectors (vectorOf over a
// map bag) equal the plain loop's (vectorPlain) bit for bit, for each
// skill's document in both spaces as NewWithConfig builds it, each of its
// examples, and its document without one of its texts as training scores
// it (leave one out); and an index's skill and example vectors are those.
func TestSpaceVectorsMatchPlain(t *testing.T) {
	docs, _ := loadData(t)
	ix := New(docs)
	cfg := ix.cfg
	e := 0
	for i, d := range docs {
		wb, cb := bag{}, bag{}
		add := func(text string, weight float64) []token {
			ts := tokens(text, nil)
			addWords(wb, ts, weight)
			addChars(cb, ts, cfg.CharMin, cfg.CharMax, weight)
			return ts
		}
		add(d.Name, cfg.NameWeight)
		for _, tag := range d.Tags {
			add(tag, cfg.TagWeight)
		}
		var exs [][]token
		for _, x := range d.Examples {
			if ts := add(x, 1); len(ts) > 0 {
				exs = append(exs, ts)
			}
		}
		requireSameVector(t, ix.word.vectorPlain(wb, false), ix.skillWord[i], "word vector of %s", d.ID)
		requireSameVector(t, ix.char.vectorPlain(cb, false), ix.skillChar[i], "char vector of %s", d.ID)
		for _, ts := range exs {
			eb := bag{}
			addWords(eb, ts, 1)
			requireSameVector(t, ix.word.vectorPlain(eb, false), ix.examples[e], "example %d of %s", e, d.ID)
			requireSameVector(t, ix.word.vectorPlain(eb, true), ix.word.vector(eb, true), "example %d of %s as a query", e, d.ID)
			e++
			lw, lc := maps.Clone(wb), maps.Clone(cb)
			addWords(lw, ts, -1)
			addChars(lc, ts, cfg.CharMin, cfg.CharMax, -1)
			maps.DeleteFunc(lw, func(_ uint64, v float64) bool { return v < 1e-9 })
			maps.DeleteFunc(lc, func(_ uint64, v float64) bool { return v < 1e-9 })
			requireSameVector(t, ix.word.vectorPlain(lw, false), ix.word.vector(lw, false), "%s without an example", d.ID)
			requireSameVector(t, ix.char.vectorPlain(lc, false), ix.char.vector(lc, false), "%s without an example", d.ID)
		}
	}
	require.Equal(t, len(ix.examples), e)
}

// TestLogOfOneIsZero holds what vectorOf relies on to skip the logarithm
// of a term seen once: 1 + ln 1 is exactly 1.
func TestLogOfOneIsZero(t *testing.T) {
	one := 1.0
	require.Equal(t, math.Float64bits(1), math.Float64bits(1+math.Log(one)))
	require.Equal(t, math.Float64bits(0), math.Float64bits(math.Log(one)))
}

// TestVocabTableMatchesMap: a space's lookup table finds every term of the
// map it is built from with its id, and no other (random hashes, and the
// map's keys changed by one bit), for the word, char and bigram spaces of
// the dev index and for empty vocabularies.
func TestVocabTableMatchesMap(t *testing.T) {
	docs, _ := loadData(t)
	ix := New(docs)
	rng := rand.New(rand.NewPCG(7, 11))
	for name, sp := range map[string]space{"word": ix.word, "char": ix.char, "bigram": ix.lin.bi, "empty": newSpace(nil, 2, 1.5)} {
		require.Less(t, 2*len(sp.ids), len(sp.table.ids), "%s: at most half full", name)
		for h, want := range sp.ids {
			id, ok := sp.table.lookup(h)
			require.True(t, ok, "%s: %x", name, h)
			require.Equal(t, want, id, "%s: %x", name, h)
			for _, other := range []uint64{h ^ 1, h ^ 1<<63, rng.Uint64()} {
				_, inMap := sp.ids[other]
				_, ok := sp.table.lookup(other)
				require.Equal(t, inMap, ok, "%s: %x", name, other)
			}
		}
		for range 1000 {
			h := rng.Uint64()
			_, inMap := sp.ids[h]
			_, ok := sp.table.lookup(h)
			require.Equal(t, inMap, ok, "%s: %x", name, h)
		}
	}
	var zero vocabTable
	_, ok := zero.lookup(42)
	require.False(t, ok)
}
