package reload_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/test/testutil"
)

// load sends, from several goroutines until ctx ends, the three kinds of
// requests a reload must never fail: the public card, the extended card
// and a SendMessage routed to a handler. It returns the failures.
func load(ctx context.Context, r *running, tok string, workers int) (wait func() (total, failed int64, first []string)) {
	var (
		fails   atomic.Int64
		total   atomic.Int64
		mu      sync.Mutex
		samples []string
		wg      sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		if fails.Add(1) <= 5 {
			mu.Lock()
			samples = append(samples, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
	}
	auth := "Bearer " + tok
	for w := range workers {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				var (
					status int
					body   []byte
					err    error
					what   string
				)
				switch (i + w) % 3 {
				case 0:
					what = "public card"
					status, body, err = r.do(ctx, http.MethodGet, "/.well-known/agent-card.json", "")
				case 1:
					what = "extended card"
					status, body, err = r.do(ctx, http.MethodGet, "/extendedAgentCard", "", "A2A-Version", "1.0", "Authorization", auth)
				case 2:
					what = "SendMessage"
					msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":{"messageId":"m-%d-%d","role":"ROLE_USER",`+
						`"parts":[{"text":"What is the status of invoice INV-20931?"}],"metadata":{"skillId":"lookup-invoice"}}}}`, i, w, i)
					status, body, err = r.do(ctx, http.MethodPost, "/", msg, "Content-Type", "application/json", "A2A-Version", "1.0", "Authorization", auth)
				}
				if ctx.Err() != nil {
					return // the test is over; this request was cut short by it
				}
				total.Add(1)
				switch {
				case err != nil:
					fail("%s: %v", what, err)
				case status != http.StatusOK:
					fail("%s: HTTP %d: %.200s", what, status, body)
				case what == "SendMessage":
					var env struct {
						Result jsontext.Value `json:"result"`
						Error  jsontext.Value `json:"error"`
					}
					if err := json.Unmarshal(body, &env, json.RejectUnknownMembers(false)); err != nil || len(env.Result) == 0 || len(env.Error) > 0 {
						fail("%s: %.300s", what, body)
					}
				}
			}
		})
	}
	return func() (int64, int64, []string) {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return total.Load(), fails.Load(), samples
	}
}

// TestReloadUnderLoad: 50 reloads while requests flow — a public manifest
// added and removed in turn, every 10th step a broken manifest that must
// be rejected — with zero failed requests.
func TestReloadUnderLoad(t *testing.T) {
	cfg := financeCopy(t)
	r := start(t, reload.NewFiles(cfg))
	base := r.skills(t)
	require.Equal(t, testutil.PublicSkills, base)
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})

	ctx, stop := context.WithCancel(t.Context())
	wait := load(ctx, r, tok, 6)

	const steps = 50
	present := false // the last good revision has status-check
	ok, rejected := 0, 0
	for i := 1; i <= steps; i++ {
		switch {
		case i%10 == 0:
			put(t, cfg, "capabilities/status-check.yaml", broken)
			rejected++
		case present:
			require.NoError(t, os.Remove(filepath.Join(filepath.Dir(cfg), "capabilities", "status-check.yaml")))
			present = false
			ok++
		default:
			put(t, cfg, "capabilities/status-check.yaml", statusCheck)
			present = true
			ok++
		}
		r.waitReloads(t, ok, rejected)
		// After a rejection the last good revision keeps serving: the
		// card still lists status-check if the last good one had it.
		got := r.skills(t)
		want := base
		if present {
			want = append(slices.Clone(base), "status-check")
			slices.Sort(want)
		}
		sorted := slices.Sorted(slices.Values(got))
		require.Equal(t, want, sorted, "step %d", i)
		if i%10 == 0 {
			present = false // the next step replaces the broken file with a valid one
		}
	}
	stop()
	sent, fails, samples := wait()
	var took time.Duration
	done := r.logs.FilterMessage("reloaded").All()
	for _, e := range done {
		took += e.ContextMap()["took"].(time.Duration)
	}
	t.Logf("%d reloads, %v on average; %d requests", len(done), took/time.Duration(max(len(done), 1)), sent)
	require.NotZero(t, sent)
	require.Zero(t, fails, "failed requests during reloads: %v", samples)
	require.Equal(t, 45, r.reloads(t, reload.ResultOK))
	require.Equal(t, 5, r.reloads(t, reload.ResultRejected))

	// One log line per rejection, listing the problems (file and field, no
	// file content).
	lines := r.logs.FilterMessageSnippet("reload rejected").All()
	require.Len(t, lines, 5)
	problems := fmt.Sprint(lines[0].ContextMap()["problems"])
	require.Contains(t, problems, "status-check.yaml")
	require.Contains(t, problems, "nowhere.to.be.found")
	require.NotContains(t, problems, "Reports whether the finance agent is up.")
}

// TestSIGHUP: a SIGHUP reloads; a listener address change is logged as
// needing a restart and the running listener keeps serving.
func TestSIGHUP(t *testing.T) {
	cfg := financeCopy(t)
	r := start(t, reload.NewFiles(cfg))

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	r.waitReloads(t, 1, 0)

	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return strings.Replace(s, "a2a: 127.0.0.1:0", "a2a: 127.0.0.1:18080", 1)
	})
	r.waitReloads(t, 2, 0)
	warn := r.logs.FilterMessageSnippet("needs a restart").All()
	require.NotEmpty(t, warn)
	require.Equal(t, []any{"listen.a2a"}, warn[0].ContextMap()["fields"])
	require.Equal(t, testutil.PublicSkills, r.skills(t), "the old listener keeps serving")
}

// TestHandlerAddedLive: a manifest naming a handler that the same reload
// adds to the config is routed to it.
func TestHandlerAddedLive(t *testing.T) {
	cfg := financeCopy(t)
	r := start(t, reload.NewFiles(cfg))
	tok := testutil.Token(t, testutil.TokenOptions{})

	b, err := os.ReadFile(cfg)
	require.NoError(t, err)
	put(t, cfg, "capgate.yaml", strings.Replace(string(b), "handlers:\n", "handlers:\n  ops.status: builtin:echo\n", 1))
	put(t, cfg, "capabilities/status-check.yaml", strings.Replace(statusCheck, "handler: invoices.lookup", "handler: ops.status", 1))
	require.Eventually(t, func() bool { return slices.Contains(r.skills(t), "status-check") }, 10*time.Second, 10*time.Millisecond)

	msg := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER",` +
		`"parts":[{"text":"Is the finance agent up?"}],"metadata":{"skillId":"status-check"}}}}`
	status, body, err := r.do(t.Context(), http.MethodPost, "/", msg, "Content-Type", "application/json", "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), `"result"`, "%s", body)
	require.Contains(t, string(body), "ops.status", "the echo handler reports the audience it was called with: %s", body)
}
