package tasks

import (
	"time"

	"go.uber.org/zap"
)

// Observer is told how a store's work goes: each operation that failed
// because the store could not answer, and whether the store answers
// (sidecar/metrics.Store is the server's, on /metrics).
type Observer interface {
	// Failed counts one failed operation (one of Operations()).
	Failed(operation string)
	// Reachable reports that the store answered (true) or did not (false);
	// it is called when that changes.
	Reachable(ok bool)
}

// The operations an Observer is told of, as Failed names them.
const (
	OpBind          = "bind"
	OpLookup        = "lookup"
	OpClaimContext  = "claim_context"
	OpLookupContext = "lookup_context"
	OpOwned         = "owned"
	OpDelete        = "delete"
	OpRecordCall    = "record_call"
	OpUsage         = "usage"
	// The message records of messageId retries (Reserve, Settle, Release).
	OpReserveMessage = "reserve_message"
	OpSettleMessage  = "settle_message"
	OpReleaseMessage = "release_message"
	// OpPing is Watch's probe.
	OpPing = "ping"
)

// Operations lists the operations an Observer is told of, so that a
// counter of each can exist before the first failure.
func Operations() []string {
	return []string{OpBind, OpLookup, OpClaimContext, OpLookupContext, OpOwned, OpDelete, OpRecordCall, OpUsage,
		OpReserveMessage, OpSettleMessage, OpReleaseMessage, OpPing}
}

// WithObserver sets the store's observer: a Redis store reports every
// operation it could not complete and every change of reachability (seen by
// a go-redis hook on every command and by Watch's probe); the memory store
// reports itself reachable once.
func WithObserver(obs Observer) Option { return func(o *options) { o.observer = obs } }

// WithProbeInterval sets how often Watch probes a Redis store that no
// operation has reached (default DefaultProbeInterval).
func WithProbeInterval(d time.Duration) Option { return func(o *options) { o.probeEvery = d } }

// modeNameMemory is the memory store's mode in its start-up line.
const modeNameMemory = "memory"

// openedMemory logs the start-up line of the memory store and reports it
// reachable.
func openedMemory(opts []Option) {
	o := newOptions(opts)
	o.log.Info("task store", zap.String("store", MemoryURL), zap.String("mode", modeNameMemory))
	if o.observer != nil {
		o.observer.Reachable(true)
	}
}
