package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/capgate/capgate/sidecar/admin"
	"github.com/capgate/capgate/sidecar/tasks"
)

// maxUsageBody bounds the admin endpoint's answer.
const maxUsageBody = 8 << 20

// Store reads usage straight from a task store (for example a shared Redis
// store; the memory store only knows the calls of its own process).
type Store struct {
	Store interface {
		Usage(ctx context.Context, capability string, now time.Time) (tasks.Usage, error)
	}
}

var (
	_ Source = Store{}
	_ Source = Admin{}
)

// Usage implements Source. Capabilities whose usage cannot be read are left
// out (unknown); it fails only when none could be read.
func (s Store) Usage(ctx context.Context, ids []string, now time.Time) (map[string]tasks.Usage, error) {
	out := make(map[string]tasks.Usage, len(ids))
	var errs []error
	for _, id := range ids {
		u, err := s.Store.Usage(ctx, id, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		out[id] = u
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Admin reads usage from a running capgate's admin listener
// (GET /v1/usage).
type Admin struct {
	// URL is the admin listener's base URL, e.g. http://127.0.0.1:9090.
	URL string
	// Client defaults to a client with a 10 s timeout.
	Client *http.Client
	// Token is the admin listener's token (listen.admin_token_file), sent as a
	// bearer token when set; without it only a loopback peer is answered.
	Token []byte
}

// Usage implements Source.
func (a Admin) Usage(ctx context.Context, ids []string, now time.Time) (map[string]tasks.Usage, error) {
	hc := a.Client
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	c, err := admin.NewClient(a.URL, a.Token, hc)
	if err != nil {
		return nil, err
	}
	q := url.Values{"now": {now.UTC().Format(time.RFC3339)}}
	for _, id := range ids {
		q.Add("capability", id)
	}
	var ur admin.UsageResponse
	if err := c.Do(ctx, http.MethodGet, admin.UsagePath, q, nil, maxUsageBody, &ur); err != nil {
		return nil, fmt.Errorf("read usage: %w", err)
	}
	out := make(map[string]tasks.Usage, len(ur.Usage))
	for id, u := range ur.Usage {
		if _, failed := ur.Errors[id]; !failed {
			out[id] = u
		}
	}
	return out, nil
}
