package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/capgate/capgate/sidecar/router/classifier"
	"github.com/capgate/capgate/sidecar/router/learn"
)

// The learning curve's tuning method (issue 36): a change to how the
// classifier uses examples is chosen on folds drawn from the usage block of
// route eval --learning-curve only (classifier.SplitUsage, share 0.5), never
// on its evaluation block, which is measured once afterwards.
//
// With u the ten usage texts of a skill (redacted and stripped of their
// placeholders as the router indexes accepted examples) and m its five
// manifest examples, at ten examples per skill:
//
//   - near-a: m + u[0:5] as examples, u[5:10] validating;
//   - near-b: m + u[5:10] as examples, u[0:5] validating;
//   - far: u[0:10] as examples (m left out), m validating: texts from
//     another split of the data set, as far from the examples as the
//     evaluation block is (the near folds validate on the examples'
//     neighbours, which are often paraphrases of them, and read about six
//     points above the evaluation block);
//   - five: m as examples, u[0:10] validating (the curve's first point).
//
// The near folds and five also validate on the usage block's out-of-scope
// cases.

// usageFold is one fold's index documents and validation cases.
type usageFold struct {
	name string
	docs []classifier.Doc
	val  []classifier.Case
}

// usageFolds builds the folds above from the skills and the dev cases.
func usageFolds(docs []classifier.Doc, cases []classifier.Case) []usageFold {
	usage, _ := classifier.SplitUsage(cases, 0.5)
	per := map[string][]string{}
	var oos []classifier.Case
	for _, c := range usage {
		if c.Expect == nil {
			oos = append(oos, c)
			continue
		}
		per[*c.Expect] = append(per[*c.Expect], c.Text)
	}
	with := func(manifest bool, lo, hi int) []classifier.Doc {
		out := slices.Clone(docs)
		for i, d := range out {
			var ex []string
			if manifest {
				ex = slices.Clone(d.Examples)
			}
			u := per[d.ID]
			for _, text := range u[min(lo, len(u)):min(hi, len(u))] {
				if p := learn.Plain(learn.Redact(text, 0)); p != "" {
					ex = append(ex, p)
				}
			}
			out[i].Examples = ex
		}
		return out
	}
	val := func(lo, hi int, withOOS bool) []classifier.Case {
		var out []classifier.Case
		for _, d := range docs {
			u := per[d.ID]
			for _, text := range u[min(lo, len(u)):min(hi, len(u))] {
				out = append(out, classifier.Case{Text: text, Expect: &d.ID})
			}
		}
		if withOOS {
			out = append(out, oos...)
		}
		return out
	}
	var manifestCases []classifier.Case
	for _, d := range docs {
		for _, e := range d.Examples {
			manifestCases = append(manifestCases, classifier.Case{Text: e, Expect: &d.ID})
		}
	}
	return []usageFold{
		{"near-a", with(true, 0, 5), val(5, 10, true)},
		{"near-b", with(true, 5, 10), val(0, 5, true)},
		{"far", with(false, 0, 10), manifestCases},
		{"five", with(true, 0, 0), val(0, 10, true)},
	}
}

// usageTune prints each fold's figures at the default threshold for
// classifier.DefaultConfig and for each value of the tuning knobs (the
// confidence is not refitted: top-1 is the figure that decides; answered
// and misroutes are indicative).
func usageTune(w io.Writer, docs []classifier.Doc, cases []classifier.Case) {
	printf := printer(w)
	folds := usageFolds(docs, cases)
	row := func(label string, cfg classifier.Config) {
		printf("%-16s", label)
		var near float64
		for _, f := range folds {
			m := classifier.Evaluate(classifier.NewWithConfig(f.docs, cfg), f.val, 0.7)
			printf("  %s %5.2f %4.1f %4.1f", f.name, 100*m.Top1Accuracy, 100*m.InScopeAccuracy, 100*m.MisrouteRate)
			if f.name == "near-a" || f.name == "near-b" {
				near += m.Top1Accuracy / 2
			}
		}
		printf("  near %5.2f\n", 100*near)
	}
	printf("fold: top-1, answered, misroutes (%%) at 0.7\n")
	row("default", classifier.DefaultConfig())
	for _, k := range tuneKnobs() {
		for _, v := range k.values {
			cfg := classifier.DefaultConfig()
			k.set(&cfg, v)
			row(fmt.Sprintf("%s %g", k.name, v), cfg)
		}
	}
}
