package cli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/router"
	"github.com/capgate/capgate/sidecar/router/classifier"
	"github.com/capgate/capgate/sidecar/router/learn"
)

// withExamples is reg with extra routing examples per capability (as
// accepted examples files would add them: server-side, never the card's).
func withExamples(reg *manifest.Registry, extra map[string][]string) *manifest.Registry {
	caps := slices.Clone(reg.All())
	for i := range caps {
		if ex := extra[caps[i].ID]; len(ex) > 0 {
			caps[i].RoutingExamples = append(slices.Clip(caps[i].RoutingExamples), ex...)
		}
	}
	return manifest.NewRegistry(caps)
}

// examplesByCapability groups --examples cases (JSON lines {"text", "expect"})
// by capability; out-of-scope lines are refused.
func examplesByCapability(cases []evalCase, reg *manifest.Registry, name string) (map[string][]string, int, error) {
	out := map[string][]string{}
	n := 0
	for i, c := range cases {
		if c.Expect == nil {
			return nil, 0, usageErr("%s:%d: an example needs \"expect\": the capability it routes to", name, i+1)
		}
		if _, ok := reg.Get(*c.Expect); !ok {
			return nil, 0, usageErr("%s:%d: expect %q is not a capability of the manifests", name, i+1, *c.Expect)
		}
		out[*c.Expect] = append(out[*c.Expect], c.Text)
		n++
	}
	return out, n, nil
}

// curvePoint is the figures with a number of examples per skill.
type curvePoint struct {
	PerSkill int                `json:"examples_per_skill"`
	Added    int                `json:"added_per_skill"`
	Metrics  classifier.Metrics `json:"-"`
}

// learningCurve measures the classifier on the evaluation half as examples
// per skill grow: the manifests' own, then usage-half texts added per skill
// (redacted as captured candidates are) up to each point of perSkill.
func learningCurve(reg *manifest.Registry, cases []classifier.Case, perSkill []int, share, threshold float64) ([]curvePoint, int, int) {
	usage, eval := classifier.SplitUsage(cases, share)
	pool := map[string][]string{}
	for _, c := range usage {
		if c.Expect != nil {
			pool[*c.Expect] = append(pool[*c.Expect], learn.Redact(c.Text, 0))
		}
	}
	base := 0
	for _, c := range reg.All() {
		base = max(base, len(c.Skill.Examples)+len(c.RoutingExamples))
	}
	var out []curvePoint
	for _, n := range perSkill {
		add := max(n-base, 0)
		extra := map[string][]string{}
		for id, texts := range pool {
			extra[id] = texts[:min(add, len(texts))]
		}
		ix := router.NewIndex(withExamples(reg, extra), threshold)
		out = append(out, curvePoint{PerSkill: n, Added: add, Metrics: classifier.Evaluate(ix.Classifier(), eval, threshold)})
	}
	return out, len(usage), len(eval)
}

// parseCurve reads --curve: examples per skill, ascending positive integers.
func parseCurve(arg string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(arg, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, usageErr("--curve: %q is not an ascending list of examples per skill, e.g. 5,10,20", arg)
		}
		out = append(out, n)
	}
	return out, nil
}

// writeCurve prints the learning curve as a Markdown table, or as JSON.
func writeCurve(w io.Writer, pts []curvePoint, usage, eval int, share, threshold float64, poolMin int, asJSON bool) error {
	if asJSON {
		out := make([]map[string]any, len(pts))
		for i, p := range pts {
			m := evalJSON(p.Metrics, threshold, 0)
			delete(m, "structured")
			m["examples_per_skill"], m["added_per_skill"] = p.PerSkill, p.Added
			out[i] = m
		}
		return writeJSON(w, out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "usage half: %d cases (%.0f%%), evaluation half: %d cases; threshold %.2f; at most %d usage examples for some skill\n\n",
		usage, 100*share, eval, threshold, poolMin)
	fmt.Fprintln(&b, "| examples per skill | top-1 | in-scope answered right | clarified | misroutes | OOS recall |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|")
	for _, p := range pts {
		m := p.Metrics
		note := ""
		if p.Added > poolMin {
			note = fmt.Sprintf(" (usage half has %d for some skills)", poolMin)
		}
		fmt.Fprintf(&b, "| %d%s | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.0f%% |\n", p.PerSkill, note,
			100*m.Top1Accuracy, 100*m.InScopeAccuracy, 100*m.ClarificationRate, 100*m.MisrouteRate, 100*m.OOSRecall)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
