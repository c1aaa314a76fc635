package classifier

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func smallDocs() []Doc {
	return []Doc{
		{ID: "balance", Name: "Balance", Description: "Handles requests about balance in the banking domain.", Tags: []string{"banking"},
			Examples: []string{"how much money is in my checking account", "what is my savings balance"}},
		{ID: "transfer", Name: "Transfer", Description: "Handles requests about transfer in the banking domain.", Tags: []string{"banking"},
			Examples: []string{"move $100 from savings to checking", "transfer money to my mom"}},
		{ID: "weather", Name: "Weather", Description: "Handles requests about weather in the utility domain.", Tags: []string{"utility"},
			Examples: []string{"will it rain tomorrow", "what is the temperature outside"}},
		{ID: "alarm", Name: "Alarm", Description: "Handles requests about alarm in the utility domain.", Tags: []string{"utility"},
			Examples: []string{"wake me up at 7", "set an alarm for noon"}},
	}
}

func TestClassifyRanks(t *testing.T) {
	ix := New(smallDocs())
	tests := []struct{ text, want string }{
		{"what's my balance", "balance"},
		{"please transfer 50 dollars to savings", "transfer"},
		{"is it going to rain", "weather"},
		{"set an alarm for 6 am", "alarm"},
		{"trasnfer money", "transfer"}, // typo, matched by character n-grams
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			res := ix.Classify(tt.text, nil)
			require.Equal(t, tt.want, res.Best)
			require.NotEmpty(t, res.Ranked)
			require.Equal(t, res.Best, res.Ranked[0].ID)
			for i := 1; i < len(res.Ranked); i++ {
				require.GreaterOrEqual(t, res.Ranked[i-1].Score, res.Ranked[i].Score)
			}
		})
	}
}

func TestClassifyCandidatesRestrict(t *testing.T) {
	ix := New(smallDocs())
	w, ok := ix.Lookup("weather")
	require.True(t, ok)
	a, ok := ix.Lookup("alarm")
	require.True(t, ok)
	all := ix.Classify("how much is in my savings account", nil)
	require.Equal(t, "balance", all.Best)

	res := ix.Classify("how much is in my savings account", []int{w, a})
	for _, s := range res.Ranked {
		require.Contains(t, []string{"weather", "alarm"}, s.ID)
	}
	require.LessOrEqual(t, len(res.Ranked), 2)

	// Out-of-range positions and repeats are ignored.
	res = ix.Classify("wake me up at 5", []int{a, a, -1, 99})
	require.Equal(t, "alarm", res.Best)
	require.Len(t, res.Ranked, 1)

	// An empty candidate set ranks nothing.
	res = ix.Classify("wake me up at 5", []int{})
	require.Equal(t, Result{}, res)
}

func TestClassifyConfidenceOverCandidates(t *testing.T) {
	ix := New(smallDocs())
	b, _ := ix.Lookup("balance")
	tr, _ := ix.Lookup("transfer")
	w, _ := ix.Lookup("weather")
	// Balance and transfer compete for a banking message; with transfer
	// out of the candidates the confidence in balance rises.
	text := "how much money is in savings"
	both := ix.Classify(text, []int{b, tr, w})
	alone := ix.Classify(text, []int{b, w})
	require.Equal(t, "balance", both.Best)
	require.Equal(t, "balance", alone.Best)
	require.Greater(t, alone.Confidence, both.Confidence)
}

func TestClassifyConfidenceRange(t *testing.T) {
	ix := New(smallDocs())
	for _, text := range []string{"what's my balance", "xyzzy plugh", "the", "what is the meaning of life", "alarm alarm alarm alarm"} {
		res := ix.Classify(text, nil)
		require.GreaterOrEqual(t, res.Confidence, 0.0, text)
		require.LessOrEqual(t, res.Confidence, 1.0, text)
	}
}

func TestClassifyNothingToRank(t *testing.T) {
	ix := New(smallDocs())
	for _, text := range []string{"", "   ", "?!", "zzzqqq"} {
		res := ix.Classify(text, nil)
		require.Zero(t, res.Confidence, text)
		require.Empty(t, res.Best, text)
	}
	empty := New(nil)
	require.Equal(t, Result{}, empty.Classify("what's my balance", nil))
}

func TestClassifyDeterministic(t *testing.T) {
	docs := synthDocs(300, 1)
	a, b := New(docs), New(docs)
	texts := []string{"what is my balance", "set an alarm", "book a table for two", "zzz"}
	for _, text := range texts {
		want := a.Classify(text, nil)
		require.Equal(t, want, b.Classify(text, nil), text)
		require.Equal(t, want, a.Classify(text, nil), text)
	}
}

// The postings path (many candidates) and the merge-join path (few) give
// the same scores.
func TestClassifyPathsAgree(t *testing.T) {
	docs := synthDocs(200, 2)
	ix := New(docs)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		text := docs[rng.IntN(len(docs))].Examples[0] + " please"
		full := ix.Classify(text, nil)
		var few []int
		for _, s := range full.Ranked[:min(3, len(full.Ranked))] {
			i, _ := ix.Lookup(s.ID)
			few = append(few, i)
		}
		part := ix.Classify(text, few)
		for i, s := range part.Ranked {
			require.Equal(t, full.Ranked[i].ID, s.ID)
			require.InDelta(t, full.Ranked[i].Score, s.Score, 1e-6)
		}
	}
}

func TestClassifyConcurrent(t *testing.T) {
	ix := New(synthDocs(100, 5))
	want := ix.Classify("check my account balance", nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				require.Equal(t, want, ix.Classify("check my account balance", nil))
			}
		})
	}
	wg.Wait()
}

func TestLookup(t *testing.T) {
	ix := New(smallDocs())
	i, ok := ix.Lookup("weather")
	require.True(t, ok)
	require.Equal(t, 2, i)
	_, ok = ix.Lookup("nope")
	require.False(t, ok)
	require.Equal(t, 4, ix.Len())
}

func TestEvaluateDefinitions(t *testing.T) {
	ix := New(smallDocs())
	id := func(s string) *string { return &s }
	cases := []Case{
		{Text: "what is my savings balance", Expect: id("balance")}, // routed right
		{Text: "will it rain tomorrow", Expect: id("alarm")},        // misrouted
		{Text: "zzzqqq", Expect: id("transfer")},                    // clarified
		{Text: "qqqzzz", Expect: nil},                               // clarified: OOS recall
	}
	m := Evaluate(ix, cases, 0.5)
	require.Equal(t, 4, m.N)
	require.Equal(t, 3, m.InScope)
	require.InDelta(t, 1.0/3, m.InScopeAccuracy, 1e-9)
	require.InDelta(t, 1.0/3, m.MisrouteRate, 1e-9)
	require.InDelta(t, 1.0/3, m.ClarificationRate, 1e-9)
	require.InDelta(t, 1.0/3, m.Top1Accuracy, 1e-9)
	require.InDelta(t, 1.0, m.OOSRecall, 1e-9)
	require.Positive(t, m.P50)
	require.GreaterOrEqual(t, m.P99, m.P50)
}

// TestDevTargets checks the routing targets on the CLINC150 dev data with
// all 150 skills as candidates.
func TestDevTargets(t *testing.T) {
	docs, cases := loadData(t)
	ix := New(docs)
	m := Evaluate(ix, cases, 0.6)
	t.Logf("dev @0.6: top1 %.4f in-scope acc %.4f oos recall %.4f clarify %.4f misroute %.4f p50 %v p99 %v n %d",
		m.Top1Accuracy, m.InScopeAccuracy, m.OOSRecall, m.ClarificationRate, m.MisrouteRate, m.P50, m.P99, m.N)
	require.Equal(t, 3100, m.N)
	require.GreaterOrEqual(t, m.Top1Accuracy, 0.70)
	require.GreaterOrEqual(t, m.InScopeAccuracy, 0.55)
	require.GreaterOrEqual(t, m.OOSRecall, 0.90)
	require.LessOrEqual(t, m.MisrouteRate, 0.07)
}

func TestBuildLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	// A 10,000-skill registry builds and classifies; how fast is shown by
	// BenchmarkNew10000, not asserted here.
	docs := synthDocs(10000, 9)
	ix := New(docs)
	require.Equal(t, 10000, ix.Len())
	res := ix.Classify(docs[42].Examples[1], nil)
	require.Equal(t, docs[42].ID, res.Best, "an example of a skill is classified as that skill")
}

func BenchmarkClassify150(b *testing.B) {
	docs, cases := loadData(b)
	ix := New(docs)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		ix.Classify(cases[i%len(cases)].Text, nil)
		i++
	}
}

func BenchmarkClassify1000(b *testing.B) {
	docs := synthDocs(1000, 7)
	ix := New(docs)
	texts := synthQueries(docs, 500, 8)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		ix.Classify(texts[i%len(texts)], nil)
		i++
	}
}

func BenchmarkClassify1000Restricted(b *testing.B) {
	docs := synthDocs(1000, 7)
	ix := New(docs)
	texts := synthQueries(docs, 500, 8)
	cands := []int{3, 141, 592, 653, 589, 793, 238, 462}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		ix.Classify(texts[i%len(texts)], cands)
		i++
	}
}

func BenchmarkNew10000(b *testing.B) {
	docs := synthDocs(10000, 9)
	for b.Loop() {
		New(docs)
	}
}

// synthVocab is a small everyday vocabulary for synthetic skills.
var synthVocab = strings.Fields(`account balance transfer money card credit debit payment bill due
alarm timer reminder calendar meeting schedule weather rain forecast temperature flight hotel
book reserve cancel order status track delivery package shipping restaurant table dinner lunch
recipe ingredient cook bake music song play pause volume light thermostat door lock car oil tire
gas fuel route traffic map direction distance translate language word definition spell math
calculate convert unit currency exchange rate stock price news sport score team game movie show
ticket event concert insurance claim policy doctor appointment pharmacy refill prescription
email message call text phone contact address password reset login profile setting update
report expense invoice receipt tax salary payroll vacation leave request approval ticket issue
bug deploy server database backup restore quota usage plan upgrade subscription refund return`)

var synthVerbs = strings.Fields(`show check tell give find get set change update cancel start stop
list open close send add remove move pay book track`)

// synthDocs generates n varied skills from synthVocab; deterministic in seed.
func synthDocs(n int, seed uint64) []Doc {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pick := func(words []string) string { return words[rng.IntN(len(words))] }
	docs := make([]Doc, n)
	for i := range docs {
		a, c := pick(synthVocab), pick(synthVocab)
		ex := make([]string, 5)
		for k := range ex {
			ex[k] = fmt.Sprintf("can you %s my %s %s for %s %s please", pick(synthVerbs), a, c, pick(synthVocab), pick(synthVocab))
		}
		docs[i] = Doc{
			ID:          fmt.Sprintf("skill-%05d", i),
			Name:        a + " " + c,
			Description: fmt.Sprintf("Handles requests about %s %s in the %s domain.", a, c, pick(synthVocab)),
			Tags:        []string{pick(synthVocab)},
			Examples:    ex,
		}
	}
	return docs
}

// synthQueries paraphrases synthetic skills' examples.
func synthQueries(docs []Doc, n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, seed))
	out := make([]string, n)
	for i := range out {
		d := docs[rng.IntN(len(docs))]
		ws := strings.Fields(d.Examples[rng.IntN(len(d.Examples))])
		rng.Shuffle(len(ws), func(a, b int) { ws[a], ws[b] = ws[b], ws[a] })
		out[i] = "hey " + strings.Join(ws[:len(ws)-2], " ") + " now"
	}
	return out
}

// SplitUsage puts the first ceil(share × n) cases of each skill, and of the
// out-of-scope ones, in the usage block, in order, and the rest in the
// evaluation block.
func TestSplitUsage(t *testing.T) {
	a, b := "a", "b"
	var cases []Case
	for i := range 5 {
		cases = append(cases, Case{Text: "a" + string(rune('0'+i)), Expect: &a})
		if i < 3 {
			cases = append(cases, Case{Text: "b" + string(rune('0'+i)), Expect: &b}, Case{Text: "o" + string(rune('0'+i))})
		}
	}
	texts := func(cs []Case) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Text)
		}
		return out
	}
	usage, eval := SplitUsage(cases, 0.5)
	require.Equal(t, []string{"a0", "b0", "o0", "a1", "b1", "o1", "a2"}, texts(usage))
	require.Equal(t, []string{"b2", "o2", "a3", "a4"}, texts(eval))
	usage, eval = SplitUsage(cases, 1)
	require.Len(t, usage, len(cases))
	require.Empty(t, eval)
}

// BenchmarkNew150 builds the index of the 150 CLINC skills: the linear
// model's training is most of it.
func BenchmarkNew150(b *testing.B) {
	docs, _ := loadData(b)
	for b.Loop() {
		New(docs)
	}
}

// BenchmarkNew250 builds a 250-skill synthetic registry, near the largest
// the linear model is trained for (Config.LRMaxWork).
func BenchmarkNew250(b *testing.B) {
	docs := synthDocs(250, 9)
	for b.Loop() {
		New(docs)
	}
}

// TestManyExamplesKeepTheModel: as a deployment accepts examples, the
// linear model is trained for fewer epochs within Config.LRMaxWork rather
// than dropped (at 150 skills it was dropped past about 24 examples a
// skill, and top-1 fell by 7–8 points to the cosine's); below minEpochs
// it is not trained.
func TestManyExamplesKeepTheModel(t *testing.T) {
	docs, cases := loadData(t)
	byID := map[string]int{}
	for i, d := range docs {
		docs[i].Examples = slices.Clone(d.Examples)
		byID[d.ID] = i
	}
	for _, c := range cases {
		if c.Expect != nil {
			i := byID[*c.Expect]
			docs[i].Examples = append(docs[i].Examples, c.Text)
		}
	}
	require.Len(t, docs[0].Examples, 25, "five manifest examples and twenty accepted")
	ix := New(docs)
	require.True(t, ix.Trained())
	def := DefaultConfig()
	require.Less(t, ix.lin.epochs, def.LREpochs, "fewer epochs than a small registry's")
	require.GreaterOrEqual(t, ix.lin.epochs, minEpochs)
	// It learnt: almost every text it was given is its skill's first.
	var right int
	for _, c := range cases {
		if c.Expect != nil && ix.Classify(c.Text, nil).Best == *c.Expect {
			right++
		}
	}
	require.Greater(t, right, 2950, "of 3,000 texts the index was given")

	small := New(docs[:10])
	require.Equal(t, def.LREpochs, small.lin.epochs, "a registry within the bound gets every epoch")

	cfg := def
	cfg.LRMaxWork = 1e6
	require.False(t, NewWithConfig(docs, cfg).Trained(), "fewer than minEpochs fit: cosine only")

	// Texts with no word train nothing, whatever the bound.
	empty := []Doc{{ID: "a"}, {ID: "b", Examples: []string{"", "!!"}}}
	for _, e := range []float64{0, 1} {
		cfg := def
		cfg.Embed = e
		require.False(t, NewWithConfig(empty, cfg).Trained())
	}
}

// TestTagGroups: the tags two or more skills share, compared in lower
// case without surrounding space, each numbered once in the order of its
// first use; a tag of one skill, an empty one, and a skill's repeat of its
// own tag share nothing.
func TestTagGroups(t *testing.T) {
	docs := []Doc{
		{ID: "a", Tags: []string{"Travel", "solo", " ", "travel"}},
		{ID: "b", Tags: []string{"money", " travel "}},
		{ID: "c", Tags: []string{"MONEY"}},
		{ID: "d"},
		{ID: "e", Tags: []string{"travel", "money"}},
	}
	groups, n := tagGroups(docs)
	require.Equal(t, 2, n)
	require.Equal(t, [][]int32{{0}, {0, 1}, {1}, nil, {0, 1}}, groups)

	groups, n = tagGroups([]Doc{{ID: "a", Tags: []string{"x"}}, {ID: "b", Tags: []string{"y"}}})
	require.Zero(t, n)
	require.Equal(t, [][]int32{nil, nil}, groups)
}

// tagDocs is a small registry of two tags whose "trip" is a travel word
// that one travel skill's examples never use.
func tagDocs() []Doc {
	return []Doc{
		{ID: "book-flight", Name: "Book flight", Tags: []string{"travel"}, Examples: []string{
			"book a flight to rome for my trip", "i need a plane ticket for the trip",
			"find me flights for a weekend trip", "fly to lisbon next friday"}},
		{ID: "book-hotel", Name: "Book hotel", Tags: []string{"travel"}, Examples: []string{
			"reserve a hotel room for my trip", "somewhere to stay on the trip",
			"a hotel near the station for two nights", "book a room in paris"}},
		{ID: "rent-car", Name: "Rent car", Tags: []string{"travel"}, Examples: []string{
			"rent a car in rome", "i need a rental car", "hire a car at the airport",
			"reserve a car for saturday"}},
		{ID: "pay-bill", Name: "Pay bill", Tags: []string{"money"}, Examples: []string{
			"pay my electricity bill", "settle the phone bill today", "i want to pay a bill",
			"pay the water bill from checking"}},
		{ID: "transfer-money", Name: "Transfer money", Tags: []string{"money"}, Examples: []string{
			"send money to my sister", "transfer 50 to savings", "move funds between accounts",
			"wire money abroad"}},
		{ID: "check-balance", Name: "Check balance", Tags: []string{"money"}, Examples: []string{
			"how much money do i have", "what is my balance", "show my account balance",
			"balance of my checking account"}},
	}
}

// TestTagsShareWeights: what the examples of a tag's skills teach reaches
// every skill of the tag (Config.LRGroup). "trip" is in book-flight's and
// book-hotel's examples only; with the shared weights rent-car learns it
// as a travel word, weighing it above every money skill and above what it
// learns alone. A tag that shares nothing, or that every skill has, leaves
// the model as it is without shared weights.
func TestTagsShareWeights(t *testing.T) {
	alone := DefaultConfig()
	alone.LRGroup = 0
	weight := func(docs []Doc, cfg Config, skill, stem string) float32 {
		ix := NewWithConfig(docs, cfg)
		require.True(t, ix.Trained())
		f, ok := ix.word.ids[fnv64('w', stem)]
		require.True(t, ok, stem)
		c, ok := ix.Lookup(skill)
		require.True(t, ok, skill)
		return ix.lin.w[int(f)*ix.lin.classes+c]
	}
	docs := tagDocs()
	shared := weight(docs, DefaultConfig(), "rent-car", "trip")
	require.Greater(t, shared, weight(docs, alone, "rent-car", "trip"), "learnt from the tag")
	for _, money := range []string{"pay-bill", "transfer-money", "check-balance"} {
		require.Greater(t, shared, weight(docs, DefaultConfig(), money, "trip"), money)
	}

	weights := func(docs []Doc, cfg Config) []float32 { return NewWithConfig(docs, cfg).lin.w }
	for name, tag := range map[string]func(i int) string{
		"one skill each": func(i int) string { return fmt.Sprint("tag-", i) },
		"every skill":    func(int) string { return "everything" },
	} {
		docs := tagDocs()
		for i := range docs {
			docs[i].Tags = []string{tag(i)}
		}
		want, got := weights(docs, alone), weights(docs, DefaultConfig())
		require.Len(t, got, len(want))
		for i := range want {
			require.InDelta(t, want[i], got[i], 1e-6, "%s: weight %d", name, i)
		}
	}
}
