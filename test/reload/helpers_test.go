// Package reload_test runs capgate (sidecar/server.Run) with a reload
// source — a temp copy of the finance example, or a bundle — and changes
// the deployment under load.
package reload_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/sidecar/server"
	"github.com/capgate/capgate/test/testutil"
)

// statusCheck is a public manifest the finance example does not have.
const statusCheck = `id: status-check
state: ga
visibility: public
skill:
  name: Check status
  description: Reports whether the finance agent is up.
  tags: [status]
  examples: ["Is the finance agent up?"]
  inputModes: [text/plain]
  outputModes: [application/json]
requires_scopes: []
tenants: "*"
handler: invoices.lookup
owner: ops
`

// broken has an unknown state and a handler the config does not define.
const broken = `id: status-check
state: shiny
visibility: public
skill:
  name: Check status
  description: Reports whether the finance agent is up.
  tags: [status]
  inputModes: [text/plain]
  outputModes: [application/json]
requires_scopes: []
tenants: "*"
handler: nowhere.to.be.found
owner: ops
`

// financeCopy copies the finance example to a temp folder, its listeners
// on 127.0.0.1:0, and returns the path of its capgate.yaml.
func financeCopy(t *testing.T) string {
	t.Helper()
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return strings.Replace(s, "listen: {a2a: 127.0.0.1:8080, extauthz: 127.0.0.1:9191, admin: 127.0.0.1:9090}",
			"listen: {a2a: 127.0.0.1:0, extauthz: 127.0.0.1:0, admin: 127.0.0.1:0}", 1)
	})
	return cfg
}

// put writes content to path (relative to the config's folder) atomically:
// written beside, then renamed in, as config management does.
func put(t *testing.T, cfg, path, content string) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), filepath.Base(path))
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(filepath.Dir(cfg), path)))
}

// running is server.Run serving a reload source.
type running struct {
	url, admin string
	extauthz   string // the ext_authz listener
	logs       *observer.ObservedLogs
	http       *http.Client
}

// start loads src as `capgate serve` does and runs server.Run with it until
// the test ends.
func start(t *testing.T, src reload.Source) *running {
	t.Helper()
	d, err := src.Load(t.Context())
	require.NoError(t, err)
	core, logs := observer.New(zapcore.DebugLevel)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	ready := make(chan server.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Options{
			Deployment:     d,
			Source:         src,
			Logger:         zap.New(core),
			DecisionLogger: zap.NewNop(),
			AuditWriter:    io.Discard,
			Gateway:        true,
			ExtAuthz:       true,
			ReloadDebounce: 50 * time.Millisecond,
			OnReady:        func(a server.Addrs) { ready <- a },
		})
	}()
	var a server.Addrs
	select {
	case a = <-ready:
	case err := <-done:
		require.FailNow(t, "capgate did not start", "%v", err)
	}
	r := &running{url: "http://" + a.A2A, admin: "http://" + a.Admin, extauthz: a.ExtAuthz, logs: logs,
		http: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 30 * time.Second}}
	t.Cleanup(func() {
		r.http.CloseIdleConnections()
		cancel()
		require.NoError(t, <-done)
	})
	return r
}

// get sends a request and returns the status and body; err is a transport
// error.
func (r *running) do(ctx context.Context, method, path, body string, headers ...string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// skills are the skill ids of the public card.
func (r *running) skills(t *testing.T) []string {
	t.Helper()
	status, body, err := r.do(t.Context(), http.MethodGet, "/.well-known/agent-card.json", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%s", body)
	return skillIDs(t, body)
}

func skillIDs(t *testing.T, card []byte) []string {
	t.Helper()
	var c struct {
		Skills []struct {
			ID string `json:"id"`
		} `json:"skills"`
	}
	require.NoError(t, json.Unmarshal(card, &c, json.RejectUnknownMembers(false)))
	ids := make([]string, 0, len(c.Skills))
	for _, s := range c.Skills {
		ids = append(ids, s.ID)
	}
	return ids
}

// reloads reads capgate_reloads_total{result} from the admin /metrics.
func (r *running) reloads(t *testing.T, result string) int {
	t.Helper()
	resp, err := r.http.Get(r.admin + "/metrics")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	prefix := `capgate_reloads_total{result="` + result + `"} `
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return int(n)
		}
	}
	require.NoError(t, sc.Err())
	return 0
}

// waitReloads waits until ok and rejected reach the given counts.
func (r *running) waitReloads(t *testing.T, ok, rejected int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return r.reloads(t, reload.ResultOK) >= ok && r.reloads(t, reload.ResultRejected) >= rejected
	}, 10*time.Second, 5*time.Millisecond, "want %d ok and %d rejected reloads", ok, rejected)
	require.Equal(t, ok, r.reloads(t, reload.ResultOK))
	require.Equal(t, rejected, r.reloads(t, reload.ResultRejected))
}
