package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A go test -json stream with a passing package, a skipped suite and a
// failing test: the plain output has the package lines .ci/run counts
// ("ok ", "FAIL", "--- FAIL") and the failing test's log, and the summary
// names the skipped suite with its reason.
const stream = `{"Action":"start","Package":"example.com/a"}
{"Action":"run","Package":"example.com/a","Test":"TestA"}
{"Action":"output","Package":"example.com/a","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"example.com/a","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"example.com/a","Test":"TestA"}
{"Action":"output","Package":"example.com/a","Output":"PASS\n"}
{"Action":"output","Package":"example.com/a","Output":"ok  \texample.com/a\t0.01s\n"}
{"Action":"pass","Package":"example.com/a"}
{"Action":"run","Package":"example.com/interop","Test":"TestJS"}
{"Action":"output","Package":"example.com/interop","Test":"TestJS","Output":"=== RUN   TestJS\n"}
{"Action":"output","Package":"example.com/interop","Test":"TestJS","Output":"    interop_test.go:43: SKIPPING THE JS INTEROP SUITE: node is not on PATH\n"}
{"Action":"output","Package":"example.com/interop","Test":"TestJS","Output":"--- SKIP: TestJS (0.00s)\n"}
{"Action":"skip","Package":"example.com/interop","Test":"TestJS"}
{"Action":"output","Package":"example.com/interop","Output":"ok  \texample.com/interop\t0.02s\n"}
{"Action":"pass","Package":"example.com/interop"}
{"Action":"run","Package":"example.com/b","Test":"TestB"}
{"Action":"output","Package":"example.com/b","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"output","Package":"example.com/b","Test":"TestB","Output":"    b_test.go:9: want 1, got 2\n"}
{"Action":"output","Package":"example.com/b","Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"}
{"Action":"fail","Package":"example.com/b","Test":"TestB"}
{"Action":"fail","Package":"example.com/b","Test":"TestParent/leaf"}
{"Action":"fail","Package":"example.com/b","Test":"TestParent"}
{"Action":"output","Package":"example.com/b","Output":"FAIL\n"}
{"Action":"output","Package":"example.com/b","Output":"FAIL\texample.com/b\t0.01s\n"}
{"Action":"fail","Package":"example.com/b"}
{"Action":"output","Package":"example.com/c","Output":"?   \texample.com/c\t[no test files]\n"}
{"Action":"skip","Package":"example.com/c"}
{"Action":"output","Package":"example.com/d","Output":"FAIL\texample.com/d [build failed]\n"}
{"Action":"fail","Package":"example.com/d"}
`

func TestFilterAndSummary(t *testing.T) {
	var out, rec bytes.Buffer
	require.NoError(t, filter(strings.NewReader(stream), &out, &rec))
	require.Equal(t, "ok  \texample.com/a\t0.01s\n"+
		"ok  \texample.com/interop\t0.02s\n"+
		"    b_test.go:9: want 1, got 2\n--- FAIL: TestB (0.00s)\n"+
		"FAIL\nFAIL\texample.com/b\t0.01s\n"+
		"?   \texample.com/c\t[no test files]\n"+
		"FAIL\texample.com/d [build failed]\n", out.String())

	file := filepath.Join(t.TempDir(), "record.jsonl")
	require.NoError(t, os.WriteFile(file, rec.Bytes(), 0o600))
	var sum bytes.Buffer
	require.Equal(t, 1, printSummary(&sum, file))
	require.Equal(t, "\n== test summary: packages 2 passed, 2 failed, 1 without tests; tests 1 passed, 3 failed, 1 skipped (and 0 skipped subtests)\n"+
		"== skipped (these did not run; their package still reads ok above):\n"+
		"   SKIP example.com/interop TestJS: SKIPPING THE JS INTEROP SUITE: node is not on PATH\n"+
		"== failed:\n"+
		"   FAILED example.com/b TestB\n"+
		"   FAILED example.com/b TestParent/leaf\n"+
		"   FAILED example.com/d (the package failed outside its tests: build, panic or timeout; see its output above)\n", sum.String())
	// The summary lines never start as .ci/run's counted lines do.
	for _, l := range strings.Split(sum.String(), "\n") {
		require.False(t, strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "FAIL"), l)
	}
	_, err := os.Stat(file)
	require.True(t, os.IsNotExist(err), "the record is removed once summarised")
}

// A package that timed out: the running test has no outcome of its own; its log (the
// timeout's panic) is printed and it is named as failed.
func TestTimedOutPackage(t *testing.T) {
	const timedOut = `{"Action":"run","Package":"example.com/e","Test":"TestSlow"}
{"Action":"output","Package":"example.com/e","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Action":"output","Package":"example.com/e","Test":"TestSlow","Output":"panic: test timed out after 10m0s\n"}
{"Action":"output","Package":"example.com/e","Output":"FAIL\texample.com/e\t600.1s\n"}
{"Action":"fail","Package":"example.com/e"}
`
	var out, rec bytes.Buffer
	require.NoError(t, filter(strings.NewReader(timedOut), &out, &rec))
	require.Equal(t, "FAIL\texample.com/e\t600.1s\npanic: test timed out after 10m0s\n", out.String())
	file := filepath.Join(t.TempDir(), "record.jsonl")
	require.NoError(t, os.WriteFile(file, rec.Bytes(), 0o600))
	var sum bytes.Buffer
	require.Equal(t, 1, printSummary(&sum, file))
	require.Contains(t, sum.String(), "   FAILED example.com/e TestSlow\n")
	require.NotContains(t, sum.String(), "outside its tests")
}
