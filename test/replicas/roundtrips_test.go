package replicas_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks/redisstore"
	"github.com/capgate/capgate/test/replicas/redisproc"
	"github.com/capgate/capgate/test/testutil"
)

// trips is a TCP proxy in front of a redis-server that counts round trips: a burst of bytes a
// client sends after the server last answered it (or first) is one round trip, however many
// commands it pipelines and however the bytes are split into reads. Each round trip is named
// by the commands in it ("EVALSHA+EVALSHA" for a pipeline of two). Health PINGs are not
// counted.
type trips struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	names []string
}

func newTrips(t *testing.T, to string) *trips {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &trips{ln: ln, to: to}
	t.Cleanup(func() { _ = ln.Close() })
	go p.serve(t)
	return p
}

// URL is the proxy's redis URL of database db.
func (p *trips) URL(db int) string { return fmt.Sprintf("redis://%s/%d", p.ln.Addr(), db) }

func (p *trips) serve(t *testing.T) {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			_ = c.Close()
			continue
		}
		t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
		p.relay(c, s)
	}
}

// relay copies both ways; the client's side is read command by command (RESP arrays), and a
// command that follows an answer starts a round trip.
func (p *trips) relay(c, s net.Conn) {
	var mu sync.Mutex
	answered := true // no request outstanding
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				mu.Lock()
				answered = true
				mu.Unlock()
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = c.Close()
				return
			}
		}
	}()
	go func() {
		r := bufio.NewReader(c)
		trip := -1 // index into p.names of the round trip under way, -1: a PING's
		for {
			name, raw, err := readCommand(r)
			if err != nil {
				_ = s.Close()
				return
			}
			mu.Lock()
			fresh := answered
			answered = false
			mu.Unlock()
			if fresh {
				trip = -1
				if name != "PING" {
					p.mu.Lock()
					p.names = append(p.names, name)
					trip = len(p.names) - 1
					p.mu.Unlock()
				}
			} else if trip >= 0 {
				p.mu.Lock()
				p.names[trip] += "+" + name
				p.mu.Unlock()
			}
			if _, err := s.Write(raw); err != nil {
				return
			}
		}
	}()
}

// readCommand reads one RESP array command (what go-redis sends) and returns its name and bytes.
func readCommand(r *bufio.Reader) (string, []byte, error) {
	var raw bytes.Buffer
	line, err := r.ReadString('\n')
	if err != nil {
		return "", nil, err
	}
	raw.WriteString(line)
	var n int
	if _, err := fmt.Sscanf(line, "*%d\r\n", &n); err != nil {
		return "", nil, fmt.Errorf("not a RESP array: %q", line)
	}
	name := ""
	for i := range n {
		l, err := r.ReadString('\n')
		if err != nil {
			return "", nil, err
		}
		raw.WriteString(l)
		var size int
		if _, err := fmt.Sscanf(l, "$%d\r\n", &size); err != nil {
			return "", nil, fmt.Errorf("not a RESP bulk string: %q", l)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", nil, err
		}
		raw.Write(b)
		if i == 0 {
			name = strings.ToUpper(string(b[:size]))
		}
	}
	return name, raw.Bytes(), nil
}

// since returns the round trips counted after the first from.
func (p *trips) since(from int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.names[from:]...)
}

func (p *trips) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.names)
}

// messageReply answers every SendMessage at once with a message in the caller's context (as
// the gateway benchmark's upstream does), without calling the echo handler.
func messageReply(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Message struct {
					ContextID string `json:"contextId"`
				} `json:"message"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &req) != nil || req.Method != "SendMessage" {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{
			"message": map[string]any{"messageId": "reply", "role": "ROLE_AGENT", "contextId": req.Params.Message.ContextID,
				"parts": []any{map[string]any{"text": "ok"}}},
		}})
	})
}

// TestRoundTripsPerMessage counts the Redis round trips of a routed SendMessage carrying the
// caller's own contextId (the gateway benchmark's workload, #33 item 6) once the context is
// held: a handler answering with a message, and one answering with a task in that context.
// The figures are exact, so that a round trip added to the message path fails here.
func TestRoundTripsPerMessage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wrap  func(http.Handler) http.Handler
		trips []string // of one message, in order
	}{
		// Reserve the messageId; settle the record and count the call (one script).
		{"message reply", messageReply, []string{"EVALSHA", "EVALSHA"}},
		// Reserve; settle the record, count the call and bind the task (its owner's sets, then
		// its own hash), one script.
		{"task", nil, []string{"EVALSHA", "EVALSHA"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			redis := redisproc.Start(t)
			p := newTrips(t, redis.Addr)
			d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
			testutil.NewUpstreamWrapped(t, d, tc.wrap).Use(d)
			d.Config.Store = p.URL(0)
			srv := testutil.Start(t, d)
			tok := testutil.Token(t, partner)

			// The first message claims the context; the rest continue in it.
			send := func(id string) {
				t.Helper()
				r, err := call(srv, tok, "SendMessage", inContext(id, "ctx-trips"))
				require.NoError(t, err)
				require.Nil(t, r.Error, r.Raw)
			}
			send("m-first")
			const n = 5
			for i := range n {
				from := p.count()
				send(fmt.Sprintf("m-%d", i))
				require.Equal(t, tc.trips, p.since(from), "the Redis round trips of message %d", i)
			}
			// Every call was counted, in the settlement's round trip.
			st, err := redisstore.Dial(t.Context(), redis.URL(0))
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			u, err := st.Usage(t.Context(), "reconcile-invoice", time.Now())
			require.NoError(t, err)
			require.Equal(t, int64(n+1), u.Total)
		})
	}
}
