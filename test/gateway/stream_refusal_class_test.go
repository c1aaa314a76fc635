package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// streamDoor is one binding and version a caller streams through: how it sends a streaming
// message and a subscription, and whether refusals are JSON-RPC responses.
type streamDoor struct {
	name    string
	jsonrpc bool
	// sse03: refusals are one Server-Sent Event (A2A 0.3 JSON-RPC).
	sse03 bool
	// send streams a message (id, one part: text, or a file of media type media; bad: parts
	// that are not a list) with the skill hint; subscribe subscribes to task.
	send      func(t *testing.T, srv *testutil.Server, auth, id, text, media string, bad bool) *testutil.Response
	subscribe func(t *testing.T, srv *testutil.Server, auth, task string, bad bool) *testutil.Response
}

func withAuth(auth string, h ...string) []string {
	if auth != "" {
		h = append(h, "Authorization", auth)
	}
	return h
}

// part10 and part03 are one message part in A2A 1.0 JSON and the 0.3 JSON-RPC shape.
func part10(text, media string) string {
	if media != "" {
		return `{"raw":"AAAA","mediaType":"` + media + `"}`
	}
	return `{"text":"` + text + `"}`
}

func part03(text, media string) string {
	if media != "" {
		return `{"kind":"file","file":{"bytes":"AAAA","mimeType":"` + media + `"}}`
	}
	return `{"kind":"text","text":"` + text + `"}`
}

func parts(p string, bad bool) string {
	if bad {
		return `"not a list"`
	}
	return "[" + p + "]"
}

const hint = `"metadata":{"skillId":"reconcile-invoice"}`

var streamDoors = []streamDoor{
	{
		name: "JSON-RPC 1.0", jsonrpc: true,
		send: func(t *testing.T, srv *testutil.Server, auth, id, text, media string, bad bool) *testutil.Response {
			msg := `{"messageId":"` + id + `","role":"ROLE_USER","parts":` + parts(part10(text, media), bad) + `,` + hint + `}`
			return srv.JSONRPC(t, `{"jsonrpc":"2.0","id":7,"method":"SendStreamingMessage","params":{"message":`+msg+`}}`, withAuth(auth, "A2A-Version", "1.0")...)
		},
		subscribe: func(t *testing.T, srv *testutil.Server, auth, task string, bad bool) *testutil.Response {
			params := `{"id":"` + task + `"}`
			if bad {
				params = `{"id":7}`
			}
			return srv.JSONRPC(t, `{"jsonrpc":"2.0","id":7,"method":"SubscribeToTask","params":`+params+`}`, withAuth(auth, "A2A-Version", "1.0")...)
		},
	},
	{
		name: "JSON-RPC 0.3", jsonrpc: true, sse03: true,
		send: func(t *testing.T, srv *testutil.Server, auth, id, text, media string, bad bool) *testutil.Response {
			msg := `{"kind":"message","messageId":"` + id + `","role":"user","parts":` + parts(part03(text, media), bad) + `,` + hint + `}`
			return srv.JSONRPC(t, `{"jsonrpc":"2.0","id":7,"method":"message/stream","params":{"message":`+msg+`}}`, withAuth(auth)...)
		},
		subscribe: func(t *testing.T, srv *testutil.Server, auth, task string, bad bool) *testutil.Response {
			params := `{"id":"` + task + `"}`
			if bad {
				params = `{"id":7}`
			}
			return srv.JSONRPC(t, `{"jsonrpc":"2.0","id":7,"method":"tasks/resubscribe","params":`+params+`}`, withAuth(auth)...)
		},
	},
	{
		name: "HTTP+JSON 1.0",
		send: func(t *testing.T, srv *testutil.Server, auth, id, text, media string, bad bool) *testutil.Response {
			msg := `{"messageId":"` + id + `","role":"ROLE_USER","parts":` + parts(part10(text, media), bad) + `,` + hint + `}`
			return srv.Do(t, http.MethodPost, "/message:stream", `{"message":`+msg+`}`, withAuth(auth, "A2A-Version", "1.0", "Content-Type", "application/json")...)
		},
		subscribe: func(t *testing.T, srv *testutil.Server, auth, task string, bad bool) *testutil.Response {
			if bad {
				task = "a%2Fb" // an encoded slash: no route
			}
			return srv.Do(t, http.MethodPost, "/tasks/"+task+":subscribe", "", withAuth(auth, "A2A-Version", "1.0")...)
		},
	},
	{
		name: "HTTP+JSON 0.3 /v1/",
		send: func(t *testing.T, srv *testutil.Server, auth, id, text, media string, bad bool) *testutil.Response {
			p := `{"text":"` + text + `"}`
			if media != "" {
				p = `{"file":{"fileWithBytes":"AAAA","mimeType":"` + media + `"}}`
			}
			msg := `{"messageId":"` + id + `","role":"ROLE_USER","content":` + parts(p, bad) + `,` + hint + `}`
			return srv.Do(t, http.MethodPost, "/v1/message:stream", `{"message":`+msg+`}`, withAuth(auth, "Content-Type", "application/json")...)
		},
		subscribe: func(t *testing.T, srv *testutil.Server, auth, task string, bad bool) *testutil.Response {
			if bad {
				task = "a%2Fb"
			}
			return srv.Do(t, http.MethodGet, "/v1/tasks/"+task+":subscribe", "", withAuth(auth)...)
		},
	},
	{
		name: "HTTP+JSON 0.3 un-prefixed",
		send: func(t *testing.T, srv *testutil.Server, auth, id, text, media string, bad bool) *testutil.Response {
			msg := `{"kind":"message","messageId":"` + id + `","role":"user","parts":` + parts(part03(text, media), bad) + `,` + hint + `}`
			return srv.Do(t, http.MethodPost, "/message:stream", `{"message":`+msg+`}`, withAuth(auth, "Content-Type", "application/json")...)
		},
		subscribe: func(t *testing.T, srv *testutil.Server, auth, task string, bad bool) *testutil.Response {
			if bad {
				task = "a%2Fb"
			}
			return srv.Do(t, http.MethodPost, "/tasks/"+task+":subscribe", "", withAuth(auth)...)
		},
	},
}

// streamingUpstream is a JSON-RPC handler (1.0 and 0.3) whose message streams for a messageId
// starting "ok-" open task t-<messageId> (one task event); everything else, subscriptions
// included, is answered TaskNotFound as a plain JSON-RPC error, before any event.
func streamingUpstream(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Message struct {
					MessageID string `json:"messageId"`
				} `json:"message"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		_ = json.Unmarshal(body, &req)
		id := req.Params.Message.MessageID
		if strings.HasPrefix(id, "ok-") && (req.Method == "SendStreamingMessage" || req.Method == "message/stream") {
			task := `{"task":{"id":"t-` + id + `","contextId":"c-` + id + `","status":{"state":"TASK_STATE_WORKING"}}}`
			if req.Method == "message/stream" {
				task = `{"kind":"task","id":"t-` + id + `","contextId":"c-` + id + `","status":{"state":"working"}}`
			}
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+task+"}\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"error":{"code":-32001,"message":"task not found"}}`)
	}))
	t.Cleanup(up.Close)
	return up
}

// TestPreStreamRefusalsAreNotStreams: every refusal decided before a stream's first event —
// the parser's, admission's (credential, task ownership), routing's, the message reservation's
// and the handler's — is answered before any stream starts, in one form per binding and
// version: A2A 1.0 JSON-RPC, a plain JSON-RPC error response as application/json with the
// error's HTTP status (never text/event-stream); HTTP+JSON (1.0, 0.3 /v1/ and un-prefixed), the
// error's HTTP status and a JSON body; A2A 0.3 JSON-RPC, HTTP 200 and exactly one event holding
// the JSON-RPC error, as 0.3 clients read it (docs/interop.md). Every streaming operation (SendStreamingMessage /
// message/stream, SubscribeToTask / tasks/resubscribe) × every refusal kind × every
// binding and version. (gRPC's refusal before the first message is a trailers-only response:
// TestStreamErrorsOneFormPerCallerBinding.)
func TestPreStreamRefusalsAreNotStreams(t *testing.T) {
	up := streamingUpstream(t)
	d := testutil.LoadDeployment(t, "")
	d.Config.Handlers["recon.v3.reconcile"] = up.URL + "/"
	srv := testutil.Start(t, d)
	tok := "Bearer " + testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})

	refused := func(t *testing.T, door streamDoor, r *testutil.Response, code, reason, text string) {
		t.Helper()
		body := r.Body
		if door.sse03 {
			// A2A 0.3 JSON-RPC: HTTP 200 and one event holding the JSON-RPC error.
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			require.Equal(t, "text/event-stream", r.Header.Get("Content-Type"), "%s", r.Body)
			require.Equal(t, 1, strings.Count(string(r.Body), "data: "), "one event: %s", r.Body)
			require.True(t, strings.HasPrefix(string(r.Body), "data: ") && strings.HasSuffix(string(r.Body), "\n\n"), "%q", r.Body)
			body = []byte(strings.TrimSpace(strings.TrimPrefix(string(r.Body), "data: ")))
		} else {
			require.Equal(t, "application/json", r.Header.Get("Content-Type"), "refused before the stream, not as one: %s", r.Body)
			require.NotContains(t, string(r.Body), "data:")
			require.GreaterOrEqual(t, r.Status, 400, "the error's HTTP status: %s", r.Body)
		}
		if door.jsonrpc {
			var res struct {
				ID    json.RawMessage `json:"id"`
				Error *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &res), "one JSON-RPC response: %s", r.Body)
			require.JSONEq(t, "7", string(res.ID))
			require.NotNil(t, res.Error, "%s", r.Body)
			if code != "" {
				require.Equal(t, code, strings.TrimSpace(string(json.RawMessage(itoa(res.Error.Code)))), "%s", r.Body)
			}
		} else {
			if reason != "" {
				require.Contains(t, string(r.Body), `"reason":"`+reason+`"`)
			}
		}
		if text != "" {
			require.Contains(t, string(r.Body), text)
		}
	}
	for i, door := range streamDoors {
		n := string(rune('a' + i))
		t.Run(door.name, func(t *testing.T) {
			// The message this door's caller sent first: it opened task t-ok-<n>.
			first := door.send(t, srv, tok, "ok-"+n, "reconcile INV-1", "", false)
			require.Equal(t, http.StatusOK, first.Status, "%s", first.Body)
			require.Equal(t, "text/event-stream", first.Header.Get("Content-Type"), "%s", first.Body)
			send := []struct {
				kind                   string
				r                      func() *testutil.Response
				code, reason, contains string
			}{
				{"params (parser)", func() *testutil.Response { return door.send(t, srv, tok, "m-params-"+n, "x", "", true) }, "-32602", "INVALID_PARAMS", ""},
				{"no credential (admission)", func() *testutil.Response { return door.send(t, srv, "", "m-anon-"+n, "reconcile INV-1", "", false) }, "-31401", "UNAUTHENTICATED", ""},
				{"no capability takes the media type (routing)", func() *testutil.Response {
					return door.send(t, srv, tok, "m-media-"+n, "", "application/x-nobody", false)
				}, "", "", ""},
				{"messageId used for another message (reservation)", func() *testutil.Response {
					return door.send(t, srv, tok, "ok-"+n, "reconcile INV-2", "", false)
				}, "-32602", "INVALID_PARAMS", "messageId already used for a different message"},
				{"handler error before the first event", func() *testutil.Response { return door.send(t, srv, tok, "m-fail-"+n, "reconcile INV-1", "", false) }, "-32001", "TASK_NOT_FOUND", ""},
			}
			for _, tc := range send {
				t.Run("stream message/"+tc.kind, func(t *testing.T) { refused(t, door, tc.r(), tc.code, tc.reason, tc.contains) })
			}
			subscribe := []struct {
				kind         string
				r            func() *testutil.Response
				code, reason string
			}{
				{"params (parser)", func() *testutil.Response { return door.subscribe(t, srv, tok, "t-ok-"+n, true) }, "", ""},
				{"no credential (admission)", func() *testutil.Response { return door.subscribe(t, srv, "", "t-ok-"+n, false) }, "-31401", "UNAUTHENTICATED"},
				{"not the caller's task (admission)", func() *testutil.Response { return door.subscribe(t, srv, tok, "t-unknown-"+n, false) }, "-32001", "TASK_NOT_FOUND"},
				{"handler error before the first event", func() *testutil.Response { return door.subscribe(t, srv, tok, "t-ok-"+n, false) }, "-32001", "TASK_NOT_FOUND"},
			}
			for _, tc := range subscribe {
				t.Run("subscribe/"+tc.kind, func(t *testing.T) { refused(t, door, tc.r(), tc.code, tc.reason, "") })
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
