package admin

import (
	"net/http"
	"runtime"
	"runtime/pprof"
)

// HeapPath is where WithHeapProfile serves the heap profile.
const HeapPath = "/debug/pprof/heap"

// WithHeapProfile serves GET /debug/pprof/heap: the process's heap profile
// in the gzipped protobuf form `go tool pprof` reads (allocation sites of
// the live heap and of everything allocated since start — code locations
// and sizes, no request data). With ?gc=1 a garbage collection runs first,
// so that the live figures are current. Guarded as /v1/usage is: token is
// listen.admin_token_file's secret (every caller must send it), nil answers
// loopback peers only.
func WithHeapProfile(token []byte) Option {
	return func(h *Handler) {
		h.mux.HandleFunc("GET "+HeapPath, func(w http.ResponseWriter, r *http.Request) {
			if !allowed(w, r, token, "the heap profile") {
				return
			}
			if r.URL.Query().Get("gc") == "1" {
				runtime.GC()
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", `attachment; filename="heap.pprof"`)
			w.Header().Set("Cache-Control", "no-store")
			_ = pprof.Lookup("heap").WriteTo(w, 0)
		})
	}
}
