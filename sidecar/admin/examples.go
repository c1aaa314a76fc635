package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/capgate/capgate/sidecar/tasks"
)

// ExamplesPath is where WithExamples serves the candidate routing examples;
// ExamplesDropPath is where it forgets them.
const (
	ExamplesPath     = "/v1/examples"
	ExamplesDropPath = "/v1/examples/drop"
)

// MaxDropBody bounds the body of one drop request; MaxDropTexts the texts it
// may name. A client with more to drop sends several requests.
const (
	MaxDropBody  = 1 << 20
	MaxDropTexts = 4096
)

// examplesTimeout bounds reading or writing the store for one request.
const examplesTimeout = 10 * time.Second

// ExampleStore is what the examples endpoints need of the store: the
// candidates of a capability, and forgetting some of them (every
// tasks.Examples is one: tasks.Memory, redisstore.Store).
type ExampleStore interface {
	ExamplesOf(ctx context.Context, capability string, ttl time.Duration) ([]tasks.Example, error)
	DropExamples(ctx context.Context, capability string, texts []string) error
}

var _ ExampleStore = tasks.Examples(nil)

// Candidate is one candidate routing example as the admin listener serves
// it: the redacted text and how many answers gave it. Nothing of who
// answered, nor when, is served (the store holds nothing of who).
type Candidate struct {
	Text  string `json:"text"`
	Count int    `json:"count"`
}

// ExamplesResponse is the body of GET /v1/examples.
type ExamplesResponse struct {
	// TTL is router.learn.ttl of the serving revision: the candidates are
	// those seen within it.
	TTL string `json:"ttl"`
	// Examples is keyed by capability id; a capability without candidates
	// has an empty list. Each list is sorted by text.
	Examples map[string][]Candidate `json:"examples"`
	// Errors names the capabilities whose candidates could not be read.
	Errors map[string]string `json:"errors,omitempty"`
}

// DropRequest is the body of POST /v1/examples/drop: the texts of one
// capability's candidates to forget (accepted into an examples file, or
// rejected). A text the store does not hold is ignored.
type DropRequest struct {
	Capability string   `json:"capability"`
	Texts      []string `json:"texts"`
}

// DropResponse answers a drop: the capability and how many texts were
// asked to be forgotten.
type DropResponse struct {
	Capability string `json:"capability"`
	Texts      int    `json:"texts"`
}

// WithExamples serves the candidate routing examples captured from answered
// clarifications (router.learn; docs/routing.md) from the store of this
// process — the memory store lives only here — for `capgate route examples`:
//
//   - GET /v1/examples[?capability=ID...] (default: ids()): each capability's
//     candidates seen within ttl() (the serving revision's router.learn.ttl);
//   - POST /v1/examples/drop with a DropRequest (Content-Type
//     application/json, at most MaxDropBody bytes and MaxDropTexts texts):
//     forgets those texts.
//
// Guarded as /v1/usage is (token: listen.admin_token_file's secret, every
// caller must send it; nil: loopback peers only). Errors are JSON
// {"error": "..."}; no candidate text is ever echoed in one, nor logged.
func WithExamples(store ExampleStore, ids func() []string, ttl func() time.Duration, token []byte) Option {
	return func(h *Handler) {
		h.mux.HandleFunc(ExamplesPath, func(w http.ResponseWriter, r *http.Request) {
			if allowed(w, r, token, "candidate examples") && onlyMethod(w, r, http.MethodGet) {
				serveExamples(w, r, store, ids, ttl())
			}
		})
		h.mux.HandleFunc(ExamplesDropPath, func(w http.ResponseWriter, r *http.Request) {
			if allowed(w, r, token, "candidate examples") && onlyMethod(w, r, http.MethodPost) {
				dropExamples(w, r, store)
			}
		})
	}
}

// onlyMethod answers 405 in JSON, naming the method allowed, unless r uses
// it (GET also allows HEAD).
func onlyMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	if method == http.MethodGet {
		w.Header().Set("Allow", "GET, HEAD")
	} else {
		w.Header().Set("Allow", method)
	}
	usageError(w, http.StatusMethodNotAllowed, "method: "+method+" only")
	return false
}

func serveExamples(w http.ResponseWriter, r *http.Request, store ExampleStore, ids func() []string, ttl time.Duration) {
	want, ok := wantedIDs(w, r.URL.Query(), ids)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), examplesTimeout)
	defer cancel()
	resp := ExamplesResponse{TTL: ttl.String(), Examples: make(map[string][]Candidate, len(want))}
	for _, id := range want {
		got, err := store.ExamplesOf(ctx, id, ttl)
		if err != nil {
			if resp.Errors == nil {
				resp.Errors = map[string]string{}
			}
			resp.Errors[id] = storeMessage(err, "candidates could not be read")
			continue
		}
		list := make([]Candidate, len(got))
		for i, e := range got {
			list[i] = Candidate{Text: e.Text, Count: e.Count}
		}
		resp.Examples[id] = list
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(resp)
}

func dropExamples(w http.ResponseWriter, r *http.Request, store ExampleStore) {
	// Only a JSON body: a browser's cross-site form post cannot send one
	// without a preflight the admin listener never answers.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		usageError(w, http.StatusUnsupportedMediaType, "body: Content-Type must be application/json")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxDropBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			usageError(w, http.StatusRequestEntityTooLarge, "body: larger than the limit of a drop request")
			return
		}
		usageError(w, http.StatusBadRequest, "body: could not be read")
		return
	}
	var req DropRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || !errors.Is(dec.Decode(&struct{}{}), io.EOF) {
		usageError(w, http.StatusBadRequest, `body: want {"capability": ID, "texts": [TEXT, ...]}`)
		return
	}
	switch {
	case !usageIDRE.MatchString(req.Capability):
		usageError(w, http.StatusBadRequest, "capability: not a capability id")
		return
	case len(req.Texts) == 0:
		usageError(w, http.StatusBadRequest, "texts: none given")
		return
	case len(req.Texts) > MaxDropTexts:
		usageError(w, http.StatusBadRequest, "texts: more than a drop request may name")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), examplesTimeout)
	defer cancel()
	if err := store.DropExamples(ctx, req.Capability, req.Texts); err != nil {
		usageError(w, http.StatusServiceUnavailable, storeMessage(err, "candidates could not be dropped"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(DropResponse{Capability: req.Capability, Texts: len(req.Texts)})
}

// storeMessage is what a client is told of a store error: that the store is
// unavailable, or msg — never the error's own text (addresses, keys).
func storeMessage(err error, msg string) string {
	if errors.Is(err, tasks.ErrUnavailable) {
		return tasks.ErrUnavailable.Error()
	}
	return msg
}
