package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
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
	base, err := url.Parse(strings.TrimSuffix(a.URL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("admin URL %q: want http(s)://host:port", a.URL)
	}
	q := url.Values{"now": {now.UTC().Format(time.RFC3339)}}
	for _, id := range ids {
		q.Add("capability", id)
	}
	u := base.JoinPath(admin.UsagePath)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if a.Token != nil {
		req.Header.Set("Authorization", "Bearer "+string(a.Token))
	}
	c := a.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read usage from %s: %w", base.Redacted(), err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUsageBody+1))
	if err != nil {
		return nil, fmt.Errorf("read usage from %s: %w", base.Redacted(), err)
	}
	if len(body) > maxUsageBody {
		return nil, fmt.Errorf("read usage from %s: answer larger than %d bytes", base.Redacted(), maxUsageBody)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("read usage from %s: HTTP %d: the admin listener answers /v1/usage only to loopback peers, "+
			"or with listen.admin_token_file to callers sending its token (pass the server's --config)", base.Redacted(), resp.StatusCode)
	default:
		return nil, fmt.Errorf("read usage from %s: HTTP %d", base.Redacted(), resp.StatusCode)
	}
	var ur admin.UsageResponse
	if err := json.Unmarshal(body, &ur); err != nil {
		return nil, fmt.Errorf("read usage from %s: %w", base.Redacted(), err)
	}
	out := make(map[string]tasks.Usage, len(ur.Usage))
	for id, u := range ur.Usage {
		if _, failed := ur.Errors[id]; !failed {
			out[id] = u
		}
	}
	return out, nil
}
