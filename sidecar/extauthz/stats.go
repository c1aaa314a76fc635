package extauthz

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
)

// operations are the labels decisions are counted under; "unknown" is a
// request refused before its operation was known.
var operationLabels = []protocol.Operation{
	protocol.SendMessage, protocol.SendStreamingMessage, protocol.GetTask, protocol.ListTasks,
	protocol.CancelTask, protocol.SubscribeToTask, protocol.CreateTaskPushNotificationConfig,
	protocol.GetTaskPushNotificationConfig, protocol.ListTaskPushNotificationConfigs,
	protocol.DeleteTaskPushNotificationConfig, protocol.GetExtendedAgentCard, protocol.GetAgentCard,
	unknownOperation,
}

const unknownOperation protocol.Operation = "unknown"

// stats holds the collectors of this component, resolved once so that the
// hot path does no label hashing.
type stats struct {
	decisions map[protocol.Operation]*[2]prometheus.Counter // [allow, deny]
	latency   prometheus.Observer
	tokenHit  prometheus.Counter
	tokenMiss prometheus.Counter
	// token tracks the verifier's cumulative cache counts already exported.
	token atomic.Pointer[tokenCounts]
}

type tokenCounts struct {
	v            *identity.Verifier
	hits, misses atomic.Uint64
}

func newStats(m *metrics.Metrics) *stats {
	s := &stats{
		decisions: make(map[protocol.Operation]*[2]prometheus.Counter, len(operationLabels)),
		latency:   m.DecisionSeconds.WithLabelValues(component),
		tokenHit:  m.CacheLookups.WithLabelValues("token", "hit"),
		tokenMiss: m.CacheLookups.WithLabelValues("token", "miss"),
	}
	for _, op := range operationLabels {
		s.decisions[op] = &[2]prometheus.Counter{
			m.Decisions.WithLabelValues(component, string(op), decisionlog.Allow),
			m.Decisions.WithLabelValues(component, string(op), decisionlog.Deny),
		}
	}
	return s
}

func (s *stats) observe(d *decision, latency time.Duration) {
	c, ok := s.decisions[d.op]
	if !ok {
		c = s.decisions[unknownOperation]
	}
	if d.allowed {
		c[0].Inc()
	} else {
		c[1].Inc()
	}
	s.latency.Observe(latency.Seconds())
	if d.hdr.get(headerAuthorization) != "" && d.plan != nil && d.plan.rev.Verifier != nil {
		s.syncTokenCache(d.plan.rev.Verifier)
	}
}

// syncTokenCache exports the verifier's token cache counts as counter
// increments. Concurrent checks advance a high-water mark with CAS, so each
// lookup is counted once; a new revision's verifier starts from zero.
func (s *stats) syncTokenCache(v *identity.Verifier) {
	tc := s.token.Load()
	if tc == nil || tc.v != v {
		fresh := &tokenCounts{v: v}
		if !s.token.CompareAndSwap(tc, fresh) {
			return // another check switched it; it will catch up next time
		}
		tc = fresh
	}
	hits, misses := v.CacheStats()
	advance(&tc.hits, hits, s.tokenHit)
	advance(&tc.misses, misses, s.tokenMiss)
}

func advance(mark *atomic.Uint64, now uint64, c prometheus.Counter) {
	for {
		old := mark.Load()
		if now <= old {
			return
		}
		if mark.CompareAndSwap(old, now) {
			c.Add(float64(now - old))
			return
		}
	}
}
