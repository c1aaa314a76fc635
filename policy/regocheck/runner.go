package regocheck

import (
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/rego"
)

// testTimeout bounds one Rego test. The truth-table tests evaluate thousands
// of decisions; under coverage or the race detector they need far more than
// the 5s `opa test` allows by default.
const testTimeout = 2 * time.Minute

// Result is the outcome of [RunTests].
type Result struct {
	Tests                            []TestResult
	Passed, Failed, Errored, Skipped int
	// CoverageEnabled is set when coverage was measured; Coverage is then
	// the percentage of policy lines (test files excluded) the tests ran and
	// Uncovered the lines they did not, as "file:row" or "file:from-to".
	CoverageEnabled bool
	Coverage        float64
	Threshold       float64
	Uncovered       []string
}

// TestResult is one Rego test.
type TestResult struct {
	Package  string // e.g. data.capgate.authz_test
	Name     string // e.g. test_decision_capability_unknown
	Location string // file:row
	Pass     bool
	Skip     bool
	Error    string // evaluation error, if any
	Output   string // print() output
	Duration time.Duration
}

// Pass reports whether every test passed (there was at least one) and, when
// coverage was measured, it reached the threshold.
func (r Result) Pass() bool {
	ok := len(r.Tests) > 0 && r.Failed == 0 && r.Errored == 0
	if r.CoverageEnabled {
		ok = ok && r.Coverage >= r.Threshold
	}
	return ok
}

// RunTests runs the embedded Rego unit tests (rego.Tests) against the
// embedded policy (rego.Modules) with OPA's tester, compiled strictly with the
// policy's schema set. It writes an `opa test -v` style report to w (PASS or
// FAIL per test, the evaluation trace of every failing test) and, with
// coverage, the percentage of policy lines covered and the uncovered lines.
// A non-nil error means the tests could not run; failures and a coverage
// below threshold (a percentage, e.g. 95) are reported by Result.Pass.
func RunTests(ctx context.Context, w io.Writer, coverage bool, threshold float64) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	policy, err := rego.Modules()
	if err != nil {
		return Result{}, fmt.Errorf("read policy: %w", err)
	}
	tests, err := rego.Tests()
	if err != nil {
		return Result{}, fmt.Errorf("read policy tests: %w", err)
	}
	srcs := maps.Clone(policy)
	maps.Copy(srcs, tests)

	var cov *cover.Cover
	if coverage {
		cov = cover.New()
	}
	results, err := runTests(ctx, srcs, cov, false, "")
	if err != nil {
		return Result{}, err
	}
	res := Result{CoverageEnabled: coverage, Threshold: threshold}
	for _, tr := range results {
		res.add(tr)
	}
	if err := report(w, results, false); err != nil {
		return res, err
	}

	if failing := failingNames(results); len(failing) > 0 {
		// Coverage and tracing exclude each other: run the failing tests
		// again, traced, and print their traces.
		traced, err := runTests(ctx, srcs, nil, true, "^("+strings.Join(failing, "|")+")$")
		if err != nil {
			return res, err
		}
		if _, err := fmt.Fprintln(w, "\nTraces of failing tests:"); err != nil {
			return res, err
		}
		if err := report(w, traced, true); err != nil {
			return res, err
		}
	}

	if coverage {
		parsed, err := Parse(policy)
		if err != nil {
			return res, err
		}
		res.setCoverage(cov.Report(parsed), slices.Sorted(maps.Keys(policy)))
		if _, err := fmt.Fprintf(w, "Coverage: %.2f%% of %s (threshold %.2f%%)\n",
			res.Coverage, strings.Join(slices.Sorted(maps.Keys(policy)), ", "), threshold); err != nil {
			return res, err
		}
		for _, u := range res.Uncovered {
			if _, err := fmt.Fprintf(w, "  not covered: %s\n", u); err != nil {
				return res, err
			}
		}
		if res.Coverage < threshold {
			if _, err := fmt.Fprintln(w, "FAIL: coverage below threshold"); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// runTests compiles srcs strictly and runs the tests whose name matches
// filter (all when empty), collecting every result.
func runTests(ctx context.Context, srcs map[string]string, cov *cover.Cover, trace bool, filter string) ([]*tester.Result, error) {
	parsed, err := Parse(srcs)
	if err != nil {
		return nil, err
	}
	compiler, err := NewCompiler(true)
	if err != nil {
		return nil, err
	}
	compiler = compiler.WithEnablePrintStatements(true)
	store := inmem.New()
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer store.Abort(ctx, txn)

	runner := tester.NewRunner().
		SetCompiler(compiler).
		SetStore(store).
		SetModules(parsed).
		SetTimeout(testTimeout).
		CapturePrintOutput(true).
		StackTraces(true).
		EnableTracing(trace).
		Filter(filter)
	if cov != nil {
		// The supplementary passes (no indexing, no early exit) only tag
		// uncovered lines; they triple the cost of the truth-table tests.
		runner = runner.SetCoverageRuns([]cover.Kind{}).SetCoverageQueryTracer(cov)
	}
	ch, err := runner.RunTests(ctx, txn)
	if err != nil {
		var problems diag.Set
		addASTErrors(&problems, "", err)
		return nil, problems.ErrOrNil()
	}
	var out []*tester.Result
	for tr := range ch {
		out = append(out, tr)
	}
	slices.SortFunc(out, func(a, b *tester.Result) int {
		return strings.Compare(a.Package+"."+a.Name, b.Package+"."+b.Name)
	})
	return out, ctx.Err()
}

func report(w io.Writer, results []*tester.Result, trace bool) error {
	ch := make(chan *tester.Result, len(results))
	for _, tr := range results {
		ch <- tr
	}
	close(ch)
	return tester.PrettyReporter{Output: w, Verbose: true, FailureLine: trace}.Report(ch)
}

func failingNames(results []*tester.Result) []string {
	var names []string
	for _, tr := range results {
		if !tr.Pass() && !tr.Skip {
			names = append(names, regexp.QuoteMeta(tr.Package+"."+tr.Name))
		}
	}
	return names
}

func (r *Result) add(tr *tester.Result) {
	t := TestResult{
		Package:  tr.Package,
		Name:     tr.Name,
		Pass:     tr.Pass(),
		Skip:     tr.Skip,
		Output:   string(tr.Output),
		Duration: tr.Duration,
	}
	if tr.Location != nil {
		t.Location = fmt.Sprintf("%s:%d", tr.Location.File, tr.Location.Row)
	}
	if tr.Error != nil {
		t.Error = tr.Error.Error()
	}
	switch {
	case tr.Skip:
		r.Skipped++
	case tr.Error != nil:
		r.Errored++
	case tr.Fail:
		r.Failed++
	default:
		r.Passed++
	}
	r.Tests = append(r.Tests, t)
}

// setCoverage keeps the coverage of the policy files only: the report also
// counts the test files, which would inflate the figure.
func (r *Result) setCoverage(rep cover.Report, files []string) {
	var covered, notCovered int
	for _, file := range files {
		fr, ok := rep.Files[file]
		if !ok {
			continue
		}
		covered += fr.CoveredLines
		notCovered += fr.NotCoveredLines
		for _, rg := range fr.NotCovered {
			if rg.Start.Row == rg.End.Row {
				r.Uncovered = append(r.Uncovered, fmt.Sprintf("%s:%d", file, rg.Start.Row))
			} else {
				r.Uncovered = append(r.Uncovered, fmt.Sprintf("%s:%d-%d", file, rg.Start.Row, rg.End.Row))
			}
		}
	}
	if total := covered + notCovered; total > 0 {
		r.Coverage = 100 * float64(covered) / float64(total)
	}
}
