package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/admin"
	"github.com/capgate/capgate/sidecar/tasks"
)

// maxAdminAnswer caps what is read of one answer of the admin listener,
// whatever the config's bounds allow.
const maxAdminAnswer = 64 << 20

// adminExamples reads and forgets candidate routing examples through a
// running capgate's admin listener (admin.WithExamples): the memory store
// holds them inside that process only.
type adminExamples struct {
	client *admin.Client
	// maxAnswer bounds one list answer: the config's candidates of one
	// capability at most, JSON-escaped.
	maxAnswer int64
}

var _ candidates = adminExamples{}

func newAdminExamples(raw string, token []byte, lc config.Learn) (adminExamples, error) {
	c, err := admin.NewClient(raw, token, nil)
	if err != nil {
		return adminExamples{}, usageErr("--admin %q: want http(s)://host:port", raw)
	}
	maxAnswer := int64(max(lc.MaxPerCapability, 1))*int64(6*max(lc.MaxTextBytes, 1)+64) + 4096
	return adminExamples{client: c, maxAnswer: min(maxAnswer, maxAdminAnswer)}, nil
}

// ExamplesOf lists capability's candidates; the serving capgate's own
// router.learn.ttl applies, not ttl.
func (a adminExamples) ExamplesOf(ctx context.Context, capability string, _ time.Duration) ([]tasks.Example, error) {
	var resp admin.ExamplesResponse
	if err := a.do(ctx, http.MethodGet, admin.ExamplesPath, url.Values{"capability": {capability}}, nil, a.maxAnswer, &resp); err != nil {
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
		if err := a.do(ctx, http.MethodPost, admin.ExamplesDropPath, nil, body, 4096, &resp); err != nil {
			return err
		}
		texts = texts[n:]
	}
	return nil
}

// do is the client's Do, with what to check when nothing answered.
func (a adminExamples) do(ctx context.Context, method, path string, query url.Values, body []byte, limit int64, out any) error {
	err := a.client.Do(ctx, method, path, query, body, limit, out)
	if errors.Is(err, admin.ErrUnreachable) {
		return fmt.Errorf("%w (is capgate serving this config? the memory store keeps candidates "+
			"inside the serving capgate only; pass --admin URL for another admin listener)", err)
	}
	return err
}
