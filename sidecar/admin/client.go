package admin

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
)

// DefaultClientTimeout bounds one request of a Client built without its own
// http.Client.
const DefaultClientTimeout = 30 * time.Second

// ErrUnreachable marks a Client error where no answer came: nothing listens
// at the URL, or the connection failed. Callers add what the user should
// check (errors.Is).
var ErrUnreachable = errors.New("the admin listener did not answer")

// Client calls a running capgate's admin listener: the CLI's way to what
// only the serving process knows (usage and candidate routing examples of a
// memory store). It sends the admin token, when there is one, as a bearer
// token, reads at most a stated number of bytes of an answer, and turns a
// refusal into an error that says what the listener said (its JSON "error",
// never the body as is) and how to be let in.
type Client struct {
	base  *url.URL
	token []byte
	hc    *http.Client
}

// NewClient is a client of the admin listener at raw (http(s)://host:port,
// optionally with a path prefix). token is listen.admin_token_file's secret
// (nil: none sent; the listener then answers loopback peers only); hc nil
// means a client with DefaultClientTimeout.
func NewClient(raw string, token []byte, hc *http.Client) (*Client, error) {
	base, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.RawQuery != "" {
		return nil, fmt.Errorf("admin URL %q: want http(s)://host:port", raw)
	}
	if hc == nil {
		hc = &http.Client{Timeout: DefaultClientTimeout}
	}
	return &Client{base: base, token: token, hc: hc}, nil
}

// Base is the listener's URL with any credentials redacted.
func (c *Client) Base() string { return c.base.Redacted() }

// Do sends method to path (one of the listener's paths, e.g. UsagePath)
// with query and a JSON body (nil: none), and decodes a 200 answer of at
// most limit bytes into out. Any other answer, or a larger one, is an error
// naming the request; a connection failure wraps ErrUnreachable.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body []byte, limit int64, out any) error {
	u := c.base.JoinPath(path)
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	what := method + " " + path + " at " + c.Base()
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != nil {
		req.Header.Set("Authorization", "Bearer "+string(c.token))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // the URL is in what already
		}
		return fmt.Errorf("%s: %w: %w", what, ErrUnreachable, err)
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
		return fmt.Errorf("%s: %s", what, refusal(resp.StatusCode, path, b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: the answer is not what capgate's admin listener sends", what)
	}
	return nil
}

// refusal says what a non-200 answer of the listener to path means: its
// status, its JSON "error" (cut to 200 runes), and for an authentication
// refusal how to be let in.
func refusal(status int, path string, body []byte) string {
	msg := fmt.Sprintf("HTTP %d", status)
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg += ": " + truncate(e.Error, 200)
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		msg += " (the admin listener answers " + path + " only to loopback peers, or with " +
			"listen.admin_token_file to callers sending its token: pass the server's --config)"
	}
	return msg
}

// truncate cuts s to at most n runes.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
