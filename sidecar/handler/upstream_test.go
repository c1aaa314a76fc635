package handler_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

// rpcID reads the JSON-RPC id of the request, for servers that answer it.
func rpcID(t *testing.T, r *http.Request) string {
	t.Helper()
	var req struct {
		ID jsontext.Value `json:"id"`
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return "null"
	}
	if err := json.Unmarshal(body, &req, json.RejectUnknownMembers(false)); err != nil {
		return "null"
	}
	return string(req.ID)
}

func newInvoker(t *testing.T, url string, opts ...handler.Option) *handler.Invoker {
	t.Helper()
	opts = append([]handler.Option{handler.WithLogger(zaptest.NewLogger(t))}, opts...)
	inv, err := handler.NewInvoker(map[string]string{"up": url}, opts...)
	require.NoError(t, err)
	return inv
}

func call(handlerName string) handler.Request {
	return handler.Request{Handler: handlerName, Version: protocol.V1, Method: "SendMessage",
		Params: jsontext.Value(send10), Token: "tok-123", DecisionID: "dec-9",
		Extensions: []string{"https://example.com/ext/a", "https://example.com/ext/b"}}
}

// exposed passes the "up" handler's error messages and metadata on (handlers.up.expose_errors).
var exposed = handler.WithExposedErrors(map[string]bool{"up": true})

const invalidMsg = "the skill's handler returned an invalid A2A response"

func TestCallUpstream(t *testing.T) {
	defer goleak.VerifyNone(t)

	for _, tc := range []struct {
		name     string
		serve    func(t *testing.T, w http.ResponseWriter, r *http.Request, id string)
		wantCode protocol.Code
		wantMsg  string
		wantMeta map[string]string
		want     string // result, when no error
	}{
		{name: "result", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"task":{"id":"t1"}}}`, id)
		}, want: `{"task":{"id":"t1"}}`},
		{name: "HTML page", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = fmt.Fprint(w, "<html><body>Welcome</body></html>")
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "invalid JSON", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{`, id)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "empty body", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {},
			wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "wrong id", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprint(w, `{"jsonrpc":"2.0","id":"someone-else","result":{}}`)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "null id on a result", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprint(w, `{"jsonrpc":"2.0","id":null,"result":{}}`)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "wrong jsonrpc", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"1.0","id":%s,"result":{}}`, id)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "duplicate keys", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"task":{"id":"a","id":"b"}}}`, id)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "duplicate result", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{},"result":{"x":1}}`, id)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "result and error", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{},"error":{"code":-32001,"message":"x"}}`, id)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "data after the value", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}} {}`, id)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "502 without JSON-RPC", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "result with HTTP 500", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, id)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "error with a code outside A2A", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"server error"}}`, id)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "error without a message", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001}}`, id)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "redirect is not followed", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			http.Redirect(w, r, "http://127.0.0.1:1/steal", http.StatusTemporaryRedirect)
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "TaskNotFound passes through, cleaned, with ErrorInfo metadata", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"task\u0000 t-9\nnot found\u001b[31m",`+
				`"data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"taskId":"t-9","n":1}}]}}`, id)
		}, wantCode: protocol.TaskNotFound, wantMsg: "task t-9 not found[31m", wantMeta: map[string]string{"taskId": "t-9"}},
		{name: "error with a null id (request unreadable upstream)", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprint(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"bad params"}}`)
		}, wantCode: protocol.InvalidParams, wantMsg: "bad params"},
		{name: "a long message is clipped", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32005,"message":%q}}`, id, strings.Repeat("é", 2000))
		}, wantCode: protocol.ContentTypeNotSupported, wantMsg: strings.Repeat("é", 254) + "…"},
		{name: "the handler refusing capgate's token is capgate's failure", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-31401,"message":"unauthenticated"}}`, id)
		}, wantCode: protocol.Internal, wantMsg: "the skill's handler refused capgate's credential"},
		{name: "Unauthorized passes through", serve: func(t *testing.T, w http.ResponseWriter, r *http.Request, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-31403,"message":"limit exceeded"}}`, id)
		}, wantCode: protocol.Unauthorized, wantMsg: "limit exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.serve(t, w, r, rpcID(t, r))
			}))
			defer srv.Close()
			inv := newInvoker(t, srv.URL, exposed) // the handler's text as it reaches callers when exposed
			defer func() { _ = inv.Close() }()

			res, perr := inv.Call(t.Context(), call("up"))
			if tc.wantCode == "" {
				require.Nil(t, perr)
				require.JSONEq(t, tc.want, string(res))
				return
			}
			require.NotNil(t, perr)
			require.Equal(t, tc.wantCode, perr.Code)
			require.Equal(t, tc.wantMsg, perr.Message)
			if tc.wantMeta != nil {
				for k, v := range tc.wantMeta {
					require.Equal(t, v, perr.Metadata[k])
				}
				require.NotContains(t, perr.Metadata, "n") // non-string metadata is dropped
			}
		})
	}
}

func TestCallSendsHeadersAndBody(t *testing.T) {
	defer goleak.VerifyNone(t)
	var got *http.Request
	var body map[string]jsontext.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, body["id"])
	}))
	defer srv.Close()
	inv := newInvoker(t, srv.URL+"/a2a")
	defer func() { _ = inv.Close() }()

	for _, v := range []protocol.Version{protocol.V1, protocol.V03} {
		req := call("up")
		req.Version = v
		_, perr := inv.Call(t.Context(), req)
		require.Nil(t, perr)
		require.Equal(t, http.MethodPost, got.Method)
		require.Equal(t, "/a2a", got.URL.Path)
		require.Equal(t, "application/json", got.Header.Get("Content-Type"))
		require.Equal(t, "Bearer tok-123", got.Header.Get("Authorization"))
		require.Equal(t, string(v), got.Header.Get("A2A-Version"))
		require.Equal(t, "https://example.com/ext/a, https://example.com/ext/b", got.Header.Get("A2A-Extensions"))
		require.Equal(t, "dec-9", got.Header.Get("X-Capgate-Decision-Id"))
		require.Empty(t, got.Header.Get(handler.CallerAuthorizationHeader), "the caller's token is not forwarded by default")
		require.Equal(t, `"2.0"`, string(body["jsonrpc"]))
		require.Equal(t, `"SendMessage"`, string(body["method"]))
		require.JSONEq(t, send10, string(body["params"]))
		require.True(t, strings.HasPrefix(string(body["id"]), `"capgate-`))
	}
	require.Equal(t, "https://example.com/ext/a, https://example.com/ext/b", got.Header.Get("X-A2A-Extensions"), "0.3 header name")

	// Only when the deployment asks for it does the caller's own credential travel, apart.
	req := call("up")
	req.CallerAuthorization = "Bearer caller-own"
	_, perr := inv.Call(t.Context(), req)
	require.Nil(t, perr)
	require.Equal(t, "Bearer caller-own", got.Header.Get(handler.CallerAuthorizationHeader))
	require.Equal(t, "Bearer tok-123", got.Header.Get("Authorization"))
}

func TestCallTransportFailures(t *testing.T) {
	defer goleak.VerifyNone(t)

	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer slow.Close()
	defer close(release)

	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	defer reset.Close()

	halfway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0",`))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	defer halfway.Close()

	for _, tc := range []struct {
		name, url, msg string
	}{
		{"connection refused", downURL, "the skill's handler is unavailable"},
		{"slow beyond the timeout", slow.URL, "the skill's handler did not answer within 100ms"},
		{"connection reset", reset.URL, "the skill's handler is unavailable"},
		{"closed mid-body", halfway.URL, "the skill's handler is unavailable"},
		{"DNS failure", "http://capgate-handler.invalid/", "the skill's handler is unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := newInvoker(t, tc.url, handler.WithTimeout(100*time.Millisecond))
			defer func() { _ = inv.Close() }()
			start := time.Now()
			_, perr := inv.Call(t.Context(), call("up"))
			require.NotNil(t, perr)
			require.Equal(t, protocol.Internal, perr.Code)
			require.Equal(t, tc.msg, perr.Message)
			require.NotContains(t, string(jsonrpcwire.MarshalError(perr, nil)), "127.0.0.1", "no raw network error for clients")
			require.Less(t, time.Since(start), 5*time.Second)
		})
	}

	t.Run("caller cancels", func(t *testing.T) {
		inv := newInvoker(t, slow.URL)
		defer func() { _ = inv.Close() }()
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		_, perr := inv.Call(ctx, call("up"))
		require.NotNil(t, perr)
		require.Equal(t, "the call to the skill's handler was cancelled", perr.Message)
	})

	t.Run("unknown handler", func(t *testing.T) {
		inv := newInvoker(t, slow.URL)
		defer func() { _ = inv.Close() }()
		_, perr := inv.Call(t.Context(), call("nope"))
		require.NotNil(t, perr)
		require.Equal(t, protocol.Internal, perr.Code)
		require.Equal(t, "no handler named nope is configured", perr.Message)
		perr = inv.Stream(t.Context(), call("nope"), func(jsontext.Value) error { return nil })
		require.Equal(t, "no handler named nope is configured", perr.Message)
	})

	t.Run("malformed requests are refused before sending", func(t *testing.T) {
		inv := newInvoker(t, slow.URL)
		defer func() { _ = inv.Close() }()
		for name, mutate := range map[string]func(*handler.Request){
			"no token":       func(r *handler.Request) { r.Token = "" },
			"no version":     func(r *handler.Request) { r.Version = "" },
			"no method":      func(r *handler.Request) { r.Method = "" },
			"invalid params": func(r *handler.Request) { r.Params = jsontext.Value(`{"a":`) },
		} {
			req := call("up")
			mutate(&req)
			_, perr := inv.Call(t.Context(), req)
			require.NotNil(t, perr, name)
			require.Equal(t, protocol.Internal, perr.Code, name)
		}
	})
}

func TestNewInvokerValidates(t *testing.T) {
	for name, tc := range map[string]struct {
		handlers map[string]string
		opts     []handler.Option
		want     string
	}{
		"unregistered builtin": {map[string]string{"a": "builtin:nope"}, nil, `"builtin:nope" is not a registered builtin`},
		"not a URL":            {map[string]string{"a": "ftp://x/"}, nil, "neither a builtin nor an http(s) URL"},
		"no host":              {map[string]string{"a": "http:///x"}, nil, "has no host"},
		"credentials in URL":   {map[string]string{"a": "https://u:secret@x/"}, nil, "carries credentials"},
		"bad timeout":          {map[string]string{"a": "https://x/"}, []handler.Option{handler.WithTimeout(-1)}, "timeout must be positive"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := handler.NewInvoker(tc.handlers, tc.opts...)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "secret")
		})
	}
}

// sse writes Server-Sent Events and flushes each.
type sse struct {
	w http.ResponseWriter
}

func startSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	return sse{w}
}

func (s sse) raw(text string) {
	_, _ = io.WriteString(s.w, text)
	s.w.(http.Flusher).Flush()
}

func TestStreamUpstream(t *testing.T) {
	defer goleak.VerifyNone(t)

	for _, tc := range []struct {
		name     string
		serve    func(s sse, id string)
		plain    func(w http.ResponseWriter, id string) // instead of serve
		want     []string
		wantCode protocol.Code
		wantMsg  string
	}{
		{name: "events with comments, fields and multi-line data", serve: func(s sse, id string) {
			s.raw(": keep-alive\n\n")
			s.raw("event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"task\":{\"id\":\"t1\"}}}\n\n")
			s.raw("retry: 10\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata:\"id\":" + id + ",\r\ndata: \"result\":{\"statusUpdate\":{}}}\r\n\r\n")
		}, want: []string{`{"task":{"id":"t1"}}`, `{"statusUpdate":{}}`}},
		{name: "error event mid-stream", serve: func(s sse, id string) {
			s.raw("data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"task\":{\"id\":\"t1\"}}}\n\n")
			s.raw("data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"error\":{\"code\":-32004,\"message\":\"no streaming here\"}}\n\n")
			s.raw("data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"never\":true}}\n\n")
		}, want: []string{`{"task":{"id":"t1"}}`}, wantCode: protocol.UnsupportedOperation, wantMsg: "no streaming here"},
		{name: "garbage event", serve: func(s sse, id string) {
			s.raw("data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{}}\n\n")
			s.raw("data: <html>\n\n")
		}, want: []string{`{}`}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "event with another id", serve: func(s sse, id string) {
			s.raw("data: {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}}\n\n")
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "empty stream", serve: func(s sse, id string) {
			s.raw(": nothing\n\n")
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "oversized event", serve: func(s sse, id string) {
			s.raw("data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"x\":\"" + strings.Repeat("a", handler.MaxEventBytes) + "\"}}\n\n")
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
		{name: "plain JSON-RPC error", plain: func(w http.ResponseWriter, id string) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"task not found"}}`, id)
		}, wantCode: protocol.TaskNotFound, wantMsg: "task not found"},
		{name: "HTML instead of a stream", plain: func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprint(w, "<html>down</html>")
		}, wantCode: protocol.InvalidAgentResponse, wantMsg: invalidMsg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var accept string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				accept = r.Header.Get("Accept")
				id := rpcID(t, r)
				if tc.plain != nil {
					tc.plain(w, id)
					return
				}
				tc.serve(startSSE(w), id)
			}))
			defer srv.Close()
			inv := newInvoker(t, srv.URL, exposed)
			defer func() { _ = inv.Close() }()

			var got []string
			perr := inv.Stream(t.Context(), call("up"), func(r jsontext.Value) error {
				got = append(got, string(r))
				return nil
			})
			require.Equal(t, "text/event-stream", accept)
			require.Equal(t, len(tc.want), len(got))
			for i := range tc.want {
				require.JSONEq(t, tc.want[i], got[i])
			}
			if tc.wantCode == "" {
				require.Nil(t, perr)
				return
			}
			require.NotNil(t, perr)
			require.Equal(t, tc.wantCode, perr.Code)
			require.Equal(t, tc.wantMsg, perr.Message)
		})
	}
}

func TestStreamStops(t *testing.T) {
	defer goleak.VerifyNone(t)

	// forever sends one event every 5ms until the client goes away.
	var mu sync.Mutex
	served := 0
	forever := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := rpcID(t, r)
		s := startSSE(w)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				mu.Lock()
				served++
				mu.Unlock()
				return
			case <-tick.C:
				s.raw("data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{}}\n\n")
			}
		}
	}))
	defer forever.Close()

	// silent sends one event, then nothing.
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := rpcID(t, r)
		startSSE(w).raw("data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{}}\n\n")
		<-r.Context().Done()
	}))
	defer silent.Close()

	t.Run("ctx cancel stops a stream", func(t *testing.T) {
		inv := newInvoker(t, forever.URL)
		defer func() { _ = inv.Close() }()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		n := 0
		perr := inv.Stream(ctx, call("up"), func(jsontext.Value) error {
			if n++; n == 3 {
				cancel()
			}
			return nil
		})
		require.NotNil(t, perr)
		require.Equal(t, "the call to the skill's handler was cancelled", perr.Message)
		require.Equal(t, 3, n)
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return served == 1 }, 5*time.Second, 5*time.Millisecond,
			"the upstream saw the client go away")
	})

	t.Run("yield error stops a stream and is returned", func(t *testing.T) {
		inv := newInvoker(t, forever.URL)
		defer func() { _ = inv.Close() }()
		own := protocol.Errorf(protocol.Unauthorized, "binding refused")
		perr := inv.Stream(t.Context(), call("up"), func(jsontext.Value) error { return own })
		require.Same(t, own, perr)

		perr = inv.Stream(t.Context(), call("up"), func(jsontext.Value) error { return errors.New("client went away") })
		require.NotNil(t, perr)
		require.Equal(t, protocol.Internal, perr.Code)
		require.ErrorContains(t, perr, "client went away")
		require.NotContains(t, perr.Message, "client went away")
	})

	t.Run("idle timeout", func(t *testing.T) {
		inv := newInvoker(t, silent.URL, handler.WithStreamIdleTimeout(100*time.Millisecond))
		defer func() { _ = inv.Close() }()
		n := 0
		perr := inv.Stream(t.Context(), call("up"), func(jsontext.Value) error { n++; return nil })
		require.NotNil(t, perr)
		require.Equal(t, protocol.Internal, perr.Code)
		require.Equal(t, "the skill's handler sent nothing for 100ms", perr.Message)
		require.Equal(t, 1, n)
	})

	t.Run("a slow consumer is not idle", func(t *testing.T) {
		inv := newInvoker(t, forever.URL, handler.WithStreamIdleTimeout(50*time.Millisecond))
		defer func() { _ = inv.Close() }()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		n := 0
		perr := inv.Stream(ctx, call("up"), func(jsontext.Value) error {
			time.Sleep(80 * time.Millisecond) // longer than the idle timeout
			if n++; n == 2 {
				cancel()
			}
			return nil
		})
		require.Equal(t, "the call to the skill's handler was cancelled", perr.Message)
	})
}
