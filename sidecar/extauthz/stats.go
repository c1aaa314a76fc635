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

// unknownOperation is a request refused before its operation was known.
const unknownOperation protocol.Operation = ""

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
		decisions: map[protocol.Operation]*[2]prometheus.Counter{},
		latency:   m.DecisionSeconds.WithLabelValues(component),
		tokenHit:  m.CacheLookups.WithLabelValues("token", "hit"),
		tokenMiss: m.CacheLookups.WithLabelValues("token", "miss"),
	}
	// Every operation, counted under its label (protocol's operation table).
	for _, op := range append(protocol.Operations(), unknownOperation) {
		s.decisions[op] = &[2]prometheus.Counter{
			m.Decisions.WithLabelValues(component, op.Label(), decisionlog.Allow),
			m.Decisions.WithLabelValues(component, op.Label(), decisionlog.Deny),
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
