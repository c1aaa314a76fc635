// Command testsum runs `go test -json` and prints what plain `go test`
// prints (a line per package — "ok", "FAIL", "?" — and the output of
// failing tests), recording each package and test outcome; with -summary
// it prints the closing summary of the recorded runs, naming every skipped
// test with the reason it gave, so that a skipped suite does not read as a
// passed one, and every failed test (or package that failed outside its
// tests), so that a failure is named at the end of a long run.
//
//	go run ./test/testsum -record FILE -- -race -count=1 ./...   # exit status: go test's
//	go run ./test/testsum -summary FILE
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	record := flag.String("record", "", "append the outcome of each package and test to this file (JSON lines)")
	summary := flag.String("summary", "", "print the summary of the outcomes recorded in this file, then remove it")
	flag.Parse()
	switch {
	case *summary != "":
		os.Exit(printSummary(os.Stdout, *summary))
	case *record != "":
		os.Exit(runTests(*record, flag.Args()))
	}
	fmt.Fprintln(os.Stderr, "usage: testsum -record FILE -- <go test flags and packages> | testsum -summary FILE")
	os.Exit(2)
}

// runTests runs go test -json with args, echoing plain output to stdout and
// appending outcomes to the record file; it returns go test's exit status.
func runTests(recordFile string, args []string) int {
	f, err := os.OpenFile(recordFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		return 2
	}
	defer func() { _ = f.Close() }()
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		return 2
	}
	ferr := filter(out, os.Stdout, f)
	werr := cmd.Wait()
	if ferr != nil {
		fmt.Fprintln(os.Stderr, "testsum:", ferr)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(werr, &exit):
		return exit.ExitCode()
	case werr != nil:
		fmt.Fprintln(os.Stderr, "testsum:", werr)
		return 2
	case ferr != nil:
		return 2
	}
	return 0
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action      string
	Package     string
	ImportPath  string // build-output events
	Test        string
	Output      string
	Elapsed     float64
	FailedBuild string
}

// Outcome is one record: a package's or a test's end.
type Outcome struct {
	Package string `json:"package"`
	Test    string `json:"test,omitempty"`
	Action  string `json:"action"`           // pass, fail, skip
	Reason  string `json:"reason,omitempty"` // a skip's message
}

// filter reads go test -json from r, writes plain go test output to w and
// outcomes to rec.
func filter(r io.Reader, w, rec io.Writer) error {
	held := map[string][]string{} // package + "\x00" + test -> output lines
	enc := json.NewEncoder(rec)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (go test's own messages): pass through.
			_, _ = fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "build-output":
			_, _ = io.WriteString(w, e.Output)
		case "output":
			if e.Test == "" {
				if strings.HasPrefix(e.Output, "=== ") || e.Output == "PASS\n" {
					continue
				}
				_, _ = io.WriteString(w, e.Output)
				continue
			}
			if strings.HasPrefix(e.Output, "=== ") {
				continue
			}
			held[key] = append(held[key], e.Output)
		case "pass", "fail", "skip":
			if e.Action == "fail" && e.Test == "" {
				// A package that failed outside a test's end (a timeout's panic, a crash)
				// leaves its running tests without an outcome: print what they logged and
				// record them as failed, so the failure is named.
				if err := flushUnfinished(w, enc, held, e.Package); err != nil {
					return err
				}
			}
			out := held[key]
			delete(held, key)
			if e.Action == "fail" && e.Test != "" {
				for _, l := range out {
					_, _ = io.WriteString(w, l)
				}
			}
			o := Outcome{Package: e.Package, Test: e.Test, Action: e.Action}
			if e.Action == "skip" && e.Test != "" {
				o.Reason = skipReason(out)
			}
			if err := enc.Encode(o); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}

// flushUnfinished writes the output of pkg's tests that have no outcome and records each as
// failed, in name order.
func flushUnfinished(w io.Writer, enc *json.Encoder, held map[string][]string, pkg string) error {
	var keys []string
	for k := range held {
		if p, test, _ := strings.Cut(k, "\x00"); p == pkg && test != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, l := range held[k] {
			_, _ = io.WriteString(w, l)
		}
		delete(held, k)
		_, test, _ := strings.Cut(k, "\x00")
		if err := enc.Encode(Outcome{Package: pkg, Test: test, Action: "fail"}); err != nil {
			return err
		}
	}
	return nil
}

// skipReason is the first message a skipped test logged (its t.Skip text),
// bounded to one line.
func skipReason(lines []string) string {
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		if _, msg, ok := strings.Cut(t, ": "); ok && strings.Contains(t[:strings.Index(t, ": ")], ".go:") {
			t = msg
		}
		if len(t) > 200 {
			t = t[:200] + "…"
		}
		return t
	}
	return "(no reason given)"
}

// printSummary prints the closing summary of a record file and removes it;
// it returns 1 when a recorded package or test failed.
func printSummary(w io.Writer, recordFile string) int {
	data, err := os.ReadFile(recordFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		return 2
	}
	_ = os.Remove(recordFile)
	var pkgOK, pkgFail, pkgNone, pass, fail, subSkips int
	var skipped, failed, failedPkgs []Outcome
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l == "" {
			continue
		}
		var o Outcome
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			continue
		}
		switch {
		case o.Test == "" && o.Action == "fail":
			pkgFail++
			failedPkgs = append(failedPkgs, o)
		case o.Test == "" && o.Action == "skip":
			pkgNone++ // no test files, or no test matched -run
		case o.Test == "":
			pkgOK++
		case o.Action == "pass":
			pass++
		case o.Action == "fail":
			fail++
			failed = append(failed, o)
		case strings.Contains(o.Test, "/"):
			subSkips++
		default:
			skipped = append(skipped, o)
		}
	}
	sortOutcomes(skipped)
	_, _ = fmt.Fprintf(w, "\n== test summary: packages %d passed, %d failed, %d without tests; tests %d passed, %d failed, %d skipped (and %d skipped subtests)\n",
		pkgOK, pkgFail, pkgNone, pass, fail, len(skipped), subSkips)
	if len(skipped) > 0 {
		_, _ = fmt.Fprintln(w, "== skipped (these did not run; their package still reads ok above):")
		for _, s := range skipped {
			_, _ = fmt.Fprintf(w, "   SKIP %s %s: %s\n", s.Package, s.Test, s.Reason)
		}
	}
	if pkgFail > 0 || fail > 0 {
		printFailed(w, failed, failedPkgs)
		return 1
	}
	return 0
}

// maxFailedListed bounds the failed tests the summary names.
const maxFailedListed = 100

// printFailed names each failed test that has no failed subtest of its own
// (the failures to read first: a parent fails with any of its subtests),
// then each failed package none of whose tests failed (a build failure, a
// panic outside a test, a timeout). Its lines never start as .ci/run's
// counted lines do ("ok ", "FAIL", "--- FAIL").
func printFailed(w io.Writer, failed, failedPkgs []Outcome) {
	sortOutcomes(failed)
	var leaves []Outcome
	withTests := map[string]bool{}
	for i, o := range failed {
		withTests[o.Package] = true
		if i+1 < len(failed) && failed[i+1].Package == o.Package && strings.HasPrefix(failed[i+1].Test, o.Test+"/") {
			continue
		}
		leaves = append(leaves, o)
	}
	_, _ = fmt.Fprintln(w, "== failed:")
	for i, o := range leaves {
		if i == maxFailedListed {
			_, _ = fmt.Fprintf(w, "   … and %d more\n", len(leaves)-maxFailedListed)
			break
		}
		_, _ = fmt.Fprintf(w, "   FAILED %s %s\n", o.Package, o.Test)
	}
	for _, p := range failedPkgs {
		if !withTests[p.Package] {
			_, _ = fmt.Fprintf(w, "   FAILED %s (the package failed outside its tests: build, panic or timeout; see its output above)\n", p.Package)
		}
	}
}

// sortOutcomes orders outcomes by package, then test name.
func sortOutcomes(outs []Outcome) {
	sort.Slice(outs, func(i, j int) bool {
		if outs[i].Package != outs[j].Package {
			return outs[i].Package < outs[j].Package
		}
		return outs[i].Test < outs[j].Test
	})
}
