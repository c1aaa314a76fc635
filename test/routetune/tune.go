package main

import (
	"fmt"
	"io"
	"math"

	"github.com/capgate/capgate/sidecar/router/classifier"
)

// The tuning harness: how classifier.DefaultConfig and its confidence were
// chosen on the dev data. It reads the classifier only through its exported
// surface: NewWithConfig to build an index with other parameters, Explain
// for a message's confidence features, Features.Corrections for the
// small-set correction's.

// sample is one case's confidence features and whether the best candidate
// is right; ok is false when nothing was ranked.
type sample struct {
	ft      classifier.Features
	correct bool
	inScope bool
	ok      bool
	w       float64 // weight in the fit (0: 1)
}

// samples computes the confidence features of the cases with every skill
// a candidate. A case with nothing ranked is left zero (not in scope, not
// ok), as the coefficients were fitted.
func samples(ix *classifier.Index, cases []classifier.Case) []sample {
	out := make([]sample, len(cases))
	for i, c := range cases {
		e, ok := ix.Explain(c.Text, nil)
		if !ok {
			continue
		}
		out[i] = sample{
			ft:      e.Features,
			correct: c.Expect != nil && e.Best == *c.Expect,
			inScope: c.Expect != nil,
			ok:      true,
		}
	}
	return out
}

// fitLogistic fits σ(b·x) with x = classifier.Features by Newton's method
// with a small ridge, label = the best candidate is right; negWeight weighs
// the cases whose best is wrong or out of scope.
func fitLogistic(ss []sample, negWeight float64, use []bool) classifier.Features {
	var b classifier.Features
	for range 50 {
		var g classifier.Features
		h := squareMatrix(len(g))
		for _, s := range ss {
			x := s.ft
			if !s.ok {
				x = classifier.Features{1}
			}
			for k := range x {
				if !use[k] {
					x[k] = 0
				}
			}
			p := sigmoid(addDot(0, b[:], x[:]))
			y, w := s.label(negWeight)
			if s.w > 0 {
				w *= s.w
			}
			addNewtonTerms(g[:], h, x[:], w, p, y)
		}
		newtonStep(b[:], g[:], h, 1e-3)
	}
	return b
}

// addDot returns z + a·x.
func addDot(z float64, a, x []float64) float64 {
	for k := range a {
		z += a[k] * x[k]
	}
	return z
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// label is a sample's label in the fits (the best candidate is right) and
// its weight, negWeight when it is 0.
func (s sample) label(negWeight float64) (y, w float64) {
	if s.correct {
		return 1, 1
	}
	return 0, negWeight
}

// addNewtonTerms adds one sample's terms (inputs x, weight w, prediction p,
// label y) to the log-loss gradient g and Hessian h.
func addNewtonTerms(g []float64, h [][]float64, x []float64, w, p, y float64) {
	for k := range x {
		g[k] += w * (p - y) * x[k]
		for l := range x {
			h[k][l] += w * p * (1 - p) * x[k] * x[l]
		}
	}
}

// newtonStep adds the ridge to g and h and takes the Newton step on coef.
func newtonStep(coef, g []float64, h [][]float64, ridge float64) {
	for k := range coef {
		g[k] += ridge * coef[k]
		h[k][k] += ridge
	}
	d := solve(h, g)
	for k := range coef {
		coef[k] -= d[k]
	}
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

func quickMetrics(ss []sample, b classifier.Features, th float64) quick {
	var in, top1, acc, mis, oos, oosC int
	for _, s := range ss {
		routed := false
		if s.ok {
			routed = sigmoid(addDot(0, b[:], s.ft[:])) >= th
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

// knob is one parameter of classifier.Config tried by tune.
type knob struct {
	name   string
	values []float64
	set    func(*classifier.Config, float64)
}

func tuneKnobs() []knob {
	return []knob{
		{"name", []float64{1, 2, 3, 4, 6}, func(c *classifier.Config, v float64) { c.NameWeight = v }},
		{"desc", []float64{0, 0.5, 1}, func(c *classifier.Config, v float64) { c.DescWeight = v }},
		{"tag", []float64{0, 0.5, 1}, func(c *classifier.Config, v float64) { c.TagWeight = v }},
		{"idfOffset", []float64{0, 0.5, 1, 2, 3}, func(c *classifier.Config, v float64) { c.IDFOffset = v }},
		{"unknown", []float64{0, 0.5, 1, 1.5, 2}, func(c *classifier.Config, v float64) { c.Unknown = v }},
		{"char", []float64{0, 0.5, 1, 1.5}, func(c *classifier.Config, v float64) { c.Char = v }},
		{"charMin", []float64{2, 3}, func(c *classifier.Config, v float64) { c.CharMin = int(v) }},
		{"charMax", []float64{3, 4, 5}, func(c *classifier.Config, v float64) { c.CharMax = max(int(v), c.CharMin) }},
		{"related", []float64{0, 0.3, 0.5, 0.7, 1}, func(c *classifier.Config, v float64) { c.Related = v }},
		{"lr", []float64{0.1, 0.2, 0.3, 0.5}, func(c *classifier.Config, v float64) { c.LR = v }},
		{"lrEpochs", []float64{5, 10, 20}, func(c *classifier.Config, v float64) { c.LREpochs = int(v) }},
		{"lrL2", []float64{3e-5, 1e-4, 3e-4}, func(c *classifier.Config, v float64) { c.LRL2 = v }},
		{"lrBigram", []float64{0, 0.5, 1, 1.5}, func(c *classifier.Config, v float64) { c.LRBigram = v }},
		{"lrGroup", []float64{0, 0.3, 0.5, 0.7, 1}, func(c *classifier.Config, v float64) { c.LRGroup = v }},
	}
}

// allFeatures selects every confidence feature for the fit.
var allFeatures = []bool{true, true, true, true, true, true, true, true, true, false, false, false, false}

// tune walks the knobs one at a time from classifier.DefaultConfig, keeping a
// value when it raises top-1 accuracy + in-scope accuracy at 0.6 / 4 (the
// logistic refitted each time), twice over.
func tune(w io.Writer, docs []classifier.Doc, cases []classifier.Case) {
	printf := printer(w)
	eval := func(cfg classifier.Config) (quick, classifier.Features) {
		ix := classifier.NewWithConfig(docs, cfg)
		ss := samples(ix, cases)
		b := fitLogistic(ss, 1, allFeatures)
		return quickMetrics(ss, b, 0.6), b
	}
	cur := classifier.DefaultConfig()
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

// calibrate fits the confidence logistic of classifier.DefaultConfig on dev
// for several weights of the negative cases (best candidate wrong, or out of
// scope) and prints the coefficients with the metrics at 0.6: DefaultConfig
// has those for weight 1.25 as Conf (with the linear model) and the earlier
// fit for weight 1.2 as ConfCos (cosine alone, cosineOnly).
func calibrate(w io.Writer, docs []classifier.Doc, cases []classifier.Case, cosineOnly bool) {
	printf := printer(w)
	cfg := classifier.DefaultConfig()
	if cosineOnly {
		cfg.LREpochs = 0
	}
	ix := classifier.NewWithConfig(docs, cfg)
	ss := samples(ix, cases)
	for _, nw := range []float64{1, 1.1, 1.2, 1.25, 1.3, 1.35, 1.4, 1.45, 1.5} {
		b := fitLogistic(ss, nw, allFeatures)
		q := quickMetrics(ss, b, 0.6)
		printf("neg weight %.2f @0.6 top1 %.4f acc %.4f oos %.3f mis %.4f conf: %#v\n", nw, q.top1, q.acc, q.oos, q.mis, b)
	}
	conf := cfg.Conf
	if !ix.Trained() {
		conf = cfg.ConfCos
	}
	q := quickMetrics(ss, conf, 0.6)
	printf("defaultConfig @0.6 top1 %.4f acc %.4f oos %.2f mis %.4f\n", q.top1, q.acc, q.oos, q.mis)
}

// printer writes formatted tuning output to w; the harness reports to a
// terminal, and a failed write has nowhere better to go.
func printer(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
}
