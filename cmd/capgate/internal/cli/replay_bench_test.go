package cli

import (
	"bytes"
	"context"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/policy/access"
	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/sidecar/decisionlog"
)

const (
	benchReplayEvents = 1_000_000
	benchReplayCaps   = 10_000
	benchReplayBlock  = 10_000 // distinct event lines, repeated
)

// repeatReader reads block n times.
type repeatReader struct {
	block []byte
	n     int
	off   int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := copy(p, r.block[r.off:])
	if r.off += k; r.off == len(r.block) {
		r.off, r.n = 0, r.n-1
	}
	return k, nil
}

// benchDecisionLog is 10,000 console decision events as capgate writes
// them (decisionlog's own encoder): 100 callers (tenants, two scopes each,
// a quarter opted in to previews) asking about capabilities spread over
// the synthetic registry, 10,000 distinct questions.
func benchDecisionLog(b *testing.B, reg []string) []byte {
	var buf bytes.Buffer
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	l := decisionlog.New(zap.New(zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.InfoLevel)))
	for i := range benchReplayBlock {
		c := i % 100
		scopes := []string{compiletest.Scope(c % 10), compiletest.Scope(c / 10 % 10)}
		if c%4 == 0 {
			scopes = append(scopes, compiletest.PreviewScope)
		}
		e := &decisionlog.Entry{DecisionID: "bench-" + reg[i%len(reg)], Component: "gateway", Binding: "jsonrpc", Version: "1.0",
			Operation: "SendMessage", Authenticated: true, Issuer: "https://idp.example.com", Principal: "subject-" + compiletest.Tenant(c),
			Tenant: compiletest.Tenant(c % 6), Capability: reg[(i*7919)%len(reg)], Layer: "classifier", Confidence: 0.93,
			Result: decisionlog.Allow, Decided: true, Entitled: true, Revision: "bench",
			Rules: []engine.Reason{{Rule: "auth.authenticated", Effect: "grant"}, {Rule: "scope.held", Effect: "grant"}, {Rule: "state.ga", Effect: "grant"}}}
		e.SetScopes(scopes)
		l.Log(e)
	}
	return buf.Bytes()
}

// BenchmarkReplay1Mx10k replays 1,000,000 recorded decisions (console
// JSON lines, read and parsed as `access replay` does) against a
// 10,000-capability head, each distinct question evaluated once. Run it on
// one core: go test -run '^$' -bench Replay1Mx10k -benchtime 1x -cpu 1.
func BenchmarkReplay1Mx10k(b *testing.B) {
	s, err := compile.Build(compiletest.Synthetic(benchReplayCaps), compiletest.Auth(), nil)
	require.NoError(b, err)
	ids := make([]string, 0, benchReplayCaps)
	for _, c := range s.Registry.All() {
		ids = append(ids, c.ID)
	}
	block := benchDecisionLog(b, ids)
	ctx := context.Background()
	b.ReportAllocs()
	var start syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &start)
	for b.Loop() {
		head, err := engine.New(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		r := access.NewReplay(head, nil, time.Time{}, time.Time{})
		src := &repeatReader{block: block, n: benchReplayEvents / benchReplayBlock}
		if err := eachDecision(src, func(e *loggedDecision) error { return r.Event(ctx, recordedQuestions(e)...) }); err != nil {
			b.Fatal(err)
		}
		rep := r.Report()
		if rep.Events != benchReplayEvents || rep.Questions != benchReplayEvents || rep.Distinct != benchReplayBlock {
			b.Fatalf("read %d events, %d questions, %d distinct", rep.Events, rep.Questions, rep.Distinct)
		}
	}
	var end syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &end)
	cpu := time.Duration(end.Utime.Nano() - start.Utime.Nano() + end.Stime.Nano() - start.Stime.Nano())
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}
