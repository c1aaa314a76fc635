package classifier

import (
	"fmt"
	"io"
	"math"
)

// Tuning harness: how defaultConfig and its confidence were chosen on the
// dev data. It asserts nothing and is no test; test/routetune runs it:
//
//	go run ./test/routetune tune|calib|calib-cos|smallsets

type sample struct {
	ft      confFeatures
	correct bool
	inScope bool
	ok      bool
	w       float64 // weight in the fit (0: 1)
}

func samples(ix *Index, cases []Case) []sample {
	out := make([]sample, len(cases))
	for i, c := range cases {
		cands, scores, q := ix.scores(c.Text, nil, nil)
		if scores == nil {
			continue
		}
		order := rankOrder(cands, scores)
		if scores[order[0]] <= 0 {
			continue
		}
		out[i] = sample{
			ft:      ix.features(cands, scores, order, q),
			correct: c.Expect != nil && ix.ids[cands[order[0]]] == *c.Expect,
			inScope: c.Expect != nil,
			ok:      true,
		}
	}
	return out
}

// fitLogistic fits σ(b·x) with x = confFeatures by Newton's method
// with a small ridge, label = the best candidate is right; negWeight weighs
// the cases whose best is wrong or out of scope.
func fitLogistic(ss []sample, negWeight float64, use []bool) confFeatures {
	var b confFeatures
	for range 50 {
		var g confFeatures
		h := squareMatrix(len(g))
		for _, s := range ss {
			x := s.ft
			if !s.ok {
				x = confFeatures{1}
			}
			for k := range x {
				if !use[k] {
					x[k] = 0
				}
			}
			z := 0.0
			for k := range x {
				z += b[k] * x[k]
			}
			p := 1 / (1 + math.Exp(-z))
			y, w := 0.0, negWeight
			if s.correct {
				y, w = 1, 1
			}
			if s.w > 0 {
				w *= s.w
			}
			for k := range x {
				g[k] += w * (p - y) * x[k]
				for l := range x {
					h[k][l] += w * p * (1 - p) * x[k] * x[l]
				}
			}
		}
		for k := range b {
			g[k] += 1e-3 * b[k]
			h[k][k] += 1e-3
		}
		d := solve(h, g[:])
		for k := range b {
			b[k] -= d[k]
		}
	}
	return b
}

// squareMatrix is an n×n matrix of zeros.
func squareMatrix(n int) [][]float64 {
	m := make([][]float64, n)
	for i := range m {
		m[i] = make([]float64, n)
	}
	return m
}

// solve returns x with a·x = y, by Gaussian elimination with partial
// pivoting. It overwrites a and y.
func solve(a [][]float64, y []float64) []float64 {
	n := len(y)
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		a[c], a[p] = a[p], a[c]
		y[c], y[p] = y[p], y[c]
		for r := c + 1; r < n; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k < n; k++ {
				a[r][k] -= f * a[c][k]
			}
			y[r] -= f * y[c]
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := y[r]
		for k := r + 1; k < n; k++ {
			s -= a[r][k] * x[k]
		}
		x[r] = s / a[r][r]
	}
	return x
}

type quick struct{ top1, acc, oos, mis float64 }

func quickMetrics(ss []sample, b confFeatures, th float64) quick {
	var in, top1, acc, mis, oos, oosC int
	for _, s := range ss {
		routed := false
		if s.ok {
			z := 0.0
			for k := range b {
				z += b[k] * s.ft[k]
			}
			routed = 1/(1+math.Exp(-z)) >= th
		}
		if !s.inScope {
			oos++
			if !routed {
				oosC++
			}
			continue
		}
		in++
		if s.correct {
			top1++
		}
		if routed && s.correct {
			acc++
		}
		if routed && !s.correct {
			mis++
		}
	}
	return quick{float64(top1) / float64(in), float64(acc) / float64(in), float64(oosC) / float64(oos), float64(mis) / float64(in)}
}

// knob is one parameter of config tried by TestTune.
type knob struct {
	name   string
	values []float64
	set    func(*config, float64)
}

func tuneKnobs() []knob {
	return []knob{
		{"name", []float64{1, 2, 3, 4, 6}, func(c *config, v float64) { c.nameWeight = v }},
		{"desc", []float64{0, 0.5, 1}, func(c *config, v float64) { c.descWeight = v }},
		{"tag", []float64{0, 0.5, 1}, func(c *config, v float64) { c.tagWeight = v }},
		{"idfOffset", []float64{0, 0.5, 1, 2, 3}, func(c *config, v float64) { c.idfOffset = v }},
		{"unknown", []float64{0, 0.5, 1, 1.5, 2}, func(c *config, v float64) { c.unknown = v }},
		{"char", []float64{0, 0.5, 1, 1.5}, func(c *config, v float64) { c.char = v }},
		{"charMin", []float64{2, 3}, func(c *config, v float64) { c.charMin = int(v) }},
		{"charMax", []float64{3, 4, 5}, func(c *config, v float64) { c.charMax = max(int(v), c.charMin) }},
		{"related", []float64{0, 0.3, 0.5, 0.7, 1}, func(c *config, v float64) { c.related = v }},
		{"lr", []float64{0.1, 0.2, 0.3, 0.5}, func(c *config, v float64) { c.lr = v }},
		{"lrEpochs", []float64{5, 10, 20}, func(c *config, v float64) { c.lrEpochs = int(v) }},
		{"lrL2", []float64{3e-5, 1e-4, 3e-4}, func(c *config, v float64) { c.lrL2 = v }},
		{"lrBigram", []float64{0, 0.5, 1, 1.5}, func(c *config, v float64) { c.lrBigram = v }},
	}
}

// allFeatures selects every confidence feature for the fit.
var allFeatures = []bool{true, true, true, true, true, true, true, true, true, false, false, false, false}

// Tune walks the knobs one at a time from defaultConfig, keeping a
// value when it raises top-1 accuracy + in-scope accuracy at 0.6 / 4 (the
// logistic refitted each time), twice over.
func Tune(w io.Writer, docs []Doc, cases []Case) {
	printf := printer(w)
	eval := func(cfg config) (quick, confFeatures) {
		ix := newIndex(docs, cfg)
		ss := samples(ix, cases)
		b := fitLogistic(ss, 1, allFeatures)
		return quickMetrics(ss, b, 0.6), b
	}
	cur := defaultConfig()
	best, _ := eval(cur)
	printf("start top1 %.4f acc %.4f\n", best.top1, best.acc)
	for round := range 2 {
		for _, knob := range tuneKnobs() {
			for _, v := range knob.values {
				c := cur
				knob.set(&c, v)
				q, b := eval(c)
				mark := ""
				if q.top1+q.acc/4 > best.top1+best.acc/4+1e-9 {
					best, cur, mark = q, c, " *"
				}
				printf("r%d %-10s %-5v top1 %.4f acc %.4f oos %.2f mis %.4f b=%.2f%s\n", round, knob.name, v, q.top1, q.acc, q.oos, q.mis, b, mark)
			}
		}
	}
	printf("best %+v\n", cur)
}

// Calibrate fits the confidence logistic of defaultConfig on dev for
// several weights of the negative cases (best candidate wrong, or out of
// scope) and prints the coefficients with the metrics at 0.6: defaultConfig
// has those for weight 1.25 as conf (with the linear model) and the
// earlier fit for weight 1.2 as confCos (cosine alone, cosineOnly).
func Calibrate(w io.Writer, docs []Doc, cases []Case, cosineOnly bool) {
	printf := printer(w)
	cfg := defaultConfig()
	if cosineOnly {
		cfg.lrEpochs = 0
	}
	ix := newIndex(docs, cfg)
	ss := samples(ix, cases)
	for _, nw := range []float64{1, 1.1, 1.2, 1.25, 1.3, 1.5} {
		b := fitLogistic(ss, nw, allFeatures)
		q := quickMetrics(ss, b, 0.6)
		printf("neg weight %.1f @0.6 top1 %.4f acc %.4f oos %.2f mis %.4f conf: %#v\n", nw, q.top1, q.acc, q.oos, q.mis, b)
	}
	conf := ix.cfg.conf
	if ix.lin == nil {
		conf = ix.cfg.confCos
	}
	q := quickMetrics(ss, conf, 0.6)
	printf("defaultConfig @0.6 top1 %.4f acc %.4f oos %.2f mis %.4f\n", q.top1, q.acc, q.oos, q.mis)
}

// setSamples computes the confidence features of the cases.
func setSamples(scs []setCase) []sample {
	out := make([]sample, len(scs))
	for i, c := range scs {
		ix := c.ix
		cands, scores, q := ix.scores(c.text, c.cands, nil)
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

// TuneSmallSets prints small-set figures for the current confidence and for
// refits of the small-set correction, and the confidence on a few messages
// among the public skills of an example registry (finance; publicIDs are the
// skills an authenticated caller without scopes may use).
func TuneSmallSets(w io.Writer, docs []Doc, cases []Case, finance []Doc, publicIDs []string) error {
	printf := printer(w)
	ix := New(docs)
	dev := samples(ix, cases)
	ks := []int{2, 3, 5, 8}
	fitSet := setSamples(smallSetCases(docs, cases, ix, ks, 1))
	evalCases := smallSetCases(docs, cases, ix, ks, 2)
	evalSet := setSamples(evalCases)
	report := func(name string, b confFeatures) {
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
	report("current", ix.cfg.conf)
	fin := New(finance)
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
		c := fitCorrection(fitSet, ix.cfg.conf, 1.25, ng)
		conf := corrConf(ix.cfg.conf, c)
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
			cands, scores, q := fin.scores(text, pub, nil)
			order := rankOrder(cands, scores)
			printf(" %q %s %.2f;", text, fin.ids[cands[order[0]]], conf(sample{ft: fin.features(cands, scores, order, q)}))
		}
		printf("\n")
	}
	return nil
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
		h := squareMatrix(n)
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
		x := solve(h, g[:])
		for k := range c {
			c[k] -= x[k]
		}
	}
	return c
}

// printer writes formatted tuning output to w; the harness reports to a
// terminal, and a failed write has nowhere better to go.
func printer(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
}
