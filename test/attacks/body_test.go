package attacks_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/capgate/capgate/sidecar/protocol"
)

// endless yields n bytes of a JSON-RPC body that never ends well, counting
// what the HTTP client pulled from it.
type endless struct {
	n, read int64
	count   *atomic.Int64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= e.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), e.n-e.read)
	for i := range p[:k] {
		p[i] = ' '
	}
	if e.read == 0 && k > 0 {
		p[0] = '{'
	}
	e.read += k
	e.count.Add(k)
	return int(k), nil
}

// TestHugeBodyRefusedEarly sends a 100 MiB body, announced and streamed
// (chunked): the gateway answers with the size error without reading it.
func TestHugeBodyRefusedEarly(t *testing.T) {
	tg := start(t)
	const size = 100 << 20
	limit := tg.limits.MaxBodyBytes
	for _, announced := range []bool{true, false} {
		t.Run("announced="+strconv.FormatBool(announced), func(t *testing.T) {
			var sent atomic.Int64
			body := &endless{n: size, count: &sent}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+tg.addrs.A2A+"/", io.NopCloser(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("A2A-Version", "1.0")
			if announced {
				req.ContentLength = size
			} else {
				req.ContentLength = -1 // chunked
			}
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			_ = resp.Body.Close()
			we, ok := parseError(t, b)
			require.True(t, ok, "%d %s", resp.StatusCode, b)
			e := protocol.Errorf(protocol.PayloadTooLarge, "")
			require.Contains(t, []int{http.StatusOK, e.HTTPStatus()}, resp.StatusCode)
			require.Equal(t, e.Reason(), we.reason, "%s", b)
			require.Equal(t, e.JSONRPCCode(), we.jsonrpcCode, "%s", b)
			require.Contains(t, string(b), "limit")
			// The client may have pushed socket buffers' worth beyond what
			// capgate read; far from the 100 MiB it announced.
			got := sent.Load()
			t.Logf("client wrote %d bytes of %d (limit %d)", got, size, limit)
			if announced {
				require.Less(t, got, int64(16<<20))
			} else {
				require.Less(t, got, limit+16<<20)
			}
		})
	}
}

// TestCheckOversizedBody: Envoy buffers at most max_request_bytes; a
// CheckRequest whose body or announced length is over capgate's limit is
// denied with the size error, and one over the gRPC message limit fails the
// call (Envoy then denies, failure_mode_allow: false).
func TestCheckOversizedBody(t *testing.T) {
	tg := start(t)
	limit := int(tg.limits.MaxBodyBytes)
	tooLarge := &want{code: protocol.PayloadTooLarge}

	over := checkRequest(post("", `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{"p":"`+strings.Repeat("x", limit)+`"}}`))
	assertOutcome(t, tg.checkReq(t, over), *tooLarge)

	announced := checkRequest(post("", getCard))
	announced.Attributes.Request.Http.Headers["content-length"] = strconv.Itoa(100 << 20)
	announced.Attributes.Request.Http.Size = 100 << 20
	r := tg.checkReq(t, announced)
	require.Equal(t, codes.OK, r.grpcCode)
	require.False(t, r.allowed, "a partial body must never be authorized")
	// Envoy only sends a body shorter than its length when it truncated it
	// (max_request_bytes below capgate's limit, allow_partial_message true):
	// a misconfiguration, denied and named as such (the one documented
	// internal error, JSON-RPC shape here so HTTP 200).
	we, ok := parseError(t, r.body)
	require.True(t, ok)
	require.Equal(t, "INTERNAL_ERROR", we.reason)
	require.Contains(t, string(r.body), "max_request_bytes")

	partial := checkRequest(post("", getCard))
	partial.Attributes.Request.Http.Headers["x-envoy-auth-partial-body"] = "true"
	r = tg.checkReq(t, partial)
	require.False(t, r.allowed, "a partial body must never be authorized")
	require.Less(t, r.status, 500)

	huge := checkRequest(post("", strings.Repeat(" ", 3<<20)))
	r = tg.checkReq(t, huge)
	require.Equal(t, codes.ResourceExhausted, r.grpcCode)
	stillServes(t, tg)
}
