package main

import (
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/capgate/capgate/sidecar/router/classifier"
)

// Small candidate sets (TestSmallSetTargets asserts the classifier's
// targets on them; smallsets refits the correction). The router classifies among the capabilities the
// caller is entitled to whose media types fit: usually 2–10 of them, and the
// registry itself is often small. These cases are drawn from dev
// (seeded, deterministic):
//
//   - subset: the 150-skill index; an in-scope case with its skill among k
//     candidates (included: must route to it), an in-scope case whose skill
//     is not among the k candidates (excluded: must clarify), an
//     out-of-scope case with k candidates (must clarify);
//   - registry: an index of n random skills (a small registry, built with
//     classifier.New), k of them
//     candidates; cases of a candidate skill (included), of a registry skill
//     left out of the candidates or of a skill outside the registry, and
//     the out-of-scope cases (must clarify).

// setCase is one small-set case: the index, the candidates and the expected
// skill, or "" when the message must be clarified.
type setCase struct {
	ix     *classifier.Index
	text   string
	cands  []int
	expect string
	group  string // "subset" or "registry"
}

// smallSetCases draws the cases for k candidates.
func smallSetCases(docs []classifier.Doc, cases []classifier.Case, full *classifier.Index, ks []int, seed uint64) []setCase {
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
	everyone := make([]int, full.Len())
	for i := range everyone {
		everyone[i] = i
	}
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
				sub := make([]classifier.Doc, size)
				for i, p := range pick {
					sub[i] = docs[p]
				}
				rix := classifier.New(sub)
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

// setMetrics are small-set figures at a threshold: accuracy and misroutes
// over the included cases, clarification over the others.
type setMetrics struct {
	acc, mis, clarify float64
	included, others  int
}

func (m setMetrics) String() string {
	return fmt.Sprintf("acc %.1f%% mis %.1f%% clarify %.1f%% (n %d/%d)", 100*m.acc, 100*m.mis, 100*m.clarify, m.included, m.others)
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

// setSamples computes the confidence features of the cases.
func setSamples(scs []setCase) []sample {
	out := make([]sample, len(scs))
	for i, c := range scs {
		out[i].inScope = c.expect != ""
		e, ok := c.ix.Explain(c.text, c.cands)
		if !ok {
			continue
		}
		out[i].ft = e.Features
		out[i].correct = c.expect != "" && e.Best == c.expect
		out[i].ok = true
	}
	return out
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

func linConf(b classifier.Features) func(s sample) float64 {
	return func(s sample) float64 {
		return sigmoid(addDot(0, b[:], s.ft[:]))
	}
}

// tuneSmallSets prints small-set figures for the current confidence and for
// refits of the small-set correction, and the confidence on a few messages
// among the public skills of an example registry (finance; publicIDs are the
// skills an authenticated caller without scopes may use).
func tuneSmallSets(w io.Writer, docs []classifier.Doc, cases []classifier.Case, finance []classifier.Doc, publicIDs []string) error {
	printf := printer(w)
	ix := classifier.New(docs)
	cur := classifier.DefaultConfig().Conf
	dev := samples(ix, cases)
	ks := []int{2, 3, 5, 8}
	fitSet := setSamples(smallSetCases(docs, cases, ix, ks, 1))
	evalCases := smallSetCases(docs, cases, ix, ks, 2)
	evalSet := setSamples(evalCases)
	report := func(name string, b classifier.Features) {
		c := linConf(b)
		q := quickMetrics(dev, b, 0.6)
		printf("%s\n  dev150 top1 %.4f acc %.4f oos %.2f mis %.4f\n", name, q.top1, q.acc, q.oos, q.mis)
		for _, g := range []string{"subset", "registry"} {
			for _, k := range ks {
				var sub []sample
				for i, sc := range evalCases {
					if sc.group == g && len(sc.cands) == k {
						sub = append(sub, evalSet[i])
					}
				}
				printf("  %-8s k=%d %v\n", g, k, measure(sub, c, 0.6))
			}
		}
	}
	report("current", cur)
	fin := classifier.New(finance)
	var pub []int
	for _, id := range publicIDs {
		i, ok := fin.Lookup(id)
		if !ok {
			return fmt.Errorf("public skill %q is not in the example registry", id)
		}
		pub = append(pub, i)
	}
	finTexts := []string{"hello there", "help me with this", "hello", "what can you do", "invoice", "look up invoice INV-1", "extract the fields from this invoice", "reconcile invoice INV-3 against its PO", "what's the weather"}
	groups := map[string][]sample{}
	for i, sc := range evalCases {
		key := fmt.Sprintf("%s%d", sc.group, len(sc.cands))
		groups[key] = append(groups[key], evalSet[i])
	}
	for _, ng := range []float64{0.2, 0.3} {
		c := fitCorrection(fitSet, cur, 1.25, ng)
		conf := corrConf(cur, c)
		worstCl, worstMis, sumAcc := 1.0, 0.0, 0.0
		for _, ss := range groups {
			m := measure(ss, conf, 0.6)
			worstCl, worstMis, sumAcc = min(worstCl, m.clarify), max(worstMis, m.mis), sumAcc+m.acc
		}
		dm := measure(dev, conf, 0.6)
		printf("sneg %.2f: dev acc %.4f oos %.2f mis %.4f | small worst clarify %.3f worst mis %.3f mean acc %.4f\n  %#v\n", ng, dm.acc, dm.clarify, dm.mis, worstCl, worstMis, sumAcc/float64(len(groups)), c)
		for _, k := range []string{"subset2", "subset3", "subset5", "subset8", "registry2", "registry3", "registry5", "registry8"} {
			printf("  %-9s %v\n", k, measure(groups[k], conf, 0.6))
		}
		printf("  finance:")
		for _, text := range finTexts {
			e, _ := fin.Explain(text, pub)
			printf(" %q %s %.2f;", text, e.Best, conf(sample{ft: e.Features}))
		}
		printf("\n")
	}
	return nil
}

func corrConf(b classifier.Features, c classifier.Corrections) func(sample) float64 {
	return func(s sample) float64 {
		d := s.ft.Corrections()
		return sigmoid(addDot(addDot(0, b[:], s.ft[:]), c[:], d[:]))
	}
}

// fitCorrection fits the small-set correction by Newton's method with a
// small ridge, the 150-way logit b·f as a fixed offset; label = the best
// candidate is right; negWeight weighs wrong best candidates, setNeg the
// cases that must be clarified (not included).
func fitCorrection(ss []sample, b classifier.Features, negWeight, setNeg float64) classifier.Corrections {
	const n = len(classifier.Corrections{})
	var c classifier.Corrections
	for range 30 {
		var g classifier.Corrections
		h := squareMatrix(n)
		for _, s := range ss {
			if !s.ok {
				continue
			}
			d := s.ft.Corrections()
			p := sigmoid(addDot(addDot(0, b[:], s.ft[:]), c[:], d[:]))
			y, w := s.label(negWeight)
			if !s.inScope {
				w *= setNeg
			}
			addNewtonTerms(g[:], h, d[:], w, p, y)
		}
		newtonStep(c[:], g[:], h, 1e-2)
	}
	return c
}

func frac(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
