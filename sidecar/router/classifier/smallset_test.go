package classifier

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	pm "github.com/capgate/capgate/policy/manifest"
)

// financeIndex indexes the finance example's seven capabilities, as the
// router does.
func financeIndex(tb testing.TB) *Index {
	tb.Helper()
	reg, err := pm.Load([]pm.Dir{{FS: os.DirFS("../../../manifests/finance/capabilities"), Name: "capabilities"}}, pm.Options{})
	require.NoError(tb, err)
	all := reg.All()
	docs := make([]Doc, len(all))
	for i, c := range all {
		docs[i] = Doc{ID: c.ID, Name: c.Skill.Name, Description: c.Skill.Description, Tags: c.Skill.Tags, Examples: c.Skill.Examples}
	}
	return New(docs)
}

// financePublic returns the positions of the finance example's capabilities
// an authenticated caller without scopes may route to.
func financePublic(tb testing.TB, ix *Index) []int {
	tb.Helper()
	var out []int
	for _, id := range []string{"extract-invoice-fields", "lookup-invoice", "lookup-invoice-v1"} {
		i, ok := ix.Lookup(id)
		require.True(tb, ok, id)
		out = append(out, i)
	}
	return out
}

// Small candidate sets. The router classifies among the capabilities the
// caller is entitled to whose media types fit: usually 2–10 of them, and the
// registry itself is often small. These cases are drawn from dev
// (seeded, deterministic):
//
//   - subset: the 150-skill index; an in-scope case with its skill among k
//     candidates (included: must route to it), an in-scope case whose skill
//     is not among the k candidates (excluded: must clarify), an
//     out-of-scope case with k candidates (must clarify);
//   - registry: an index of n random skills (a small registry), k of them
//     candidates; cases of a candidate skill (included), of a registry skill
//     left out of the candidates or of a skill outside the registry, and
//     the out-of-scope cases (must clarify).

// setCase is one small-set case: the index, the candidates and the expected
// skill, or "" when the message must be clarified.
type setCase struct {
	ix     *Index
	text   string
	cands  []int
	expect string
	group  string // "subset" or "registry"
}

// smallSetCases draws the cases for k candidates.
func smallSetCases(docs []Doc, cases []Case, full *Index, ks []int, seed uint64) []setCase {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	n := len(docs)
	var out []setCase
	draw := func(k int, pool []int, must int) []int {
		perm := rng.Perm(len(pool))
		var c []int
		if must >= 0 {
			c = append(c, must)
		}
		for _, p := range perm {
			if len(c) == k {
				break
			}
			if pool[p] != must {
				c = append(c, pool[p])
			}
		}
		rng.Shuffle(len(c), func(a, b int) { c[a], c[b] = c[b], c[a] })
		return c
	}
	everyone := full.everyone()
	for _, k := range ks {
		for _, c := range cases {
			if c.Expect == nil {
				out = append(out, setCase{ix: full, text: c.Text, cands: draw(k, everyone, -1), group: "subset"})
				continue
			}
			t, _ := full.Lookup(*c.Expect)
			out = append(out, setCase{ix: full, text: c.Text, cands: draw(k, everyone, t), expect: *c.Expect, group: "subset"})
			others := make([]int, 0, n-1)
			for i := range n {
				if i != t {
					others = append(others, i)
				}
			}
			out = append(out, setCase{ix: full, text: c.Text, cands: draw(k, others, -1), group: "subset"})
		}
	}
	// Small registries: n in {k+2, 2k+4, 20}, a few cases per skill.
	byExpect := map[string][]string{}
	var oos []string
	for _, c := range cases {
		if c.Expect == nil {
			oos = append(oos, c.Text)
		} else {
			byExpect[*c.Expect] = append(byExpect[*c.Expect], c.Text)
		}
	}
	for _, k := range ks {
		for _, size := range []int{k + 2, 2*k + 4, 20} {
			for range 12 {
				pick := rng.Perm(n)[:size]
				sub := make([]Doc, size)
				for i, p := range pick {
					sub[i] = docs[p]
				}
				rix := New(sub)
				rix.cfg = full.cfg
				cands := rng.Perm(size)[:k]
				in := map[int]bool{}
				for _, c := range cands {
					in[c] = true
				}
				for i := range size {
					texts := byExpect[sub[i].ID]
					for range 4 {
						t := texts[rng.IntN(len(texts))]
						exp := ""
						if in[i] {
							exp = sub[i].ID
						}
						out = append(out, setCase{ix: rix, text: t, cands: cands, expect: exp, group: "registry"})
					}
				}
				for range 4 * k {
					// a skill outside the registry
					d := docs[rng.IntN(n)]
					inReg := false
					for _, s := range sub {
						inReg = inReg || s.ID == d.ID
					}
					if !inReg {
						texts := byExpect[d.ID]
						out = append(out, setCase{ix: rix, text: texts[rng.IntN(len(texts))], cands: cands, group: "registry"})
					}
					out = append(out, setCase{ix: rix, text: oos[rng.IntN(len(oos))], cands: cands, group: "registry"})
				}
			}
		}
	}
	return out
}

// setSamples computes the confidence features of the cases.
func setSamples(scs []setCase) []sample {
	out := make([]sample, len(scs))
	for i, c := range scs {
		ix := c.ix
		cands, scores, q := ix.scores(c.text, c.cands)
		out[i].inScope = c.expect != ""
		if scores == nil {
			continue
		}
		order := rankOrder(cands, scores)
		if scores[order[0]] <= 0 {
			continue
		}
		out[i].ft = ix.features(cands, scores, order, q)
		out[i].correct = c.expect != "" && ix.ids[cands[order[0]]] == c.expect
		out[i].ok = true
	}
	return out
}

// setMetrics are small-set figures at a threshold: accuracy and misroutes
// over the included cases, clarification over the others.
type setMetrics struct {
	acc, mis, clarify float64
	included, others  int
}

func (m setMetrics) String() string {
	return fmt.Sprintf("acc %.1f%% mis %.1f%% clarify %.1f%% (n %d/%d)", 100*m.acc, 100*m.mis, 100*m.clarify, m.included, m.others)
}

func measure(ss []sample, conf func(s sample) float64, th float64) setMetrics {
	var m setMetrics
	var acc, mis, cl int
	for _, s := range ss {
		routed := s.ok && conf(s) >= th
		if !s.inScope {
			m.others++
			if !routed {
				cl++
			}
			continue
		}
		m.included++
		switch {
		case routed && s.correct:
			acc++
		case routed:
			mis++
		}
	}
	m.acc, m.mis, m.clarify = frac(acc, m.included), frac(mis, m.included), frac(cl, m.others)
	return m
}

func linConf(b confFeatures) func(s sample) float64 {
	return func(s sample) float64 {
		var z float64
		for k := range b {
			z += b[k] * s.ft[k]
		}
		return 1 / (1 + math.Exp(-z))
	}
}

// TestSmallSetTune prints small-set figures for the current confidence and
// for refits (CLASSIFIER_TUNE=1).
func TestSmallSetTune(t *testing.T) {
	if os.Getenv("CLASSIFIER_TUNE") == "" {
		t.Skip("set CLASSIFIER_TUNE=1")
	}
	docs, cases := loadData(t)
	ix := New(docs)
	dev := samples(ix, cases)
	ks := []int{2, 3, 5, 8}
	fitSet := setSamples(smallSetCases(docs, cases, ix, ks, 1))
	evalCases := smallSetCases(docs, cases, ix, ks, 2)
	evalSet := setSamples(evalCases)
	report := func(name string, b confFeatures) {
		c := linConf(b)
		q := quickMetrics(dev, b, 0.6)
		fmt.Printf("%s\n  dev150 top1 %.4f acc %.4f oos %.2f mis %.4f\n", name, q.top1, q.acc, q.oos, q.mis)
		for _, g := range []string{"subset", "registry"} {
			for _, k := range ks {
				var sub []sample
				for i, sc := range evalCases {
					if sc.group == g && len(sc.cands) == k {
						sub = append(sub, evalSet[i])
					}
				}
				fmt.Printf("  %-8s k=%d %v\n", g, k, measure(sub, c, 0.6))
			}
		}
	}
	report("current", ix.cfg.conf)
	fin := financeIndex(t)
	pub := financePublic(t, fin)
	finTexts := []string{"hello there", "help me with this", "hello", "what can you do", "invoice", "look up invoice INV-1", "extract the fields from this invoice", "reconcile invoice INV-3 against its PO", "what's the weather"}
	groups := map[string][]sample{}
	for i, sc := range evalCases {
		key := fmt.Sprintf("%s%d", sc.group, len(sc.cands))
		groups[key] = append(groups[key], evalSet[i])
	}
	for _, ng := range []float64{0.2, 0.3} {
		c := fitCorrection(fitSet, ix.cfg.conf, 1.25, ng)
		conf := corrConf(ix.cfg.conf, c)
		worstCl, worstMis, sumAcc := 1.0, 0.0, 0.0
		for _, ss := range groups {
			m := measure(ss, conf, 0.6)
			worstCl, worstMis, sumAcc = min(worstCl, m.clarify), max(worstMis, m.mis), sumAcc+m.acc
		}
		dm := measure(dev, conf, 0.6)
		fmt.Printf("sneg %.2f: dev acc %.4f oos %.2f mis %.4f | small worst clarify %.3f worst mis %.3f mean acc %.4f\n  %#v\n", ng, dm.acc, dm.clarify, dm.mis, worstCl, worstMis, sumAcc/float64(len(groups)), c)
		for _, k := range []string{"subset2", "subset3", "subset5", "subset8", "registry2", "registry3", "registry5", "registry8"} {
			fmt.Printf("  %-9s %v\n", k, measure(groups[k], conf, 0.6))
		}
		fmt.Print("  finance:")
		for _, text := range finTexts {
			cands, scores, q := fin.scores(text, pub)
			order := rankOrder(cands, scores)
			fmt.Printf(" %q %s %.2f;", text, fin.ids[cands[order[0]]], conf(sample{ft: fin.features(cands, scores, order, q)}))
		}
		fmt.Println()
	}
}

func corrConf(b confFeatures, c corrFeatures) func(sample) float64 {
	return func(s sample) float64 {
		var z float64
		for k := range b {
			z += b[k] * s.ft[k]
		}
		d := corrections(s.ft)
		for k := range c {
			z += c[k] * d[k]
		}
		return 1 / (1 + math.Exp(-z))
	}
}

// fitCorrection fits the small-set correction by Newton's method with a
// small ridge, the 150-way logit b·f as a fixed offset; label = the best
// candidate is right; negWeight weighs wrong best candidates, setNeg the
// cases that must be clarified (not included).
func fitCorrection(ss []sample, b confFeatures, negWeight, setNeg float64) corrFeatures {
	const n = len(corrFeatures{})
	var c corrFeatures
	for range 30 {
		var g corrFeatures
		var h [n][n]float64
		for _, s := range ss {
			if !s.ok {
				continue
			}
			var z float64
			for k := range b {
				z += b[k] * s.ft[k]
			}
			d := corrections(s.ft)
			for k := range d {
				z += c[k] * d[k]
			}
			p := 1 / (1 + math.Exp(-z))
			y, w := 0.0, negWeight
			if s.correct {
				y, w = 1, 1
			}
			if !s.inScope {
				w *= setNeg
			}
			for k := range d {
				g[k] += w * (p - y) * d[k]
				for l := range d {
					h[k][l] += w * p * (1 - p) * d[k] * d[l]
				}
			}
		}
		for k := range c {
			g[k] += 1e-2 * c[k]
			h[k][k] += 1e-2
		}
		// Gaussian elimination
		a, y := h, g
		for col := range n {
			p := col
			for r := col + 1; r < n; r++ {
				if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
					p = r
				}
			}
			a[col], a[p] = a[p], a[col]
			y[col], y[p] = y[p], y[col]
			for r := col + 1; r < n; r++ {
				f := a[r][col] / a[col][col]
				for k := col; k < n; k++ {
					a[r][k] -= f * a[col][k]
				}
				y[r] -= f * y[col]
			}
		}
		var x corrFeatures
		for r := n - 1; r >= 0; r-- {
			v := y[r]
			for k := r + 1; k < n; k++ {
				v -= a[r][k] * x[k]
			}
			x[r] = v / a[r][r]
		}
		for k := range c {
			c[k] -= x[k]
		}
	}
	return c
}

// smallSetFigures routes the seeded small-set cases at threshold th through
// Classify, by group and candidate count.
func smallSetFigures(scs []setCase, th float64) map[string]setMetrics {
	type acc struct{ in, ok, mis, other, cl int }
	by := map[string]*acc{}
	for _, c := range scs {
		key := fmt.Sprintf("%s k=%d", c.group, len(c.cands))
		a := by[key]
		if a == nil {
			a = &acc{}
			by[key] = a
		}
		res := c.ix.Classify(c.text, c.cands)
		routed := res.Best != "" && res.Confidence >= th
		if c.expect == "" {
			a.other++
			if !routed {
				a.cl++
			}
			continue
		}
		a.in++
		switch {
		case routed && res.Best == c.expect:
			a.ok++
		case routed:
			a.mis++
		}
	}
	out := map[string]setMetrics{}
	for k, a := range by {
		out[k] = setMetrics{acc: frac(a.ok, a.in), mis: frac(a.mis, a.in), clarify: frac(a.cl, a.other), included: a.in, others: a.other}
	}
	return out
}

// TestSmallSetTargets checks the small-set targets at the default threshold
// on cases drawn from dev with a seed other than the one the correction was
// fitted on: for 2, 3, 5 and 8 candidates, out-of-scope and excluded-skill
// cases clarified ≥ 90 %, misroutes ≤ 7 %, and in-scope accuracy ≥ 70 %.
func TestSmallSetTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	docs, cases := loadData(t)
	ix := New(docs)
	figs := smallSetFigures(smallSetCases(docs, cases, ix, []int{2, 3, 5, 8}, 2), 0.6)
	require.Len(t, figs, 8)
	for _, g := range []string{"subset", "registry"} {
		for _, k := range []int{2, 3, 5, 8} {
			key := fmt.Sprintf("%s k=%d", g, k)
			m := figs[key]
			t.Logf("%-12s %v", key, m)
			require.GreaterOrEqual(t, m.clarify, 0.90, key)
			require.LessOrEqual(t, m.mis, 0.07, key)
			require.GreaterOrEqual(t, m.acc, 0.70, key)
		}
	}
}

// The finance example's three public skills (an authenticated caller
// without scopes): small talk and vague requests clarify, invoice requests
// route.
func TestFinancePublicSkills(t *testing.T) {
	ix := financeIndex(t)
	pub := financePublic(t, ix)
	for _, text := range []string{"hello there", "help me with this", "hello", "what can you do", "reconcile invoice INV-3 against its PO",
		"what's the weather in Paris", "what's the weather", "what is the weather like today", "who won the game last night"} {
		res := ix.Classify(text, pub)
		require.Less(t, res.Confidence, 0.6, "%q → %s %.3f", text, res.Best, res.Confidence)
	}
	for text, want := range map[string]string{
		"look up invoice INV-1":                "lookup-invoice",
		"extract the fields from this invoice": "extract-invoice-fields",
		"has invoice INV-77 been paid":         "lookup-invoice",
	} {
		res := ix.Classify(text, pub)
		require.Equal(t, want, res.Best, text)
		require.GreaterOrEqual(t, res.Confidence, 0.6, "%q %.3f", text, res.Confidence)
	}
}
