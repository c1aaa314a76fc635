// Package example is a minimal skill handler that verifies capgate's token and calls a downstream tool with the caller's narrowed token, never with credentials of its own.
package example

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/capgate/capgate/sidecar/handlerauth"
)

// Handler answers POST requests (any body) by asking the tool for the
// caller's invoices and returning what the tool said. It is deliberately
// not an A2A server, to keep the identity pattern in view; see
// sidecar/handler/echo for one built with a2a-go.
type Handler struct {
	// ToolURL is the downstream tool's endpoint.
	ToolURL string
	// Client calls the tool; nil means a client with a 10 s timeout.
	Client *http.Client
}

// New returns the handler behind v's middleware: every request is
// verified before ServeHTTP runs.
func New(v *handlerauth.Verifier, toolURL string, client *http.Client) http.Handler {
	return v.Middleware(&Handler{ToolURL: toolURL, Client: client})
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	claims, ok := handlerauth.FromContext(r.Context())
	if !ok {
		http.Error(w, "unauthenticated", http.StatusUnauthorized) // only reachable without the middleware
		return
	}
	// The handler acts for the caller: it passes the caller's token on,
	// unchanged. The tool sees the caller's subject, tenant and the scopes
	// narrowed to this capability, never an agent credential.
	bearer := r.Header.Get("Authorization")
	out, err := h.callTool(r.Context(), bearer, claims)
	if err != nil {
		http.Error(w, "the tool is unavailable", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"principal": claims.Subject, "tool": out})
}

func (h *Handler) callTool(ctx context.Context, bearer string, c handlerauth.Claims) (json.RawMessage, error) {
	if !strings.HasPrefix(bearer, "Bearer ") {
		return nil, errors.New("no bearer token to pass on")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.ToolURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", bearer)
	req.Header.Set("X-Capgate-Decision-Id", c.DecisionID) // lets the tool's logs join capgate's
	client := h.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("tool answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if !json.Valid(body) {
		return nil, errors.New("tool answered non-JSON")
	}
	return body, nil
}
