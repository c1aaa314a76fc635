package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/test/golden"
	"github.com/capgate/capgate/test/testutil"
)

// serving is a `capgate serve` of the embedded finance example, run in
// this process on 127.0.0.1:0, its log (stdout) kept.
type serving struct {
	out     *testutil.SyncBuffer
	gateway string
	stop    func() string // stops the server and returns its log
}

func startServe(t *testing.T) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"serve", "--listen-gateway", "127.0.0.1:0", "--listen-admin", "127.0.0.1:0", "--listen-extauthz", "127.0.0.1:0"},
			cli.Env{Stdout: &out, Stderr: &errOut, Stdin: strings.NewReader("")})
	}()
	s := &serving{out: &out}
	deadline := time.Now().Add(time.Minute) // a bound for a broken start, not a synchronisation
	for s.gateway == "" {
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve returned %d: %s", code, strings.Join(errOut.Lines(), "\n"))
		case <-time.After(10 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "serve did not start: %s", strings.Join(out.Lines(), "\n"))
		for _, l := range out.Lines() {
			var m struct{ Msg, Server, Addr string }
			if json.Unmarshal([]byte(l), &m) == nil && m.Msg == "listening" && m.Server == "gateway" {
				s.gateway = m.Addr
			}
		}
	}
	stopped := false
	s.stop = func() string {
		if !stopped {
			stopped = true
			cancel()
			require.Equal(t, cli.ExitOK, <-done, strings.Join(errOut.Lines(), "\n"))
		}
		return strings.Join(out.Lines(), "\n") + "\n"
	}
	t.Cleanup(func() { s.stop() })
	return s
}

// send posts a JSON-RPC request and returns its decision id once the
// decision event is in the log.
func (s *serving) send(t *testing.T, tok, body string) string {
	t.Helper()
	id, _ := s.sendBody(t, tok, body)
	return id
}

// sendBody is send, with the answer.
func (s *serving) sendBody(t *testing.T, tok, body string) (string, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+s.gateway+"/", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	id := resp.Header.Get("X-Capgate-Decision-Id")
	require.NotEmpty(t, id, "%s", b)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(strings.Join(s.out.Lines(), "\n"), `"decision_id":"`+id+`","input"`) {
		require.True(t, time.Now().Before(deadline), "decision %s was not logged", id)
		time.Sleep(5 * time.Millisecond) // polling the log, with a deadline
	}
	return id, b
}

func demoToken(t *testing.T, args ...string) string {
	t.Helper()
	r := run(t, append([]string{"token"}, args...)...)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	return strings.TrimSpace(r.stdout)
}

// volatile are the parts of an explanation that differ from run to run.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "UUID"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z`), "TIME"},
	{regexp.MustCompile(`policy revision: \S+`), "policy revision: REV"},
	{regexp.MustCompile(`latency: \S+`), "latency: D"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:PORT"},
	{regexp.MustCompile(`capgate_version=\S+`), "capgate_version=V"},
	{regexp.MustCompile(`( id=)\S+`), "${1}ID"},
	{regexp.MustCompile(`( version=)\S+`), "${1}V"},
	{regexp.MustCompile(`(card version: )\S+`), "${1}V"},
}

// explain --decision-id on the log of a real `capgate serve` (the
// embedded finance example), one decision of each kind: only the decision
// event is read (the audit stream's handler call and the hint-ignored line
// carry the same id), and everything it holds is shown.
func TestExplainDecisionIDOnServeLog(t *testing.T) {
	srv := startServe(t)
	partner := demoToken(t, "--sub", "partner-1", "--tenant", "acme", "--scope", "recon.run")
	msg := func(id, parts, extra string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"` + id + `","role":"ROLE_USER","parts":[` + parts + `]` + extra + `}}}`
	}
	const pdfText = `{"raw":"JVBERi0xLjQK","mediaType":"application/pdf"},{"text":"reconcile this against the PO"}`
	allowed, answer := srv.sendBody(t, partner, msg("m1", pdfText, ""))
	var task struct {
		Result struct {
			Task struct{ ID, ContextID string }
		}
	}
	require.NoError(t, json.Unmarshal(answer, &task), "%s", answer)
	require.NotEmpty(t, task.Result.Task.ID, "%s", answer)
	ids := map[string]string{
		"allowed":      allowed,
		"hint-ignored": srv.send(t, partner, msg("m2", pdfText, `},"metadata":{"skillId":"apply-remittance"`)),
		"refused-by-authentication": srv.send(t, demoToken(t, "--sub", "partner-1", "--aud", "another-agent"),
			msg("m3", pdfText, "")),
		"refused-by-routing": srv.send(t, demoToken(t, "--sub", "partner-2", "--scope", "recon.run"),
			msg("m4", `{"raw":"AAAA","mediaType":"image/png"}`, "")),
		// The task's owner continues it with a token that no longer holds
		// recon.run: the handler-call re-check refuses.
		"refused-by-policy": srv.send(t, demoToken(t, "--sub", "partner-1", "--tenant", "acme", "--scope", "forecast.read"),
			msg("m5", `{"text":"and the next one"}`, `,"taskId":"`+task.Result.Task.ID+`","contextId":"`+task.Result.Task.ContextID+`"`)),
	}
	logFile := filepath.Join(t.TempDir(), "capgate.log")
	log := srv.stop()
	require.NoError(t, os.WriteFile(logFile, []byte(log), 0o644))
	require.Contains(t, log, `"msg":"handler call"`, "the log holds the audit stream")
	require.Contains(t, log, `"msg":"skill hint ignored","decision_id":"`+ids["hint-ignored"], "and the hint-ignored line")

	for kind, id := range ids {
		t.Run(kind, func(t *testing.T) {
			r := run(t, "explain", "--decision-id", id, "--decisions", logFile)
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			got := r.stdout
			for _, v := range volatile {
				got = v.re.ReplaceAllString(got, v.with)
			}
			golden.Equal(t, filepath.Join("testdata", "explain", kind+".golden"), []byte(got))
		})
	}
}
