package gateway_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// slowStreamHandler is a skill handler that answers a streaming call only
// when the test says so: with one task event, or with an HTTP 500.
type slowStreamHandler struct {
	arrived chan struct{}
	answer  chan bool // true: a task event, false: HTTP 500
}

func (h *slowStreamHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := requestID(r)
	h.arrived <- struct{}{}
	var ok bool
	select {
	case ok = <-h.answer:
	case <-r.Context().Done():
		return
	}
	if !ok {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+id+
		`,"result":{"task":{"id":"slow-task-1","contextId":"slow-ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}}`+"\n\n")
}

// TestStreamKeepAlive relays a stream whose handler stays silent: the
// client gets SSE keep-alive comments (which also open the stream) until
// the handler answers, then the event, then a clean end of stream; a
// handler that fails after the stream was opened is the stream's last event.
func TestStreamKeepAlive(t *testing.T) {
	for _, tt := range []struct {
		name      string
		answer    bool
		wantEvent string // a substring of the last data line
	}{
		{"handler answers", true, `"result":{"task":{"id":"slow-task-1"`},
		{"handler fails", false, `"error":{"code":`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &slowStreamHandler{arrived: make(chan struct{}, 1), answer: make(chan bool, 1)}
			up := httptest.NewServer(h)
			t.Cleanup(up.Close)
			d := testutil.LoadDeployment(t, "")
			d.Config.Handlers["invoices.lookup.v1"] = up.URL + "/"
			// Short, so the test does not wait; the config's minimum (1s) is
			// for deployments.
			d.Config.Limits.StreamKeepAlive = 10 * time.Millisecond
			// A stream outlives the server's read timeout: the request was
			// read long before, and the stream must not be cut when it passes.
			d.Config.Limits.ReadTimeout = 100 * time.Millisecond
			srv := testutil.Start(t, d)
			tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"invoices.read"}})

			body := `{"jsonrpc":"2.0","id":"s1","method":"SendStreamingMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER",` +
				`"parts":[{"text":"Show me invoice INV-20931"}],"metadata":{"skillId":"lookup-invoice-v1"}}}}`
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/", strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("A2A-Version", "1.0")
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := srv.HTTP.Do(req)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			// The handler has said nothing, yet the stream is open: the
			// first keep-alive sent the headers.
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			<-h.arrived

			rd := bufio.NewReader(resp.Body)
			for range 30 { // 300ms of keep-alives: past the read timeout
				line, err := rd.ReadString('\n')
				require.NoError(t, err)
				require.Equal(t, ": keep-alive\n", line)
				blank, err := rd.ReadString('\n')
				require.NoError(t, err)
				require.Equal(t, "\n", blank)
			}
			h.answer <- tt.answer

			rest, err := io.ReadAll(rd) // the stream ends: EOF, not a reset
			require.NoError(t, err)
			var data []string
			for _, l := range strings.Split(string(rest), "\n") {
				switch {
				case l == "", l == ": keep-alive":
				case strings.HasPrefix(l, "data: "):
					data = append(data, l)
				default:
					require.Failf(t, "unexpected line", "%q", l)
				}
			}
			require.Len(t, data, 1, "%s", rest)
			require.Contains(t, data[0], `"id":"s1"`)
			require.Contains(t, data[0], tt.wantEvent)
			require.True(t, strings.HasSuffix(string(rest), "\n\n"), "the last event is complete")
		})
	}
}
