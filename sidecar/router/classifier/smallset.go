package classifier

import (
	"fmt"
	"math/rand/v2"
)

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
