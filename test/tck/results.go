// Package tck runs the official A2A TCK (../shared/a2a-tck, unmodified) in `make tck`: the 1.0
// TCK over JSON-RPC, HTTP+JSON and gRPC and the 0.3 TCK, each against the reference agent alone
// (package agent, the control) and against capgate in front of it. The outcomes are held to
// expected-failures.txt: a failure not listed there, or a listed test that did not fail, fails
// the run. docs/interop.md ("The official TCK") describes it.
package tck

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Outcome is what one TCK test did.
type Outcome string

// The outcomes a junit report can hold. XFail is pytest's expected failure: the TCK marks its
// SHOULD-level tests xfail, so a SHOULD the target misses is reported, not failed.
const (
	Pass  Outcome = "pass"
	Fail  Outcome = "fail"
	XFail Outcome = "xfail"
	Skip  Outcome = "skip"
)

// Result is one test's outcome.
type Result struct {
	// ID names the test: its module path under tests/ (dotted), class and name with parameters,
	// as "compatibility.jsonrpc.test_error_codes.TestX::test_y[jsonrpc]".
	ID      string
	Binding string
	Outcome Outcome
	// Message is the first line of the failure, error or skip message.
	Message string
}

type junitCase struct {
	Classname string `xml:"classname,attr"`
	Name      string `xml:"name,attr"`
	Failure   *struct {
		Message string `xml:"message,attr"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
	} `xml:"error"`
	Skipped *struct {
		Type    string `xml:"type,attr"`
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
}

// ParseJUnit reads pytest's --junitxml report. A test with a failure and an error (a teardown
// error after a failure) is one failed result.
func ParseJUnit(r io.Reader) ([]Result, error) {
	var doc struct {
		Suites []struct {
			Cases []junitCase `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("junit report: %w", err)
	}
	byID := map[string]int{}
	var out []Result
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			res := Result{ID: strings.TrimPrefix(c.Classname, "tests.") + "::" + c.Name, Outcome: Pass}
			res.Binding = bindingOf(c.Classname, c.Name)
			switch {
			case c.Failure != nil:
				res.Outcome, res.Message = Fail, c.Failure.Message
			case c.Error != nil:
				res.Outcome, res.Message = Fail, c.Error.Message
			case c.Skipped != nil && c.Skipped.Type == "pytest.xfail":
				res.Outcome, res.Message = XFail, c.Skipped.Message
			case c.Skipped != nil:
				res.Outcome, res.Message = Skip, c.Skipped.Message
			}
			res.Message = firstLine(res.Message)
			if i, ok := byID[res.ID]; ok {
				if res.Outcome == Fail {
					out[i] = res
				}
				continue
			}
			byID[res.ID] = len(out)
			out = append(out, res)
		}
	}
	return out, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 240 {
		s = s[:240] + "…"
	}
	return s
}

// Bindings are the names results are summarized under: the three transports, then tests that
// name none (agent card, transport-agnostic checks).
var Bindings = []string{"jsonrpc", "http_json", "grpc", "other"}

// bindingOf reads the transport from the test's parameters ("[jsonrpc]", "[grpc-…]") or, for
// transport-specific modules, from the module path.
func bindingOf(classname, name string) string {
	_, params, _ := strings.Cut(name, "[")
	for _, b := range Bindings[:3] {
		for _, p := range strings.FieldsFunc(params, func(r rune) bool { return r == '-' || r == ']' || r == ',' }) {
			if p == b {
				return b
			}
		}
	}
	for _, seg := range strings.Split(strings.ToLower(classname), ".") {
		switch {
		case seg == "jsonrpc" || strings.Contains(seg, "json_rpc") || strings.Contains(seg, "jsonrpc"):
			return "jsonrpc"
		case seg == "http_json" || strings.Contains(seg, "rest"):
			return "http_json"
		case seg == "grpc" || strings.Contains(seg, "grpc"):
			return "grpc"
		}
	}
	return "other"
}

// Summary counts outcomes per binding, in Bindings order.
func Summary(results []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %5s %5s %5s %5s\n", "binding", "pass", "fail", "xfail", "skip")
	total := map[Outcome]int{}
	for _, bind := range Bindings {
		n := map[Outcome]int{}
		for _, r := range results {
			if r.Binding == bind {
				n[r.Outcome]++
				total[r.Outcome]++
			}
		}
		if len(n) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%-10s %5d %5d %5d %5d\n", bind, n[Pass], n[Fail], n[XFail], n[Skip])
	}
	fmt.Fprintf(&b, "%-10s %5d %5d %5d %5d\n", "total", total[Pass], total[Fail], total[XFail], total[Skip])
	return b.String()
}

// Expected is one line of expected-failures.txt: a test of one run that fails, and why.
type Expected struct {
	Run, ID, Reason string
	Line            int
}

// ParseExpected reads expected-failures.txt: "RUN TEST-ID REASON…" per line, where RUN is
// one of the runs (agent/1.0, capgate/1.0, agent/0.3, …); blank lines and lines starting with "#" are
// comments. Every entry needs a reason, and no run lists a test twice.
func ParseExpected(r io.Reader, runs []string) ([]Expected, error) {
	var out []Expected
	seen := map[[2]string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("line %d: want RUN TEST-ID REASON, got %q", n, line)
		}
		if !slices.Contains(runs, f[0]) {
			return nil, fmt.Errorf("line %d: run %q is not one of %s", n, f[0], strings.Join(runs, ", "))
		}
		key := [2]string{f[0], f[1]}
		if prev, ok := seen[key]; ok {
			return nil, fmt.Errorf("line %d: %s %s is already listed on line %d", n, f[0], f[1], prev)
		}
		seen[key] = n
		out = append(out, Expected{Run: f[0], ID: f[1], Reason: strings.Join(f[2:], " "), Line: n})
	}
	return out, sc.Err()
}

// NotReached starts the reason of an expected-failures.txt line for a test that a capgate run
// skips while the control ran it: the TCK skips a test when a step before its check fails, so
// such a test is not a failure, but not reached either, and is held to the list like one.
const NotReached = "not reached:"

// notReached reports whether e lists a test not reached rather than a failure.
func (e Expected) notReached() bool { return strings.HasPrefix(e.Reason, NotReached) }

// Unreached are the tests of results that were skipped although control (the same TCK against
// the agent alone) ran them; none for a run without a control (nil).
func Unreached(results, control []Result) []Result {
	if control == nil {
		return nil
	}
	ran := map[string]bool{}
	for _, r := range control {
		ran[r.ID] = r.Outcome != Skip
	}
	var out []Result
	for _, r := range results {
		if r.Outcome == Skip && ran[r.ID] {
			out = append(out, r)
		}
	}
	return out
}

// Compare holds one run's results to its expected failures: every failure must be listed, and
// every listed test must have failed; with a control (the agent's results for a capgate run),
// every test not reached (Unreached) must be listed as such (NotReached), and every test listed
// so must not have been reached. It returns one message per difference.
func Compare(run string, results, control []Result, expected []Expected) []string {
	listed := map[string]Expected{}
	for _, e := range expected {
		if e.Run == run {
			listed[e.ID] = e
		}
	}
	unreached := map[string]bool{}
	for _, r := range Unreached(results, control) {
		unreached[r.ID] = true
	}
	var problems []string
	got := map[string]Result{}
	for _, r := range results {
		got[r.ID] = r
		e, ok := listed[r.ID]
		switch {
		case r.Outcome == Fail && (!ok || e.notReached()):
			problems = append(problems, fmt.Sprintf("%s %s: failed and is not in expected-failures.txt: %s", run, r.ID, r.Message))
		case unreached[r.ID] && (!ok || !e.notReached()):
			problems = append(problems, fmt.Sprintf("%s %s: skipped although the control ran it, and not in expected-failures.txt as %q: %s", run, r.ID, NotReached, r.Message))
		}
	}
	for _, e := range expected {
		if e.Run != run {
			continue
		}
		r, ok := got[e.ID]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s %s (expected-failures.txt:%d): the TCK ran no such test; remove the line", run, e.ID, e.Line))
		case e.notReached() && !unreached[e.ID]:
			problems = append(problems, fmt.Sprintf("%s %s (expected-failures.txt:%d): listed as not reached but %s; remove the line", run, e.ID, e.Line, outcomeWord(r.Outcome)))
		case !e.notReached() && r.Outcome != Fail:
			problems = append(problems, fmt.Sprintf("%s %s (expected-failures.txt:%d): listed as failing but %s; remove the line", run, e.ID, e.Line, outcomeWord(r.Outcome)))
		}
	}
	return problems
}

func outcomeWord(o Outcome) string {
	switch o {
	case Pass:
		return "passed"
	case XFail:
		return "was an expected failure of the TCK's own (xfail)"
	case Fail:
		return "failed"
	default:
		return "was skipped"
	}
}
