package redisstore

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"
)

// MaxLogBytes bounds one go-redis log line as Log writes it.
const MaxLogBytes = 512

// Log writes go-redis's own log lines — its connection pool's, its
// Sentinel and Cluster clients' (`redis: connection pool: failed to dial
// after 5 attempts: …`), which it otherwise prints as plain text on standard
// error — as zap entries at warn level: the message "redis client", the
// line in the field "line", control characters replaced by spaces and cut
// at MaxLogBytes ("truncated": true then). go-redis's lines name
// addresses, master names and errors, never a command's arguments; the
// bound keeps a panic's stack or a long error from flooding the log.
//
// go-redis has one logger per process (redis.SetLogger, a global of that
// library): the program that owns the log stream sets it once, at start,
// with its own logger — `capgate serve` does — and a library never does
// (server.Run may run several times in one process, as tests do).
type Log struct{ log *zap.Logger }

// NewLog returns go-redis's logger writing to log.
func NewLog(log *zap.Logger) Log { return Log{log: log} }

// Printf implements go-redis's logging interface.
func (l Log) Printf(_ context.Context, format string, v ...any) {
	if ce := l.log.Check(zap.WarnLevel, "redis client"); ce != nil {
		line, cut := boundLine(fmt.Sprintf(format, v...), MaxLogBytes)
		fields := []zap.Field{zap.String("line", line)}
		if cut {
			fields = append(fields, zap.Bool("truncated", true))
		}
		ce.Write(fields...)
	}
}

// boundLine is s on one line (control characters and invalid UTF-8 as
// spaces, surrounding space trimmed), at most limit bytes, cut on a rune
// boundary; cut reports a cut.
func boundLine(s string, limit int) (string, bool) {
	var b strings.Builder
	for _, r := range s {
		if b.Len()+utf8.RuneLen(r) > limit {
			return strings.TrimSpace(b.String()), true
		}
		if unicode.IsControl(r) || r == utf8.RuneError {
			r = ' '
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String()), false
}
