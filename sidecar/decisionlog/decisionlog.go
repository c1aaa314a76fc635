// Package decisionlog writes one JSON line per authorization decision, on
// its own zap logger, and mints decision ids. It never records a token or
// message content: an Entry has no field that could hold one.
package decisionlog

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Result values.
const (
	Allow = "allow"
	Deny  = "deny"
)

// Entry is one decision.
type Entry struct {
	DecisionID string
	Component  string // "gateway" or "extauthz"
	Binding    string
	Version    string
	Operation  string
	Principal  string
	Tenant     string
	Capability string
	Layer      string  // routing layer that chose the capability, when routed
	Confidence float64 // classifier confidence, when the classifier decided
	Result     string  // Allow or Deny
	Code       string  // error code of a denial
	Reasons    []string
	Revision   string
	Latency    time.Duration
}

// MarshalLogObject renders the entry without reflection.
func (e *Entry) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("decision_id", e.DecisionID)
	enc.AddString("component", e.Component)
	addNonEmpty(enc, "binding", e.Binding)
	addNonEmpty(enc, "a2a_version", e.Version)
	addNonEmpty(enc, "operation", e.Operation)
	addNonEmpty(enc, "principal", e.Principal)
	addNonEmpty(enc, "tenant", e.Tenant)
	addNonEmpty(enc, "capability", e.Capability)
	addNonEmpty(enc, "layer", e.Layer)
	if e.Layer == "classifier" || e.Layer == "clarify" {
		enc.AddFloat64("confidence", e.Confidence)
	}
	enc.AddString("result", e.Result)
	addNonEmpty(enc, "code", e.Code)
	if len(e.Reasons) > 0 {
		_ = enc.AddArray("reasons", zapcore.ArrayMarshalerFunc(func(a zapcore.ArrayEncoder) error {
			for _, r := range e.Reasons {
				a.AppendString(r)
			}
			return nil
		}))
	}
	enc.AddString("policy_revision", e.Revision)
	enc.AddInt64("latency_us", e.Latency.Microseconds())
	return nil
}

func addNonEmpty(enc zapcore.ObjectEncoder, k, v string) {
	if v != "" {
		enc.AddString(k, v)
	}
}

// Logger writes decision entries.
type Logger struct {
	z *zap.Logger
}

// New returns a decision logger writing through z (nil: discard).
func New(z *zap.Logger) *Logger {
	if z == nil {
		z = zap.NewNop()
	}
	return &Logger{z: z.Named("decision")}
}

// Log writes e. A logging failure never changes a decision.
func (l *Logger) Log(e *Entry) {
	if ce := l.z.Check(zap.InfoLevel, "decision"); ce != nil {
		ce.Write(zap.Object("decision", e))
	}
}

// IDs mints decision ids: a random per-process prefix and a counter, cheap
// enough for the ext_authz hot path and unique across replicas.
type IDs struct {
	prefix string
	n      atomic.Uint64
}

// NewIDs seeds a fresh id source.
func NewIDs() *IDs {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms; fall back to time.
		return &IDs{prefix: strconv.FormatInt(time.Now().UnixNano(), 36)}
	}
	return &IDs{prefix: hex.EncodeToString(b[:])}
}

// Next returns a new id.
func (g *IDs) Next() string {
	return g.prefix + "-" + strconv.FormatUint(g.n.Add(1), 36)
}
