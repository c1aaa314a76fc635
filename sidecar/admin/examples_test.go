package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/admin"
	"github.com/capgate/capgate/sidecar/tasks"
)

// brokenExamples fails for one capability id with an error naming a host.
type brokenExamples struct {
	*tasks.Memory
	id string
}

func (b brokenExamples) ExamplesOf(ctx context.Context, id string, ttl time.Duration) ([]tasks.Example, error) {
	if id == b.id {
		return nil, errors.New("dial tcp: secret-host:6379")
	}
	return b.Memory.ExamplesOf(ctx, id, ttl)
}

func (b brokenExamples) DropExamples(ctx context.Context, id string, texts []string) error {
	if id == b.id {
		return errors.Join(tasks.ErrUnavailable, errors.New("dial tcp: secret-host:6379"))
	}
	return b.Memory.DropExamples(ctx, id, texts)
}

// TestExamples: the candidates of the store, listed per capability (text
// and count only) and forgotten by text; bad requests are refused with a
// JSON error that echoes neither the body nor the store's error.
func TestExamples(t *testing.T) {
	mem := tasks.NewMemory(0)
	for _, s := range []string{"where is my bill", "where is my bill", "hello there"} {
		require.NoError(t, mem.AddExample(t.Context(), "a", s, time.Hour, 10))
	}
	h := admin.New(prometheus.NewRegistry(), admin.WithExamples(brokenExamples{mem, "c"},
		func() []string { return []string{"b", "a"} }, func() time.Duration { return time.Hour }, nil))
	do := func(method, target, contentType, body string) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000" // without a token: loopback peers only
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			var e struct{ Error string }
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
			require.NotEmpty(t, e.Error)
		}
		return rec.Code, rec.Body.String()
	}
	list := func(query string) admin.ExamplesResponse {
		t.Helper()
		code, body := do(http.MethodGet, admin.ExamplesPath+query, "", "")
		require.Equal(t, http.StatusOK, code, body)
		var r admin.ExamplesResponse
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		return r
	}

	r := list("")
	require.Equal(t, "1h0m0s", r.TTL)
	require.Equal(t, map[string][]admin.Candidate{
		"a": {{Text: "hello there", Count: 1}, {Text: "where is my bill", Count: 2}},
		"b": {},
	}, r.Examples, "every capability by default, one without candidates listed empty")
	r = list("?capability=a&capability=c")
	require.Len(t, r.Examples, 1)
	require.Equal(t, map[string]string{"c": "candidates could not be read"}, r.Errors, "the store's error is not echoed")

	drop := func(body string) (int, string) {
		return do(http.MethodPost, admin.ExamplesDropPath, "application/json; charset=utf-8", body)
	}
	code, body := drop(`{"capability":"a","texts":["where is my bill","never seen"]}`)
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"capability":"a","texts":2}`, body)
	require.Equal(t, []admin.Candidate{{Text: "hello there", Count: 1}}, list("?capability=a").Examples["a"])
	code, body = drop(`{"capability":"c","texts":["x"]}`)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.NotContains(t, body, "secret-host")

	secret := "my-secret-text"
	for _, tc := range []struct {
		method, target, contentType, body string
		status                            int
	}{
		{http.MethodGet, admin.ExamplesPath + "?capability=../etc", "", "", http.StatusBadRequest},
		{http.MethodGet, admin.ExamplesPath + "?capability=A", "", "", http.StatusBadRequest},
		{http.MethodGet, admin.ExamplesPath + "?" + strings.Repeat("capability=a&", admin.MaxUsageIDs+1), "", "", http.StatusBadRequest},
		{http.MethodPost, admin.ExamplesPath, "application/json", "{}", http.StatusMethodNotAllowed},
		{http.MethodDelete, admin.ExamplesDropPath, "application/json", "{}", http.StatusMethodNotAllowed},
		{http.MethodPost, admin.ExamplesDropPath, "", `{"capability":"a","texts":["` + secret + `"]}`, http.StatusUnsupportedMediaType},
		{http.MethodPost, admin.ExamplesDropPath, "application/x-www-form-urlencoded", "capability=a", http.StatusUnsupportedMediaType},
		{http.MethodPost, admin.ExamplesDropPath, "text/plain", `{"capability":"a","texts":["` + secret + `"]}`, http.StatusUnsupportedMediaType},
		{http.MethodPost, admin.ExamplesDropPath, "application/json", `{"capability":"a","texts":["` + secret + `"]`, http.StatusBadRequest},
		{http.MethodPost, admin.ExamplesDropPath, "application/json", `{"capability":"a","texts":["` + secret + `"]} {}`, http.StatusBadRequest},
		{http.MethodPost, admin.ExamplesDropPath, "application/json", `{"capability":"a","texts":["` + secret + `"],"who":"x"}`, http.StatusBadRequest},
		{http.MethodPost, admin.ExamplesDropPath, "application/json", `{"capability":"a","texts":"` + secret + `"}`, http.StatusBadRequest},
		{http.MethodPost, admin.ExamplesDropPath, "application/json", `{"capability":"../a","texts":["` + secret + `"]}`, http.StatusBadRequest},
		{http.MethodPost, admin.ExamplesDropPath, "application/json", `{"capability":"a","texts":[]}`, http.StatusBadRequest},
		{http.MethodPost, admin.ExamplesDropPath, "application/json", `{"capability":"a","texts":[` +
			strings.Repeat(`"x",`, admin.MaxDropTexts) + `"x"]}`, http.StatusBadRequest},
		{http.MethodPost, admin.ExamplesDropPath, "application/json", `{"capability":"a","texts":["` +
			strings.Repeat(secret, admin.MaxDropBody/len(secret)+1) + `"]}`, http.StatusRequestEntityTooLarge},
	} {
		code, body := do(tc.method, tc.target, tc.contentType, tc.body)
		require.Equal(t, tc.status, code, "%s %s %s", tc.method, tc.target, tc.body)
		require.NotContains(t, body, secret, "a refusal echoes no text")
	}
	require.Equal(t, []admin.Candidate{{Text: "hello there", Count: 1}}, list("?capability=a").Examples["a"], "nothing refused was dropped")
}

// TestExamplesGuard: the examples endpoints are guarded as /v1/usage is —
// with a token, only callers sending it (loopback too); without one, only
// loopback peers — and a refused caller reads or drops nothing.
func TestExamplesGuard(t *testing.T) {
	token := []byte("an-admin-token-of-at-least-32-bytes-0123456789")
	for _, tc := range []struct {
		name   string
		token  []byte
		remote string
		auth   string
		status int
	}{
		{"no token, loopback", nil, "127.0.0.1:40000", "", http.StatusOK},
		{"no token, loopback v6", nil, "[::1]:40000", "", http.StatusOK},
		{"no token, remote", nil, "10.0.0.7:40000", "", http.StatusForbidden},
		{"no token, remote sending one", nil, "10.0.0.7:40000", "Bearer " + string(token), http.StatusForbidden},
		{"token, remote sending it", token, "10.0.0.7:40000", "Bearer " + string(token), http.StatusOK},
		{"token, loopback without it", token, "127.0.0.1:40000", "", http.StatusUnauthorized},
		{"token, wrong one", token, "127.0.0.1:40000", "Bearer " + string(token) + "x", http.StatusUnauthorized},
		{"token, not bearer", token, "127.0.0.1:40000", "Basic " + string(token), http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := tasks.NewMemory(0)
			require.NoError(t, mem.AddExample(t.Context(), "a", "where is my bill", time.Hour, 10))
			h := admin.New(prometheus.NewRegistry(), admin.WithExamples(mem,
				func() []string { return []string{"a"} }, func() time.Duration { return time.Hour }, tc.token))
			for _, req := range []*http.Request{
				httptest.NewRequest(http.MethodGet, admin.ExamplesPath, nil),
				httptest.NewRequest(http.MethodPost, admin.ExamplesDropPath, strings.NewReader(`{"capability":"a","texts":["where is my bill"]}`)),
			} {
				req.RemoteAddr = tc.remote
				req.Header.Set("Content-Type", "application/json")
				if tc.auth != "" {
					req.Header.Set("Authorization", tc.auth)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				require.Equal(t, tc.status, rec.Code, "%s %s", req.Method, req.URL.Path)
				if tc.status != http.StatusOK {
					require.NotContains(t, rec.Body.String(), "bill")
					require.NotContains(t, rec.Body.String(), string(token))
					got, err := mem.ExamplesOf(t.Context(), "a", time.Hour)
					require.NoError(t, err)
					require.Len(t, got, 1, "a refused drop forgets nothing")
				}
				if tc.status == http.StatusUnauthorized {
					require.Equal(t, "Bearer", rec.Header().Get("WWW-Authenticate"))
				}
			}
		})
	}
}
