// Package audit writes one JSON line per handler invocation, marked
// "stream":"audit", on its own zap logger: who the handler acted for, under
// which decision, with which scopes, and how it ended. It never records a
// token or message content: an Entry has no field that could hold one.
package audit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/policy/config"
)

// Stream is the value of the "stream" field on every audit line, which
// tells audit lines from the other logs sharing standard output.
const Stream = "audit"

// FileMode is the mode of an audit file capgate creates.
const FileMode os.FileMode = 0o600

// OutcomeOK is the outcome of a handler call that succeeded.
const OutcomeOK = "ok"

// Failed returns the outcome of a handler call that failed with code.
func Failed(code string) string { return "error:" + code }

// Entry is one handler invocation.
type Entry struct {
	DecisionID string
	Principal  string // the caller's subject
	Tenant     string
	Actor      []string // the caller's act chain, outermost first
	Capability string
	Handler    string
	Scopes     []string // the scopes the handler's token carried
	Outcome    string   // OutcomeOK or Failed(code)
	Duration   time.Duration
	Operation  string // A2A operation, e.g. SendMessage
	// Accepted and Produced are set when the handler's answer was refused
	// because no part of it is in a mode the caller accepts: the caller's
	// acceptedOutputModes (clipped) and the media types the answer had.
	Accepted, Produced []string
	// Span is the request's span; its trace id is written (trace_id)
	// when the request is traced.
	Span trace.Span
}

// MarshalLogObject renders the entry without reflection.
func (e *Entry) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("decision_id", e.DecisionID)
	enc.AddString("operation", e.Operation)
	enc.AddString("principal", e.Principal)
	enc.AddString("tenant", e.Tenant)
	_ = enc.AddArray("actor", stringArray(e.Actor))
	enc.AddString("capability", e.Capability)
	enc.AddString("handler", e.Handler)
	_ = enc.AddArray("scopes", stringArray(e.Scopes))
	enc.AddString("outcome", e.Outcome)
	enc.AddInt64("duration_us", e.Duration.Microseconds())
	if len(e.Accepted) > 0 || len(e.Produced) > 0 {
		_ = enc.AddArray("accepted_output_modes", stringArray(e.Accepted))
		_ = enc.AddArray("produced_output_modes", stringArray(e.Produced))
	}
	if e.Span != nil {
		if sc := e.Span.SpanContext(); sc.IsValid() {
			enc.AddString("trace_id", sc.TraceID().String())
		}
	}
	return nil
}

type stringArray []string

func (s stringArray) MarshalLogArray(a zapcore.ArrayEncoder) error {
	for _, v := range s {
		a.AppendString(v)
	}
	return nil
}

// Logger writes audit entries. A nil *Logger discards them.
type Logger struct {
	z *zap.Logger
}

// New returns the audit logger for cfg: JSON lines appended to cfg.File
// (created with mode 0600), or written to stdout when cfg.File is empty.
// The Closer flushes and closes the file; for stdout it only flushes.
func New(cfg config.Audit, stdout io.Writer) (*Logger, io.Closer, error) {
	var (
		ws    zapcore.WriteSyncer
		close func() error
	)
	if cfg.File == "" {
		if stdout == nil {
			return nil, nil, errors.New("audit: no output")
		}
		ws = zapcore.Lock(zapcore.AddSync(stdout))
		close = func() error { return nil }
	} else {
		f, err := os.OpenFile(cfg.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, FileMode)
		if err != nil {
			return nil, nil, fmt.Errorf("audit.file: %w", err)
		}
		ws = zapcore.Lock(f)
		close = func() error { return errors.Join(f.Sync(), f.Close()) }
	}
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		TimeKey:        "ts",
		MessageKey:     "msg",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration: zapcore.MillisDurationEncoder,
	})
	z := zap.New(zapcore.NewCore(enc, ws, zapcore.InfoLevel)).With(zap.String("stream", Stream))
	return &Logger{z: z}, closerFunc(func() error {
		_ = z.Sync()
		return close()
	}), nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// Log writes e. A logging failure is not reported: it never changes the
// outcome of a call.
func (l *Logger) Log(e Entry) {
	if l == nil || l.z == nil {
		return
	}
	if ce := l.z.Check(zap.InfoLevel, "handler call"); ce != nil {
		ce.Write(zap.Inline(&e))
	}
}
