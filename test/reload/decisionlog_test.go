package reload_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/test/testutil"
)

// logService is a decision-log service written here from OPA's upload
// protocol: POST /logs, a gzip'd JSON array of events.
type logService struct {
	mu     sync.Mutex
	raw    []string // every batch, decompressed
	events []map[string]any
	down   bool
	posts  int
}

func startLogService(t *testing.T) (*logService, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &logService{}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s, "http://" + ln.Addr().String()
}

func (s *logService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.posts++
	down := s.down
	s.mu.Unlock()
	if down {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/logs" || r.Header.Get("Content-Encoding") != "gzip" {
		http.Error(w, "want a gzip'd POST to /logs", http.StatusBadRequest)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var batch []map[string]any
	if err := json.Unmarshal(b, &batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.raw = append(s.raw, string(b))
	s.events = append(s.events, batch...)
	s.mu.Unlock()
}

func (s *logService) setDown(d bool) {
	s.mu.Lock()
	s.down = d
	s.mu.Unlock()
}

// postCount is how many uploads were tried.
func (s *logService) postCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts
}

// event waits for an uploaded event that matches.
func (s *logService) event(t *testing.T, match func(map[string]any) bool) map[string]any {
	t.Helper()
	var got map[string]any
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.events {
			if match(e) {
				got = e
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "no such decision uploaded")
	return got
}

func bundleRevision(e map[string]any) string {
	b, _ := e["bundles"].(map[string]any)
	c, _ := b["capgate"].(map[string]any)
	r, _ := c["revision"].(string)
	return r
}

// TestDecisionLogsUploadedInOPAFormat runs capgate with a decision-log
// service: events arrive in OPA's format with the revision in bundles, a
// reload shows the new revision, no token or message text is ever sent, and
// an outage of the service never holds a decision up.
func TestDecisionLogsUploadedInOPAFormat(t *testing.T) {
	svc, url := startLogService(t)
	cfg := financeCopy(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return s + `services:
  collector: {url: "` + url + `"}
decision_logs:
  service: collector
  reporting: {min_delay_seconds: 1, max_delay_seconds: 1, buffer_type: event, buffer_size_limit_events: 1000}
`
	})
	r := start(t, reload.NewFiles(cfg))
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	const secret = "SECRET-TEXT-7781 reconcile this against the PO"
	send := func() {
		t.Helper()
		status, body, err := r.do(t.Context(), http.MethodPost, "/",
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"`+secret+`"}],"metadata":{"skillId":"reconcile-invoice"}}}}`,
			"Authorization", "Bearer "+tok, "A2A-Version", "1.0", "Content-Type", "application/json")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, string(body))
		require.NotContains(t, string(body), `"error"`, string(body))
	}
	send()
	e := svc.event(t, func(e map[string]any) bool {
		in, _ := e["input"].(map[string]any)
		return in["operation"] == "SendMessage" && in["capability"] == "reconcile-invoice"
	})
	rev1 := bundleRevision(e)
	require.NotEmpty(t, rev1)
	require.Equal(t, "capgate/authz/decision", e["path"], "the handler-call re-check evaluated the full decision")
	res := e["result"].(map[string]any)
	require.Equal(t, true, res["allow"])
	require.Contains(t, res["rules"], map[string]any{"reason": "scope.held", "effect": "grant", "rule": "data.capgate.authz._scope_reasons"})
	require.NotEmpty(t, e["decision_id"])
	require.NotEmpty(t, e["timestamp"])
	require.Contains(t, e["labels"], "id")
	require.Contains(t, e["metrics"], "timer_capgate_decision_ns")

	// A reload: the next decisions carry the new revision.
	put(t, cfg, "capabilities/status-check.yaml", statusCheck)
	r.waitReloads(t, 1, 0)
	send()
	e2 := svc.event(t, func(e map[string]any) bool {
		in, _ := e["input"].(map[string]any)
		return in["operation"] == "SendMessage" && bundleRevision(e) != "" && bundleRevision(e) != rev1
	})
	require.NotEqual(t, rev1, bundleRevision(e2))

	// The service goes down: requests are answered as before, and the
	// events buffered meanwhile are uploaded once it is back.
	svc.setDown(true)
	before := svc.postCount()
	for range 5 {
		send()
	}
	require.Eventually(t, func() bool { return svc.postCount() > before }, 20*time.Second, 20*time.Millisecond, "an upload was tried while down")
	svc.setDown(false)
	require.Eventually(t, func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		n := 0
		for _, e := range svc.events {
			if in, _ := e["input"].(map[string]any); in["operation"] == "SendMessage" && bundleRevision(e) == bundleRevision(e2) {
				n++
			}
		}
		return n >= 6
	}, 30*time.Second, 20*time.Millisecond, "the events of the outage were uploaded later")

	// Never a token or message text in what was sent.
	svc.mu.Lock()
	defer svc.mu.Unlock()
	all := strings.Join(svc.raw, "\n")
	require.NotContains(t, all, tok)
	require.NotContains(t, all, "SECRET-TEXT")
	require.NotContains(t, all, "reconcile this")
}
