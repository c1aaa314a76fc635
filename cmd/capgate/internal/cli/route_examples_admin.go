package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/admin"
	"github.com/capgate/capgate/sidecar/tasks"
)

// adminTimeout bounds one request to the admin listener.
const adminTimeout = 30 * time.Second

// maxAdminAnswer caps what is read of one answer of the admin listener,
// whatever the config's bounds allow.
const maxAdminAnswer = 64 << 20

// adminExamples reads and forgets candidate routing examples through a
// running capgate's admin listener (admin.WithExamples): the memory store
// holds them inside that process only.
type adminExamples struct {
	base   *url.URL
	token  []byte // listen.admin_token_file's secret; nil: none sent
	client *http.Client
	// maxAnswer bounds one list answer: the config's candidates of one
	// capability at most, JSON-escaped.
	maxAnswer int64
}

var _ candidates = adminExamples{}

func newAdminExamples(raw string, token []byte, lc config.Learn) (adminExamples, error) {
	base, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.RawQuery != "" {
		return adminExamples{}, usageErr("--admin %q: want http(s)://host:port", raw)
	}
	maxAnswer := int64(max(lc.MaxPerCapability, 1))*int64(6*max(lc.MaxTextBytes, 1)+64) + 4096
	return adminExamples{base: base, token: token, client: &http.Client{Timeout: adminTimeout},
		maxAnswer: min(maxAnswer, maxAdminAnswer)}, nil
}

// ExamplesOf lists capability's candidates; the serving capgate's own
// router.learn.ttl applies, not ttl.
func (a adminExamples) ExamplesOf(ctx context.Context, capability string, _ time.Duration) ([]tasks.Example, error) {
	u := a.base.JoinPath(admin.ExamplesPath)
	u.RawQuery = url.Values{"capability": {capability}}.Encode()
	var resp admin.ExamplesResponse
	if err := a.do(ctx, http.MethodGet, u, nil, a.maxAnswer, &resp); err != nil {
		return nil, err
	}
	if msg, failed := resp.Errors[capability]; failed {
		return nil, errors.New(msg)
	}
	list, ok := resp.Examples[capability]
	if !ok {
		return nil, fmt.Errorf("the answer has no candidates of %s", capability)
	}
	out := make([]tasks.Example, len(list))
	for i, c := range list {
		out[i] = tasks.Example{Capability: capability, Text: c.Text, Count: c.Count}
	}
	return out, nil
}

// DropExamples forgets texts of capability, in as many requests as the
// listener's bounds (admin.MaxDropBody, admin.MaxDropTexts) need.
func (a adminExamples) DropExamples(ctx context.Context, capability string, texts []string) error {
	u := a.base.JoinPath(admin.ExamplesDropPath)
	const room = admin.MaxDropBody / 2 // the texts of one request, JSON-encoded; the rest is margin
	for len(texts) > 0 {
		n, size := 0, 0
		for n < len(texts) && n < admin.MaxDropTexts {
			b, err := json.Marshal(texts[n])
			if err != nil {
				return err
			}
			if n > 0 && size+len(b)+1 > room {
				break
			}
			size += len(b) + 1
			n++
		}
		body, err := json.Marshal(admin.DropRequest{Capability: capability, Texts: texts[:n]})
		if err != nil {
			return err
		}
		var resp admin.DropResponse
		if err := a.do(ctx, http.MethodPost, u, body, 4096, &resp); err != nil {
			return err
		}
		texts = texts[n:]
	}
	return nil
}

// do sends one request and decodes a 200 answer of at most limit bytes into
// out; any other answer is an error saying what the listener said (its JSON
// "error", never the body as is).
func (a adminExamples) do(ctx context.Context, method string, u *url.URL, body []byte, limit int64, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	what := method + " /" + strings.TrimPrefix(u.Path, "/")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != nil {
		req.Header.Set("Authorization", "Bearer "+string(a.token))
	}
	resp, err := a.client.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s: %w (is capgate serving this config? the memory store keeps candidates "+
			"inside the serving capgate only; pass --admin URL for another admin listener)", what, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("%s: answer larger than %d bytes", what, limit)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		said := ""
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			said = ": " + truncate(e.Error, 200)
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			said += " (the admin listener answers " + admin.ExamplesPath + " only to loopback peers, or with " +
				"listen.admin_token_file to callers sending its token: pass the server's --config)"
		}
		return fmt.Errorf("%s: HTTP %d%s", what, resp.StatusCode, said)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: the answer is not what capgate's admin listener sends", what)
	}
	return nil
}

// truncate cuts s to at most n runes.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
