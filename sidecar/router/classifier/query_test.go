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

// TestQueryMatchesPlain is the differential test of the message's vectors:
// built from term lists in pooled buffers, they equal, bit for bit, the
// vectors built from map bags as the index build does, for every message
// of the dev set, one scratch reused across all of them as the pool does.
func TestQueryMatchesPlain(t *testing.T) {
	docs, cases := loadData(t)
	ix := New(docs)
	require.NotNil(t, ix.lin)
	sc := ix.getScratch()
	texts := []string{"", "?!", "what's the weather in Paris", "can't won't shouldn't", "cafés and naïve résumés"}
	for _, c := range cases {
		texts = append(texts, c.Text)
	}
	for _, text := range texts {
		ts := tokens(text, nil)
		require.Equal(t, ts, tokensKnown(text, ix.stems), "tokens of %q", text)
		plain := ix.vectorize(ts)
		fast := ix.vectorizeInto(ts, sc)
		requireSameVector(t, plain.word, fast.word, "word vector of %q", text)
		requireSameVector(t, plain.char, fast.char, "char vector of %q", text)
		requireSameVector(t, ix.linFeatures(ix.lin, plain, ts), ix.linFeaturesInto(ix.lin, fast, ts, sc), "linear features of %q", text)
	}
}

// TestClassifyMatchesPlain is the differential test of Classify: over the
// dev set (and the indexes a large registry and a small one get: without a
// linear model, and with few candidates), the pooled path and the plain
// one give identical results: best, confidence, ranked ids and scores.
func TestClassifyMatchesPlain(t *testing.T) {
	docs, cases := loadData(t)
	cosineOnly := defaultConfig()
	cosineOnly.lrEpochs = 0
	indexes := map[string]*Index{
		"150 skills":               New(docs),
		"150 skills, cosine only":  newIndex(docs, cosineOnly),
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

func BenchmarkClassify150Plain(b *testing.B) {
	docs, cases := loadData(b)
	ix := New(docs)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		ix.classify(cases[i%len(cases)].Text, nil, nil)
		i++
	}
}

// TestClassifyPooledConcurrent classifies different messages over
// different candidate sets at once: pooled scratch never leaks between
// calls (each result equals the plain path's). Run with -race.
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
