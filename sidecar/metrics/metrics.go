// Package metrics defines capgate's Prometheus collectors, registered on an
// injected registry (no global registration).
package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the collectors shared by the gateway and the ext_authz server.
type Metrics struct {
	Registry *prometheus.Registry

	// Decisions counts authorization decisions by component, operation,
	// result and code (a DecisionCode: why a request was denied).
	Decisions *prometheus.CounterVec
	// DecisionSeconds observes decision latency by component.
	DecisionSeconds *prometheus.HistogramVec
	// CacheLookups counts cache lookups by cache and outcome (hit, miss).
	CacheLookups *prometheus.CounterVec
	// Routes counts routed messages by layer.
	Routes *prometheus.CounterVec
	// CapabilityCalls counts handler calls by capability id and state.
	CapabilityCalls *prometheus.CounterVec
	// Reloads counts reload attempts by result (ok, rejected).
	Reloads *prometheus.CounterVec
	// Revision exposes the serving policy revision as a label.
	Revision *prometheus.GaugeVec
	// StoreErrors counts task-store operations that failed because the
	// store could not answer, by operation (see Store).
	StoreErrors *prometheus.CounterVec
	// StoreReachable is 1 while the task store answers, 0 while it does not
	// (see Store).
	StoreReachable prometheus.Gauge
}

// BuildInfo registers capgate_build_info{version,commit,go} (value 1): which
// build is serving, as Prometheus' own *_build_info metrics say it.
func (m *Metrics) BuildInfo(version, commit string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capgate_build_info", Help: "capgate's version, the commit it was built from and the Go version (value 1).",
	}, []string{"version", "commit", "go"})
	g.WithLabelValues(version, commit, runtime.Version()).Set(1)
	m.Registry.MustRegister(g)
}

// New creates the collectors on a fresh registry with Go and process metrics.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		Registry: reg,
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_decisions_total", Help: "Authorization decisions by component, operation, result and code (ok; refused, invalid, unavailable, error for denials).",
		}, []string{"component", "operation", "result", "code"}),
		DecisionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "capgate_decision_duration_seconds",
			Help:    "Time to decide a request, by component.",
			Buckets: []float64{25e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 50e-3, 0.25, 1},
		}, []string{"component"}),
		CacheLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_cache_lookups_total", Help: "Cache lookups by cache (token, view) and outcome (hit, miss).",
		}, []string{"cache", "outcome"}),
		Routes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_routes_total", Help: "Messages routed, by the layer that decided.",
		}, []string{"layer"}),
		CapabilityCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_capability_calls_total", Help: "Handler calls by capability id and lifecycle state.",
		}, []string{"capability", "state"}),
		Reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_reloads_total", Help: "Reloads of config, manifests and policy by result.",
		}, []string{"result"}),
		Revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capgate_policy_revision_info", Help: "The serving policy revision (value 1).",
		}, []string{"revision"}),
		StoreErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_store_errors_total", Help: "Task-store operations that failed because the store could not answer, by operation.",
		}, []string{"operation"}),
		StoreReachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capgate_store_reachable", Help: "1 while the task store answers (the last command or probe was answered), 0 while it does not.",
		}),
	}
	reg.MustRegister(m.Decisions, m.DecisionSeconds, m.CacheLookups, m.Routes, m.CapabilityCalls, m.Reloads, m.Revision,
		m.StoreErrors, m.StoreReachable)
	return m
}
