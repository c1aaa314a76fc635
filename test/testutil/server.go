package testutil

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/server"
)

// Server is capgate's server.Run running in-process on 127.0.0.1 ports chosen
// by the kernel.
type Server struct {
	// Deployment is the deployment being served.
	Deployment *deployment.Deployment
	// Addrs are the bound listener addresses.
	Addrs server.Addrs
	// URL is the gateway's base URL ("http://127.0.0.1:port"); AdminURL the admin listener's.
	URL, AdminURL string
	// Decisions captures every decision-log entry; Logs the operational log.
	Decisions, Logs *observer.ObservedLogs
	// Audit captures the audit stream (one JSON line per handler call).
	Audit *SyncBuffer
	// HTTP is a client for raw requests to the server; its idle connections
	// are closed when the test ends.
	HTTP *http.Client

	cancel context.CancelFunc
	done   chan struct{}
	// logged is closed and replaced each time a decision is logged.
	loggedMu sync.Mutex
	logged   chan struct{}
	err      error
	stopOnce sync.Once
	draining chan struct{}
}

// StartOptions tune Start. The zero value runs the gateway and admin
// listeners of server.Run with its defaults.
type StartOptions struct {
	// ShutdownTimeout bounds draining on Stop (server.Run's default when 0).
	ShutdownTimeout time.Duration
	// ExtAuthz also runs the ext_authz server (Addrs.ExtAuthz), sharing the
	// gateway's task store.
	ExtAuthz bool
}

// Start runs server.Run with d (its listeners moved to 127.0.0.1:0) until the
// test ends, and returns once every listener accepts connections. The
// server's card still advertises d's agent.url; Client rewrites it to the
// bound address.
func Start(t testing.TB, d *deployment.Deployment, opts ...StartOptions) *Server {
	t.Helper()
	var o StartOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	d.Config.Listen.A2A = "127.0.0.1:0"
	d.Config.Listen.Admin = "127.0.0.1:0"
	d.Config.Listen.ExtAuthz = "127.0.0.1:0"

	decCore, decisions := observer.New(zapcore.InfoLevel)
	logCore, logs := observer.New(zapcore.DebugLevel)
	s := &Server{
		Deployment: d,
		Decisions:  decisions,
		Logs:       logs,
		Audit:      &SyncBuffer{},
		HTTP:       &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 30 * time.Second},
		done:       make(chan struct{}),
		draining:   make(chan struct{}),
		logged:     make(chan struct{}),
	}
	var drainOnce sync.Once
	// The hook tells Draining when server.Run starts shutting down.
	logger := zap.New(logCore, zap.Hooks(func(e zapcore.Entry) error {
		if e.Message == "draining" {
			drainOnce.Do(func() { close(s.draining) })
		}
		return nil
	}))

	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	s.cancel = cancel
	ready := make(chan server.Addrs, 1)
	go func() {
		defer close(s.done)
		s.err = server.Run(ctx, server.Options{
			Deployment:      d,
			Logger:          logger,
			DecisionLogger:  zap.New(decCore, zap.Hooks(func(zapcore.Entry) error { s.notifyLogged(); return nil })),
			Gateway:         true,
			ExtAuthz:        o.ExtAuthz,
			ShutdownTimeout: o.ShutdownTimeout,
			OnReady:         func(a server.Addrs) { ready <- a },
			AuditWriter:     s.Audit,
		})
	}()
	select {
	case a := <-ready:
		s.Addrs = a
	case <-s.done:
		require.FailNow(t, "capgate did not start", "server.Run: %v", s.err)
	}
	s.URL = "http://" + s.Addrs.A2A
	s.AdminURL = "http://" + s.Addrs.Admin
	t.Cleanup(func() {
		s.HTTP.CloseIdleConnections()
		if err := s.Stop(); err != nil {
			t.Errorf("server.Run: %v", err)
		}
	})
	return s
}

// Stop cancels the server's context and waits for server.Run to return,
// returning its error. It is safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(s.cancel)
	<-s.done
	return s.err
}

// Cancel cancels the server's context without waiting; Done reports when
// server.Run has returned and Draining when it has started to drain.
func (s *Server) Cancel() { s.stopOnce.Do(s.cancel) }

// Done is closed when server.Run has returned.
func (s *Server) Done() <-chan struct{} { return s.done }

// Draining is closed when server.Run has logged that it is draining.
func (s *Server) Draining() <-chan struct{} { return s.draining }

// DecisionEntries returns the decision-log entries so far, each flattened
// by FlatDecision (decision_id, principal, operation, result, ...).
func (s *Server) DecisionEntries() []map[string]any {
	return FlatDecisions(s.Decisions)
}

// FlatDecisions flattens every OPA-format decision event of logs (see
// FlatDecision).
func FlatDecisions(logs *observer.ObservedLogs) []map[string]any {
	var out []map[string]any
	for _, e := range logs.All() {
		if m, ok := FlatDecision(e.ContextMap()); ok {
			out = append(out, m)
		}
	}
	return out
}

// FlatDecision turns the fields of one OPA-format decision event (as the
// console sink writes them) into one flat map for assertions: decision_id,
// the input's fields (component, binding, a2a_version, operation,
// principal, tenant, capability, layer, confidence), the result's (result,
// code, reasons, rules), policy_revision (the capgate bundle's revision),
// latency_us, trace_id, span_id and requested_by. ok is false for anything
// else.
func FlatDecision(fields map[string]any) (map[string]any, bool) {
	if fields["type"] != "openpolicyagent.org/decision_logs" {
		return nil, false
	}
	// The console sink's fields as they are written: JSON values.
	var f map[string]any
	b, err := json.Marshal(fields)
	if err != nil || json.Unmarshal(b, &f) != nil {
		return nil, false
	}
	out := map[string]any{"decision_id": f["decision_id"]}
	for _, k := range []string{"trace_id", "span_id", "requested_by"} {
		if v, ok := f[k]; ok {
			out[k] = v
		}
	}
	if in, ok := f["input"].(map[string]any); ok {
		for k, v := range in {
			out[k] = v
		}
	}
	if res, ok := f["result"].(map[string]any); ok {
		for k, v := range res {
			if k != "allow" {
				out[k] = v
			}
		}
	}
	if b, ok := f["bundles"].(map[string]any); ok {
		if c, ok := b["capgate"].(map[string]any); ok {
			out["policy_revision"] = c["revision"]
		}
	}
	if m, ok := f["metrics"].(map[string]any); ok {
		if ns, ok := m["timer_capgate_decision_ns"].(float64); ok {
			out["latency_us"] = int64(ns) / 1000
		}
	}
	return out, true
}

func (s *Server) notifyLogged() {
	s.loggedMu.Lock()
	close(s.logged)
	s.logged = make(chan struct{})
	s.loggedMu.Unlock()
}

// WaitDecision returns the decision-log entries carrying id once there is at
// least one. The gateway may write a response before it logs its decision,
// so tests wait for the entry rather than read the log right away. It fails
// the test after 10 seconds.
func (s *Server) WaitDecision(t testing.TB, id string) []map[string]any {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		s.loggedMu.Lock()
		next := s.logged
		s.loggedMu.Unlock()
		if got := s.DecisionByID(id); len(got) > 0 {
			return got
		}
		select {
		case <-next:
		case <-deadline.C:
			require.FailNow(t, "no decision logged", "decision id %q", id)
		}
	}
}

// DecisionByID returns the decision-log entries carrying id.
func (s *Server) DecisionByID(id string) []map[string]any {
	var out []map[string]any
	for _, m := range s.DecisionEntries() {
		if m["decision_id"] == id {
			out = append(out, m)
		}
	}
	return out
}

// Endpoint is the gateway URL with path appended (path starts with "/").
func (s *Server) Endpoint(path string) string {
	return s.URL + path
}

// Admin is the admin listener URL with path appended.
func (s *Server) Admin(path string) string {
	return s.AdminURL + path
}

// rewrite maps a URL the card advertises onto the bound gateway address,
// keeping its path.
func (s *Server) rewrite(u string) string {
	rest := u
	if i := strings.Index(u, "://"); i >= 0 {
		rest = u[i+3:]
	}
	path := ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		path = rest[i:]
	}
	return s.URL + path
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Lines returns the complete lines written so far.
func (b *SyncBuffer) Lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
