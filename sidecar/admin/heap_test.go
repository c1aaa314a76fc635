package admin_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/admin"
)

// TestHeapProfile: the heap profile is go tool pprof's gzipped protobuf,
// served as /v1/usage is: to loopback peers without a token, to holders of
// the token with one, to nobody else.
func TestHeapProfile(t *testing.T) {
	token := []byte("0123456789abcdef0123456789abcdef")
	for _, c := range []struct {
		name   string
		token  []byte
		remote string
		auth   []string
		want   int
	}{
		{"loopback, no token configured", nil, "127.0.0.1:40000", nil, http.StatusOK},
		{"IPv6 loopback, no token configured", nil, "[::1]:40000", nil, http.StatusOK},
		{"remote, no token configured", nil, "10.0.0.7:40000", nil, http.StatusForbidden},
		{"token configured, none sent", token, "127.0.0.1:40000", nil, http.StatusUnauthorized},
		{"token configured, wrong one", token, "127.0.0.1:40000", []string{"Bearer nope"}, http.StatusUnauthorized},
		{"token configured, sent twice", token, "127.0.0.1:40000", []string{"Bearer " + string(token), "Bearer " + string(token)}, http.StatusUnauthorized},
		{"token configured and sent, remote", token, "10.0.0.7:40000", []string{"Bearer " + string(token)}, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := admin.New(prometheus.NewRegistry(), admin.WithHeapProfile(c.token))
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, admin.HeapPath+"?gc=1", nil)
			req.RemoteAddr = c.remote
			for _, a := range c.auth {
				req.Header.Add("Authorization", a)
			}
			h.ServeHTTP(rec, req)
			require.Equal(t, c.want, rec.Code, rec.Body.String())
			if c.want != http.StatusOK {
				require.NotContains(t, rec.Body.String(), string(token))
				require.Contains(t, rec.Body.String(), "the heap profile")
				return
			}
			zr, err := gzip.NewReader(bytes.NewReader(rec.Body.Bytes()))
			require.NoError(t, err, "gzipped")
			raw, err := io.ReadAll(zr)
			require.NoError(t, err)
			for _, st := range []string{"alloc_space", "inuse_space"} {
				require.True(t, bytes.Contains(raw, []byte(st)), "a heap profile names its sample type %s", st)
			}
		})
	}
	code, _, _ := get(t, admin.New(prometheus.NewRegistry()), admin.HeapPath)
	require.Equal(t, http.StatusNotFound, code, "only with the option")
}
