package cli_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/test/testutil"
)

// hostileLogEnv holds the command a child test process runs.
const hostileLogEnv = "CAPGATE_TEST_HOSTILE_LOG"

// hostileMemoryBound is what reading the hostile log may add to the
// process's memory (runtime.MemStats.Sys, all the Go runtime holds from
// the system): the decoder holds one event at a time, at most 1 MiB.
// Reading the line whole, as capgate once did, takes 60 MiB for the line
// and gigabytes for its events.
const hostileMemoryBound = 32 << 20

// hostileRun is what a child reports of one command.
type hostileRun struct {
	Code           int
	Stderr         string
	SysBefore, Sys uint64
}

// hostileLog writes a gzip'd decision log of one line, an array of
// 20,000,000 empty events: 60 MB that gzip to some 60 KB (the same gzip
// member, of a million events, repeated: gzip readers read concatenated
// members as one stream).
func hostileLog(t *testing.T) string {
	t.Helper()
	member := func(s string) []byte {
		var b bytes.Buffer
		zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
		require.NoError(t, err)
		_, err = zw.Write([]byte(s))
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		return b.Bytes()
	}
	million := member(strings.Repeat("{},", 1_000_000))
	var file bytes.Buffer
	file.Write(member("["))
	for range 20 {
		file.Write(million)
	}
	file.Write(member("{}]\n"))
	path := filepath.Join(t.TempDir(), "hostile.json.gz")
	require.NoError(t, os.WriteFile(path, file.Bytes(), 0o644))
	require.Less(t, file.Len(), 100<<10, "a small file")
	return path
}

// A decision log of 20 million empty events on one line (61 KB gzip'd) is
// refused at capgate's bound on events, with its file, line and event,
// as an input error (exit 2), by `explain --decision-id` and by `access
// replay`; reading it adds less than hostileMemoryBound to the process's
// memory. Each command runs in a child process (this test binary again),
// so that what is measured is the command alone and a regression fails
// the test instead of exhausting the test's own memory.
func TestHostileDecisionLogIsRefusedInBoundedMemory(t *testing.T) {
	if args := os.Getenv(hostileLogEnv); args != "" {
		hostileChild(t, args)
		return
	}
	path := hostileLog(t)
	head := testutil.CopyFinance(t)
	for name, args := range map[string][]string{
		"explain": {"explain", "--decision-id", "x", "--decisions", path},
		"replay":  {"access", "replay", "--head", head, "--decisions", path},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHostileDecisionLogIsRefusedInBoundedMemory$", "-test.v=false")
			argv, err := json.Marshal(args)
			require.NoError(t, err)
			cmd.Env = append(os.Environ(), hostileLogEnv+"="+string(argv))
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "the child failed (out of memory?): %s", out[max(0, len(out)-2000):])
			i := bytes.LastIndex(out, []byte("HOSTILE "))
			require.GreaterOrEqual(t, i, 0, "%s", out)
			var r hostileRun
			require.NoError(t, json.Unmarshal(bytes.TrimSpace(bytes.SplitN(out[i+len("HOSTILE "):], []byte("\n"), 2)[0]), &r))
			require.Equal(t, cli.ExitUsage, r.Code, r.Stderr)
			require.True(t, strings.HasSuffix(r.Stderr, ": "+path+":1: event 4194305 of the line's array: more than 4194304 events "+
				"(capgate reads at most that many of one file; split it)\n"), r.Stderr)
			grew := int64(r.Sys) - int64(r.SysBefore)
			t.Logf("%s: memory from the system %d MiB before, %d MiB after (+%d MiB)", name, r.SysBefore>>20, r.Sys>>20, grew>>20)
			require.Less(t, grew, int64(hostileMemoryBound), "reading the log grew the process's memory by %d MiB", grew>>20)
		})
	}
}

// hostileChild runs the command (a JSON array in arg) and prints what it
// measured.
func hostileChild(t *testing.T, arg string) {
	var args []string
	require.NoError(t, json.Unmarshal([]byte(arg), &args))
	env := cli.Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Stdin: strings.NewReader("")}
	if args[0] == "access" {
		// Prepare the head's engine first, outside the measure: a
		// replay of nothing.
		empty := filepath.Join(t.TempDir(), "empty.log")
		require.NoError(t, os.WriteFile(empty, nil, 0o644))
		pre := append(append([]string{}, args[:len(args)-1]...), empty)
		require.Equal(t, cli.ExitOK, cli.Run(t.Context(), pre, env), "%s", env.Stderr)
		env.Stderr = &bytes.Buffer{}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code := cli.Run(t.Context(), args, env)
	runtime.ReadMemStats(&after)
	b, err := json.Marshal(hostileRun{Code: code, Stderr: env.Stderr.(*bytes.Buffer).String(), SysBefore: before.Sys, Sys: after.Sys})
	require.NoError(t, err)
	_, _ = os.Stdout.WriteString("\nHOSTILE " + string(b) + "\n")
}
