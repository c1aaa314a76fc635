package extauthz

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/protocol"
)

// unknownOperation is a request refused before its operation was known.
const unknownOperation protocol.Operation = ""

// stats holds the collectors of this component, resolved once so that the
// hot path does no label hashing.
type stats struct {
	decisions map[protocol.Operation]*metrics.DecisionCounters
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
		decisions: map[protocol.Operation]*metrics.DecisionCounters{},
		latency:   m.DecisionSeconds.WithLabelValues(component),
		tokenHit:  m.CacheLookups.WithLabelValues("token", "hit"),
		tokenMiss: m.CacheLookups.WithLabelValues("token", "miss"),
	}
	// Every operation, counted under its label (protocol's operation table),
	// with every code: each series exists at 0 from the start.
	for _, op := range append(protocol.Operations(), unknownOperation) {
		s.decisions[op] = m.DecisionCounters(component, op.Label())
	}
	return s
}

func (s *stats) observe(d *decision, latency time.Duration) {
	c, ok := s.decisions[d.op]
	if !ok {
		c = s.decisions[unknownOperation]
	}
	if d.allowed {
		c.Inc(metrics.CodeOK)
	} else if code := admission.DecisionCode(d.err); code != metrics.CodeOK {
		c.Inc(code)
	} else {
		c.Inc(metrics.CodeError) // a denial without its error: never counted as allowed
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
