package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/router"
	"github.com/capgate/capgate/sidecar/router/classifier"
)

func runRoute(ctx context.Context, env Env, args []string) error {
	if len(args) > 0 && args[0] == "eval" {
		return runRouteEval(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "examples" {
		return runRouteExamples(ctx, env, args[1:])
	}
	fs := newFlags(env, "route", `route [--config capgate.yaml] [--claims claims.json] [--media type,...] [--data JSON] [--hint ID] "message text"`)
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example)")
	claimsPath := fs.String("claims", "", "JWT claims of the caller (JSON object; - for stdin); omit for an anonymous caller")
	media := fs.String("media", "", "media types of non-text parts the message carries, comma-separated (e.g. application/pdf)")
	hint := fs.String("hint", "", "a skill hint (metadata.skillId)")
	dataPart := fs.String("data", "", `the JSON value of a data part the message carries (application/json), e.g. '{"invoice_id": "INV-1"}'`)
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("give the message text as one argument")
	}
	d, e, caller, err := loadForCaller(ctx, env, *cfgPath, *claimsPath)
	if err != nil {
		return err
	}
	rights, err := router.NewRights(ctx, e, caller)
	if err != nil {
		return err
	}
	msg := &protocol.MessageInfo{SkillHint: *hint, Parts: []protocol.PartInfo{{Kind: "text", MediaType: "text/plain", Text: fs.Arg(0)}}}
	for _, t := range strings.Split(*media, ",") {
		if t = strings.TrimSpace(t); t != "" {
			msg.Parts = append(msg.Parts, protocol.PartInfo{Kind: "raw", MediaType: t})
		}
	}
	if *dataPart != "" {
		v := jsontext.Value(*dataPart)
		if !v.IsValid() {
			return usageErr("--data must be one JSON value")
		}
		msg.Parts = append(msg.Parts, protocol.PartInfo{Kind: protocol.PartData, MediaType: "application/json", Data: v})
	}
	ix := router.NewIndex(d.Registry(), d.Config.Router.Threshold)
	dec, perr := ix.Route(msg, rights)
	if perr != nil {
		_, err = fmt.Fprintf(env.Stdout, "refused: %s (%d): %s\n", perr.Reason(), perr.JSONRPCCode(), perr.Message)
		if err == nil && *claimsPath == "" {
			_, err = fmt.Fprintln(env.Stdout, anonymousHint)
		}
		return err
	}
	if _, err := fmt.Fprintf(env.Stdout, "layer: %s\n", dec.Layer); err != nil {
		return err
	}
	if dec.Capability != "" {
		if _, err := fmt.Fprintf(env.Stdout, "capability: %s\n", dec.Capability); err != nil {
			return err
		}
	}
	switch dec.Layer {
	case router.LayerClassifier, router.LayerSingle, router.LayerConfirm, router.LayerClarify:
		th := ix.Threshold()
		if dec.Capability != "" {
			th = ix.ThresholdFor(dec.Capability)
		} else if dec.Layer == router.LayerConfirm {
			th = ix.ThresholdFor(dec.Candidates[0].ID)
		}
		if _, err := fmt.Fprintf(env.Stdout, "confidence: %.3f (threshold %.2f)\n", dec.Confidence, th); err != nil {
			return err
		}
	}
	if dec.Layer == router.LayerConfirm {
		if _, err := fmt.Fprintf(env.Stdout, "confirm: %s (routing mode confirm: the caller is asked before it runs)\n", dec.Candidates[0].ID); err != nil {
			return err
		}
	}
	if dec.IgnoredHint != "" {
		if _, err := fmt.Fprintf(env.Stdout, "ignored hint: %s (not a capability this caller may use for this message)\n", dec.IgnoredHint); err != nil {
			return err
		}
	}
	if len(dec.Candidates) > 0 {
		if _, err := fmt.Fprintln(env.Stdout, "candidates:"); err != nil {
			return err
		}
		for _, c := range dec.Candidates {
			if _, err := fmt.Fprintf(env.Stdout, "  %-28s %.3f  %s%s\n", c.ID, c.Score, c.Name, modeNote(ix, c.ID)); err != nil {
				return err
			}
		}
	}
	return nil
}

// modeNote marks a candidate whose routing mode is not auto.
func modeNote(ix *router.Index, id string) string {
	if m := ix.Mode(id); m != manifest.RoutingAuto {
		return "  [routing: " + string(m) + "]"
	}
	return ""
}

// anonymousHint follows a refusal of `route` without --claims.
const anonymousHint = `hint: routed as an anonymous caller (no --claims); pass the caller's JWT claims, e.g. --claims <(echo '{"sub":"partner-1","scope":"recon.run"}')`

func runRouteEval(_ context.Context, env Env, args []string) error {
	fs := newFlags(env, "route eval", "route eval --manifests FILE|DIR --cases FILE.jsonl [--examples FILE.jsonl] [--threshold 0.7 | --sweep 0.4,0.5,... | --learning-curve [--curve 5,10,20] [--usage-share 0.5]] [--json]")
	manifests := fs.String("manifests", "", "a JSON array of manifests, or a folder of manifest files")
	casesPath := fs.String("cases", "", "JSON lines: {\"text\": ..., \"data\": [data part values] (optional), \"expect\": id or null}")
	threshold := fs.Float64("threshold", config.DefaultRouterThreshold, "confidence below which the router asks for clarification")
	sweepArg := fs.String("sweep", "", "comma-separated thresholds: a table of the figures at each (to choose router.threshold)")
	asJSON := fs.Bool("json", false, "print one JSON object (with --sweep, one per threshold, as a list)")
	examplesPath := fs.String("examples", "", "extra routing examples, JSON lines {\"text\": ..., \"expect\": id}, added to the skills as accepted examples (routing.examples_file) are")
	curveMode := fs.Bool("learning-curve", false, "split --cases per skill into a usage half and an evaluation half, and show the figures on the evaluation half as usage texts are added as examples (--curve)")
	curveArg := fs.String("curve", "5,10,20", "with --learning-curve: examples per skill at each point (the manifests' own count first)")
	share := fs.Float64("usage-share", 0.5, "with --learning-curve: the share of each skill's cases in the usage half")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *manifests == "" || *casesPath == "" {
		return usageErr("--manifests and --cases are required")
	}
	if *threshold < 0 || *threshold > 1 {
		return usageErr("--threshold must be in [0, 1]")
	}
	sweep, err := parseSweep(*sweepArg)
	if err != nil {
		return err
	}
	reg, err := loadManifestsArg(*manifests)
	if err != nil {
		return err
	}
	if *examplesPath != "" {
		exCases, err := readCases(*examplesPath)
		if err != nil {
			return err
		}
		extra, n, err := examplesByCapability(exCases, reg, *examplesPath)
		if err != nil {
			return err
		}
		reg = withExamples(reg, extra)
		if _, err := fmt.Fprintf(env.Stdout, "extra examples: %d for %d skills (%s)\n", n, len(extra), *examplesPath); err != nil {
			return err
		}
	}
	cases, err := readCases(*casesPath)
	if err != nil {
		return err
	}
	for i, c := range cases {
		if c.Expect != nil {
			if _, ok := reg.Get(*c.Expect); !ok {
				return usageErr("%s:%d: expect %q is not a capability of the manifests", *casesPath, i+1, *c.Expect)
			}
		}
	}
	if *curveMode {
		return runCurve(env, reg, cases, *curveArg, *share, *threshold, *asJSON)
	}
	ix := router.NewIndex(reg, *threshold)
	structured := 0
	for i := range cases {
		if len(cases[i].data) > 0 {
			if id, ok := ix.Structured(cases[i].data); ok {
				cases[i].Decided = id
				structured++
			}
		}
	}
	plain := make([]classifier.Case, len(cases))
	for i, c := range cases {
		plain[i] = c.Case
	}
	if len(sweep) > 0 {
		return writeSweep(env.Stdout, ix.Classifier(), plain, sweep, structured, *asJSON)
	}
	m := classifier.Evaluate(ix.Classifier(), plain, *threshold)
	if *asJSON {
		return writeJSON(env.Stdout, evalJSON(m, *threshold, structured))
	}
	_, err = fmt.Fprintf(env.Stdout, "cases: %d (%d skills), threshold %.2f, %d decided by the structured layer\n"+
		"in-scope accuracy:      %6.2f%%\n"+
		"top-1 accuracy:         %6.2f%%  (no threshold)\n"+
		"out-of-scope recall:    %6.2f%%\n"+
		"in-scope clarification: %6.2f%%\n"+
		"misroutes:              %6.2f%%\n"+
		"latency p50 / p99:      %v / %v\n",
		m.N, reg.Len(), *threshold, structured,
		100*m.InScopeAccuracy,
		100*m.Top1Accuracy,
		100*m.OOSRecall,
		100*m.ClarificationRate,
		100*m.MisrouteRate,
		m.P50, m.P99)
	return err
}

// runCurve is route eval --learning-curve.
func runCurve(env Env, reg *manifest.Registry, cases []evalCase, curveArg string, share, threshold float64, asJSON bool) error {
	perSkill, err := parseCurve(curveArg)
	if err != nil {
		return err
	}
	if !(share > 0 && share < 1) {
		return usageErr("--usage-share must be in (0, 1)")
	}
	plain := make([]classifier.Case, len(cases))
	for i, c := range cases {
		if len(c.data) > 0 {
			return usageErr("--learning-curve: case %d has data parts; the curve measures text examples only", i+1)
		}
		plain[i] = c.Case
	}
	pts, nu, ne := learningCurve(reg, plain, perSkill, share, threshold)
	usage, _ := classifier.SplitUsage(plain, share)
	per := map[string]int{}
	for _, c := range usage {
		if c.Expect != nil {
			per[*c.Expect]++
		}
	}
	poolMin := -1
	for _, c := range reg.All() {
		if n := per[c.ID]; poolMin < 0 || n < poolMin {
			poolMin = n
		}
	}
	return writeCurve(env.Stdout, pts, nu, ne, share, threshold, max(poolMin, 0), asJSON)
}

// parseSweep reads --sweep: thresholds in [0, 1], comma-separated.
func parseSweep(arg string) ([]float64, error) {
	if arg == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(arg, ",") {
		th, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || th < 0 || th > 1 {
			return nil, usageErr("--sweep: %q is not a threshold in [0, 1]", f)
		}
		out = append(out, th)
	}
	return out, nil
}

// writeSweep prints the figures at each threshold: a Markdown table (as
// docs/routing.md shows them) or, as JSON, a list of eval objects.
func writeSweep(w io.Writer, ix *classifier.Index, cases []classifier.Case, sweep []float64, structured int, asJSON bool) error {
	if asJSON {
		out := make([]map[string]any, len(sweep))
		for i, th := range sweep {
			out[i] = evalJSON(classifier.Evaluate(ix, cases, th), th, structured)
		}
		return writeJSON(w, out)
	}
	var b strings.Builder
	fmt.Fprintln(&b, "| threshold | in-scope acc | OOS recall | clarification | misroute |")
	fmt.Fprintln(&b, "|---|---|---|---|---|")
	for _, th := range sweep {
		m := classifier.Evaluate(ix, cases, th)
		fmt.Fprintf(&b, "| %.2f | %.1f%% | %.0f%% | %.1f%% | %.1f%% |\n", th, 100*m.InScopeAccuracy, 100*m.OOSRecall, 100*m.ClarificationRate, 100*m.MisrouteRate)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func evalJSON(m classifier.Metrics, threshold float64, structured int) map[string]any {
	return map[string]any{
		"in_scope_accuracy":  m.InScopeAccuracy,
		"top1_accuracy":      m.Top1Accuracy,
		"oos_recall":         m.OOSRecall,
		"clarification_rate": m.ClarificationRate,
		"misroute_rate":      m.MisrouteRate,
		"p50_us":             float64(m.P50.Nanoseconds()) / 1e3,
		"p99_us":             float64(m.P99.Nanoseconds()) / 1e3,
		"cases":              m.N,
		"structured":         structured,
		"threshold":          threshold,
	}
}

func writeJSON(w io.Writer, v any) error {
	if err := json.MarshalWrite(w, v, json.Deterministic(true), jsontext.WithIndent("  ")); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// loadManifestsArg loads a JSON array file or a folder of manifests, without
// a handler check (no deployment config is involved).
func loadManifestsArg(p string) (*manifest.Registry, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, usageErr("manifests: %v", err)
	}
	var reg *manifest.Registry
	if st.IsDir() {
		reg, err = manifest.Load([]manifest.Dir{{FS: os.DirFS(p), Name: filepath.Clean(p)}}, manifest.Options{})
	} else {
		b, rerr := os.ReadFile(p)
		if rerr != nil {
			return nil, usageErr("manifests: %v", rerr)
		}
		reg, err = manifest.LoadJSONArray(filepath.Base(p), b, manifest.Options{})
	}
	if err != nil {
		return nil, usageErr("invalid manifests:\n%v", err)
	}
	return reg, nil
}

// evalCase is a routing case and the data parts its message carries.
type evalCase struct {
	classifier.Case
	data []jsontext.Value
}

// readCases reads routing cases, one JSON object per line.
func readCases(p string) ([]evalCase, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, usageErr("cases: %v", err)
	}
	defer func() { _ = f.Close() }()
	return parseCases(f, p)
}

func parseCases(r io.Reader, name string) ([]evalCase, error) {
	var cases []evalCase
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var c struct {
			Text   string           `json:"text"`
			Data   []jsontext.Value `json:"data"`
			Expect *string          `json:"expect"`
		}
		if err := json.Unmarshal([]byte(b), &c, json.RejectUnknownMembers(true)); err != nil {
			return nil, usageErr("%s:%d: not a case object {\"text\", \"data\", \"expect\"}", name, line)
		}
		cases = append(cases, evalCase{Case: classifier.Case{Text: c.Text, Expect: c.Expect}, data: c.Data})
	}
	if err := sc.Err(); err != nil {
		return nil, usageErr("%s: %v", name, err)
	}
	if len(cases) == 0 {
		return nil, usageErr("%s: no cases", name)
	}
	return cases, nil
}
