package metering

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/quota"
	"github.com/capgate/capgate/sidecar/protocol"
)

// Results of capgate_quota_calls_total.
const (
	ResultAdmitted = "admitted"
	// ResultThrottled: the call was over the quota and refused.
	ResultThrottled = "throttled"
	// ResultStoreErrorClosed and ResultStoreErrorOpen: the store could not
	// count; the quota refused the call (closed) or let it pass uncounted
	// (open).
	ResultStoreErrorClosed = "store_error_closed"
	ResultStoreErrorOpen   = "store_error_open"
)

// Rules a refusal names in the decision log (protocol.Error.Decided).
const (
	// RulePrefix + the quota id: the call was over that quota.
	RulePrefix = "quota."
	// RuleStoreError: a fail-closed quota could not be counted.
	RuleStoreError = "quota.store_error"
)

// DefaultMarkTTL is how long a charged message is remembered (see
// quota.MarkKey) when the enforcer is given no other.
const DefaultMarkTTL = 24 * time.Hour

// Enforcer charges calls against their quotas. It is safe for concurrent
// use; one serves both doors of a process.
type Enforcer struct {
	c       Counter
	log     *zap.Logger
	calls   *prometheus.CounterVec
	markTTL time.Duration
}

// NewEnforcer counts on c. reg receives capgate_quota_calls_total (nil:
// not exported); log may be nil; markTTL is how long a charged messageId is
// remembered (0: DefaultMarkTTL).
func NewEnforcer(c Counter, reg prometheus.Registerer, log *zap.Logger, markTTL time.Duration) *Enforcer {
	if log == nil {
		log = zap.NewNop()
	}
	if markTTL <= 0 {
		markTTL = DefaultMarkTTL
	}
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capgate_quota_calls_total",
		Help: "Calls counted against quotas, by capability, quota id and result (admitted, throttled, store_error_closed, store_error_open).",
	}, []string{"capability", "quota", "result"})
	if reg != nil {
		if err := reg.Register(calls); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
					calls = existing
				}
			}
		}
	}
	return &Enforcer{c: c, log: log.Named("quota"), calls: calls, markTTL: markTTL}
}

// Call is one call to charge.
type Call struct {
	// Issuer and Subject are the caller's (quota.Caller).
	Issuer, Subject string
	Capability      string
	// MessageID is the message's messageId when the call is a message: a
	// message is charged once, at the first door it passes ("" : no mark).
	MessageID string
	// Quotas are the decision's quotas for the call.
	Quotas []quota.Applied
	// DecisionID is logged with store errors.
	DecisionID string
}

// Charge counts the call against every quota, in id order. It returns the
// budgets left (for RateLimit headers and the decision log), or the
// refusal: ResourceExhausted naming the first quota the call is over, with
// its retry delay; Unavailable (outcome not_run) when a fail-closed quota
// could not be counted. A refused call is given back to the quotas it was
// charged before the refusing one, and its message is not marked, so its
// retry is charged afresh. A message already charged (by the other door,
// or a retry) passes without a charge and without budgets.
func (e *Enforcer) Charge(ctx context.Context, c Call) ([]quota.State, *protocol.Error) {
	if e == nil || len(c.Quotas) == 0 {
		return nil, nil
	}
	caller := quota.Caller(c.Issuer, c.Subject)
	mark := ""
	if c.MessageID != "" {
		mark = quota.MarkKey(caller, c.MessageID)
		first, err := e.c.Mark(ctx, mark, e.markTTL)
		switch {
		case err != nil:
			mark = "" // not marked: count it anyway
			e.log.Warn("quota mark failed; the message may be counted at both doors", zap.String("decision_id", c.DecisionID), zap.Error(err))
		case !first:
			return nil, nil
		}
	}
	states := make([]quota.State, 0, len(c.Quotas))
	charged := make([]int, 0, len(c.Quotas))
	undo := func() {
		for _, i := range charged {
			q := c.Quotas[i]
			if err := e.c.Give(context.WithoutCancel(ctx), q.CounterKey(caller), q.Limit, q.Window, q.Cost); err != nil {
				e.log.Warn("quota charge not given back", zap.String("quota", q.ID), zap.Error(err))
			}
		}
		if mark != "" {
			if err := e.c.Unmark(context.WithoutCancel(ctx), mark); err != nil {
				e.log.Warn("quota mark not dropped", zap.Error(err))
			}
		}
	}
	for i, q := range c.Quotas {
		t, err := e.c.Take(ctx, q.CounterKey(caller), q.Limit, q.Window, q.Cost)
		if err != nil {
			if q.OnStoreError == quota.FailOpen {
				e.calls.WithLabelValues(c.Capability, q.ID, ResultStoreErrorOpen).Inc()
				e.log.Warn("quota not counted: the store did not answer; the quota fails open",
					zap.String("decision_id", c.DecisionID), zap.String("quota", q.ID), zap.String("capability", c.Capability), zap.Error(err))
				continue
			}
			e.calls.WithLabelValues(c.Capability, q.ID, ResultStoreErrorClosed).Inc()
			e.log.Error("call refused: the store did not answer and the quota fails closed",
				zap.String("decision_id", c.DecisionID), zap.String("quota", q.ID), zap.String("capability", c.Capability), zap.Error(err))
			undo()
			return nil, protocol.Wrap(protocol.Unavailable, err, "quotas cannot be counted now; try again later").
				WithMetadata(protocol.MetaOutcome, protocol.OutcomeNotRun).Decided(RuleStoreError, c.Capability)
		}
		if !t.Allowed {
			e.calls.WithLabelValues(c.Capability, q.ID, ResultThrottled).Inc()
			undo()
			return nil, Refusal(q, t.RetryAfter, c.Capability)
		}
		charged = append(charged, i)
		states = append(states, quota.State{ID: q.ID, Limit: q.Limit, Window: int64(q.Window / time.Second),
			Remaining: t.Remaining, Reset: ceilSeconds(t.ResetAfter)})
	}
	for _, i := range charged {
		e.calls.WithLabelValues(c.Capability, c.Quotas[i].ID, ResultAdmitted).Inc()
	}
	return states, nil
}

// Refusal is the ResourceExhausted answer to a call over quota q, which
// would fit after retry: the message names the quota and the delay; the
// ErrorInfo metadata carries them (protocol.MetaQuota, MetaRetryAfter,
// MetaQuotaLimit, MetaQuotaWindow), and so do the headers and RetryInfo.
func Refusal(q quota.Applied, retry time.Duration, capability string) *protocol.Error {
	secs := max(ceilSeconds(retry), 1)
	what := "calls"
	if q.Unit == quota.Units {
		what = "units"
	}
	msg := "over quota " + q.ID + " (" + strconv.FormatInt(q.Limit, 10) + " " + what + " per " + windowText(q.Window) +
		"); retry in " + strconv.FormatInt(secs, 10) + "s"
	if q.Cost > q.Limit {
		msg = "over quota " + q.ID + ": one call costs " + strconv.FormatInt(q.Cost, 10) + " units, more than its budget of " +
			strconv.FormatInt(q.Limit, 10) + " per " + windowText(q.Window)
	}
	return protocol.Errorf(protocol.ResourceExhausted, "%s", msg).
		WithMetadata(protocol.MetaQuota, q.ID).
		WithMetadata(protocol.MetaRetryAfter, strconv.FormatInt(secs, 10)).
		WithMetadata(protocol.MetaQuotaLimit, strconv.FormatInt(q.Limit, 10)).
		WithMetadata(protocol.MetaQuotaWindow, strconv.FormatInt(int64(q.Window/time.Second), 10)).
		WithMetadata(protocol.MetaOutcome, protocol.OutcomeNotRun).
		Decided(RulePrefix+q.ID, capability)
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// windowText writes a window as people do: "1h", "24h", "90s", "5m".
func windowText(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}
