package classifier

import (
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
		require.Equal(t, ts, tokensKnown(text, ix.stems), "tokens of %q", text)
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
