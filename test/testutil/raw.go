package testutil

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Response is a raw HTTP response with its body read.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends a raw request to the gateway: method, path (with query), headers
// (name, value pairs) and body ("" for none). It never follows redirects.
func (s *Server) Do(t testing.TB, method, path string, body string, headers ...string) *Response {
	t.Helper()
	require.Zero(t, len(headers)%2, "headers are name, value pairs")
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, rd)
	require.NoError(t, err)
	for i := 0; i < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	return s.RoundTrip(t, req)
}

// RoundTrip sends req with the server's HTTP client and reads the response.
func (s *Server) RoundTrip(t testing.TB, req *http.Request) *Response {
	t.Helper()
	resp, err := s.HTTP.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// JSONRPC posts a JSON-RPC body to the gateway's endpoint with
// Content-Type application/json and the given extra headers.
func (s *Server) JSONRPC(t testing.TB, body string, headers ...string) *Response {
	t.Helper()
	return s.Do(t, http.MethodPost, "/", body, append([]string{"Content-Type", "application/json"}, headers...)...)
}
