package decisionlog_test

import (
	"io"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/sidecar/decisionlog"
)

// BenchmarkLog is the cost of one decision event on the decision path:
// through OPA's plugin (event, drop and mask queries) to the console sink,
// JSON-encoded to a discarding writer.
func BenchmarkLog(b *testing.B) {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	l := decisionlog.New(zap.New(core))
	defer l.Stop(b.Context())
	e := entry("b-1", "rev")
	b.ReportAllocs()
	for b.Loop() {
		l.Log(e)
	}
}
