// Package admin serves the admin listener: liveness, readiness, Prometheus
// metrics, the JWKS of capgate's own token-signing key (and of the
// card-signing key when cards are signed), and, behind the admin token, each
// capability's usage from the task store (/v1/usage), the candidate routing
// examples it keeps (/v1/examples, /v1/examples/drop) and the heap profile.
package admin

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler is the admin HTTP handler.
type Handler struct {
	mux   *http.ServeMux
	ready atomic.Bool
}

// Option configures the handler.
type Option func(*Handler)

// WithJWKS serves jwks (a JSON Web Key Set) at /.well-known/jwks.json.
func WithJWKS(jwks func() []byte) Option {
	return func(h *Handler) {
		h.mux.HandleFunc("GET /.well-known/jwks.json", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/jwk-set+json")
			w.Header().Set("Cache-Control", "public, max-age=300")
			_, _ = w.Write(jwks())
		})
	}
}

// New returns an admin handler exposing the registry's metrics.
func New(reg *prometheus.Registry, opts ...Option) *Handler {
	h := &Handler{mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	h.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !h.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	h.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	for _, o := range opts {
		o(h)
	}
	return h
}

// SetReady flips readiness (false while starting and while draining).
func (h *Handler) SetReady(v bool) { h.ready.Store(v) }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }
