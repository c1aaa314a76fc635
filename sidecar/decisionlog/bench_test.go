package decisionlog_test

import (
	"io"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/sidecar/decisionlog"
)

// BenchmarkLog is the cost of logging a decision on the decision path with
// the plugin (decision_logs configured): the entry is queued (or dropped
// when the queue is full); the worker does the rest (BenchmarkEvent).
func BenchmarkLog(b *testing.B) {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	l, err := decisionlog.Open(b.Context(), decisionlog.Options{Console: zap.New(core), Plugin: true})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Stop(b.Context())
	e := entry("b-1", "rev")
	b.ReportAllocs()
	for b.Loop() {
		l.Log(e)
	}
}

// BenchmarkEvent is the work per event off the decision path with the
// plugin: its event, drop and mask queries and the console write (Log, then
// Sync waits for the worker).
func BenchmarkEvent(b *testing.B) {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	l, err := decisionlog.Open(b.Context(), decisionlog.Options{Console: zap.New(core), Plugin: true})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Stop(b.Context())
	e := entry("b-1", "rev")
	b.ReportAllocs()
	for b.Loop() {
		l.Log(e)
		if err := l.Sync(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
