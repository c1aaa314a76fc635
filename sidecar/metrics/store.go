package metrics

import "github.com/prometheus/client_golang/prometheus"

// Store reports the task store's health on capgate_store_errors_total and
// capgate_store_reachable; the server gives it to the store as its
// observer (tasks.Observer).
type Store struct {
	vec       *prometheus.CounterVec
	errors    map[string]prometheus.Counter
	reachable prometheus.Gauge
}

// Store returns the store's reporter, with the error series of every
// operation created at 0. The reachability gauge starts at 0 until the
// store reports.
func (m *Metrics) Store(operations []string) *Store {
	s := &Store{vec: m.StoreErrors, errors: make(map[string]prometheus.Counter, len(operations)), reachable: m.StoreReachable}
	for _, op := range operations {
		s.errors[op] = m.StoreErrors.WithLabelValues(op)
	}
	return s
}

// Failed counts one operation that failed because the store could not
// answer.
func (s *Store) Failed(operation string) {
	if c, ok := s.errors[operation]; ok {
		c.Inc()
		return
	}
	s.vec.WithLabelValues(operation).Inc()
}

// Reachable sets the reachability gauge.
func (s *Store) Reachable(ok bool) {
	if ok {
		s.reachable.Set(1)
		return
	}
	s.reachable.Set(0)
}
