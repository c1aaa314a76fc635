package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/tasks"
)

// UsagePath is where WithUsage serves per-capability usage.
const UsagePath = "/v1/usage"

// MaxUsageIDs bounds the capability ids one usage request may name.
const MaxUsageIDs = 1024

// usageTimeout bounds reading the store for one usage request.
const usageTimeout = 10 * time.Second

var usageIDRE = regexp.MustCompile(manifest.IDPattern)

// UsageReader is the one store method the usage endpoint needs.
type UsageReader interface {
	Usage(ctx context.Context, capability string, now time.Time) (tasks.Usage, error)
}

var _ UsageReader = (*tasks.Memory)(nil)

// UsageResponse is the body of GET /v1/usage.
type UsageResponse struct {
	// Now is the instant the 30-day window ends at.
	Now time.Time `json:"now"`
	// Window is the length of the Calls30d window.
	Window string `json:"window"`
	// Usage is keyed by capability id; a capability never called has zero
	// counts.
	Usage map[string]tasks.Usage `json:"usage"`
	// Errors names the capabilities whose usage could not be read: their
	// usage is unknown, not zero.
	Errors map[string]string `json:"errors,omitempty"`
}

// WithUsage serves GET /v1/usage: the call history of capabilities read
// from the store (the store of this process: the memory store lives only
// here). Query parameters: capability (repeatable; default: ids()), now
// (RFC 3339; default: the current time) — the end of the 30-day window.
//
// token is listen.admin_token_file's secret: when set, every caller must send
// "Authorization: Bearer <token>" (read by identity.BearerToken, compared in
// constant time); when nil, only a loopback peer (127.0.0.0/8, ::1) is
// answered. Others get 401 or 403 and nothing is read.
func WithUsage(store UsageReader, ids func() []string, token []byte) Option {
	return func(h *Handler) {
		h.mux.HandleFunc("GET "+UsagePath, func(w http.ResponseWriter, r *http.Request) {
			if !allowed(w, r, token, "usage") {
				return
			}
			serveUsage(w, r, store, ids)
		})
	}
}

// allowed decides whether r may read what (usage, the heap profile): with a
// token only callers sending it, without one only loopback peers. When r
// may not, it answers 401 or 403 and returns false.
func allowed(w http.ResponseWriter, r *http.Request, token []byte, what string) bool {
	status, msg := access(r, token, what)
	if status == 0 {
		return true
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	usageError(w, status, msg)
	return false
}

// access decides whether r may read what: 0 when it may, else the status
// and message of the refusal.
func access(r *http.Request, token []byte, what string) (int, string) {
	if token == nil {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if a, perr := netip.ParseAddr(host); err == nil && perr == nil && a.Unmap().IsLoopback() {
			return 0, ""
		}
		return http.StatusForbidden, what + " is served to loopback peers only; set listen.admin_token_file to read it remotely"
	}
	vs := r.Header.Values("Authorization")
	if len(vs) != 1 {
		return http.StatusUnauthorized, what + " needs the admin token (listen.admin_token_file)"
	}
	got, err := identity.BearerToken(vs[0])
	if err != nil || subtle.ConstantTimeCompare([]byte(got), token) != 1 {
		return http.StatusUnauthorized, what + " needs the admin token (listen.admin_token_file)"
	}
	return 0, ""
}

func serveUsage(w http.ResponseWriter, r *http.Request, store UsageReader, ids func() []string) {
	q := r.URL.Query()
	now := time.Now().UTC()
	if s := q.Get("now"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			usageError(w, http.StatusBadRequest, "now: not an RFC 3339 time")
			return
		}
		now = t
	}
	want, ok := wantedIDs(w, q, ids)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), usageTimeout)
	defer cancel()
	resp := UsageResponse{Now: now, Window: tasks.Window.String(), Usage: make(map[string]tasks.Usage, len(want))}
	for _, id := range want {
		u, err := store.Usage(ctx, id, now)
		if err != nil {
			if resp.Errors == nil {
				resp.Errors = map[string]string{}
			}
			msg := "usage could not be read"
			if errors.Is(err, tasks.ErrUnavailable) {
				msg = tasks.ErrUnavailable.Error()
			}
			resp.Errors[id] = msg
			continue
		}
		u.Capability = id
		resp.Usage[id] = u
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(resp)
}

func usageError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// CapabilityIDs lists the ids of reg's capabilities (the default set of a
// usage request).
func CapabilityIDs(reg *manifest.Registry) []string {
	all := reg.All()
	out := make([]string, len(all))
	for i := range all {
		out[i] = all[i].ID
	}
	return out
}

// wantedIDs reads a request's capability ids: the "capability" query values, or
// every id ids gives when there are none; at most MaxUsageIDs, each a capability id,
// sorted without repeats. A refusal is answered on w (ok false).
func wantedIDs(w http.ResponseWriter, q url.Values, ids func() []string) (want []string, ok bool) {
	want = q["capability"]
	if len(want) == 0 && ids != nil {
		want = ids()
	}
	if len(want) > MaxUsageIDs {
		usageError(w, http.StatusBadRequest, "too many capability ids")
		return nil, false
	}
	for _, id := range want {
		if !usageIDRE.MatchString(id) {
			usageError(w, http.StatusBadRequest, "capability: not a capability id")
			return nil, false
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(want))), true
}
