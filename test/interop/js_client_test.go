package interop

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// The client script's steps, in order (later ones use the tasks earlier ones created). The SDK's
// 0.3 steps (legacyCompat) run over JSON-RPC and HTTP+JSON: capgate serves gRPC in A2A 1.0 only,
// and its 0.3 card lists no gRPC interface.
var (
	jsCardSteps = []string{"publicCard", "verifyCard", "verifyParsedCard", "extendedCard", "extendedCardNoAuth"}
	jsV03Steps  = []string{"v03Card", "v03ExtendedCard", "v03Send", "v03Stream", "v03Get", "v03GetUnknown", "v03Clarify", "v03Subscribe", "v03Cancel",
		"v03Push", "v03PushRefused"}
	jsTaskSteps = []string{"send", "stream", "clarify", "subscribeOpen", "get", "getUnknown", "getOther", "getNoAuth", "cancel",
		"cancelCompleted", "list", "subscribe", "push", "pushRefused"}
)

// jsBindings are the SDK's transports, as its card names them.
var jsBindings = []string{"JSONRPC", "HTTP+JSON", "GRPC"}

func jsSteps(binding string) []string {
	steps := append([]string{}, jsCardSteps...)
	if binding != "GRPC" {
		steps = append(steps, "authRetry") // the SDK's auth retry wraps fetch: HTTP only
		steps = append(steps, jsV03Steps...)
	}
	return append(steps, jsTaskSteps...)
}

// jsCase is the expected outcome of one step on one binding.
type jsCase struct {
	binding, step string
	check         func(t *testing.T, s step)
}

func result(t *testing.T, s step, v any) {
	t.Helper()
	require.True(t, s.OK, "%s failed: %+v", s.Step, s.Error)
	require.NoError(t, json.Unmarshal(s.Result, v))
}

func failed(t *testing.T, s step, name, msg string) {
	t.Helper()
	require.False(t, s.OK, "%s succeeded: %s", s.Step, s.Result)
	require.NotNil(t, s.Error)
	require.Equal(t, name, s.Error.Name, "%+v", s.Error)
	require.Contains(t, s.Error.Message, msg)
}

type stepError struct{ Name, Reason, Message string }

type taskResult struct {
	Kind, State, Final string
	Artifacts          int
	ID                 bool
	Events             []string
	Skills             []string
	Retried            bool
	Verified           bool
	AlteredRefused     bool
	Tasks              int
	NextPageToken      bool
	SecondPage         int
	Distinct           bool
	Version            string
	Error              *stepError
}

type pushResult struct {
	Created struct {
		ID, URL string
		TaskID  bool
	}
	Got         struct{ ID, URL string }
	Listed      []string
	AfterDelete json.RawMessage
}

// jsCases is docs/interop.md's table for @a2a-js/sdk with
// auth.jsonrpc_http_status at its default (200) and push notifications on.
func jsCases() []jsCase {
	var cases []jsCase
	for _, b := range jsBindings {
		rest, grpc := b == "HTTP+JSON", b == "GRPC"
		add := func(step string, check func(t *testing.T, s step)) {
			cases = append(cases, jsCase{b, step, check})
		}
		add("publicCard", func(t *testing.T, s step) {
			var r struct {
				Name              string
				Skills, Bindings  []string
				ExtendedAgentCard bool
				Signed            bool
			}
			result(t, s, &r)
			require.Equal(t, "Finance Agent", r.Name)
			require.Equal(t, testutil.PublicSkills, r.Skills)
			require.Equal(t, []string{"JSONRPC", "HTTP+JSON", "GRPC"}, r.Bindings)
			require.True(t, r.ExtendedAgentCard)
			require.True(t, r.Signed)
		})
		add("verifyCard", func(t *testing.T, s step) {
			var r taskResult
			result(t, s, &r)
			require.True(t, r.Verified, "the SDK's verifier accepts capgate's signature")
			require.True(t, r.AlteredRefused, "and refuses the card with one value changed")
		})
		add("verifyParsedCard", func(t *testing.T, s step) {
			// SDK 1.3.0: canonicalizeAgentCard runs AgentCard.fromJSON on
			// an already parsed card, which drops securitySchemes (a
			// oneof), so its payload differs from the card's. capgate
			// signs the whole card, as the spec says (docs/interop.md).
			failed(t, s, "Error", "No valid signatures found on agent card.")
		})
		add("extendedCard", func(t *testing.T, s step) {
			var r taskResult
			result(t, s, &r)
			require.Contains(t, r.Skills, "reconcile-invoice")
		})
		add("extendedCardNoAuth", func(t *testing.T, s step) {
			// The SDK knows neither -31401 (JSON-RPC) nor a 401 or
			// UNAUTHENTICATED without a typed error class: a generic
			// error, the message kept.
			switch {
			case rest:
				failed(t, s, "A2AError", "authentication required")
			case grpc:
				failed(t, s, "A2AError", "gRPC error for getExtendedAgentCard: 16 authentication required")
			default:
				failed(t, s, "JsonRpcTransportError", "authentication required")
			}
		})
		if !grpc {
			add("authRetry", func(t *testing.T, s step) {
				var r taskResult
				result(t, s, &r)
				if rest {
					require.True(t, r.Retried, "HTTP+JSON answers 401: the SDK retries with the token")
					require.Contains(t, r.Skills, "reconcile-invoice")
					return
				}
				require.False(t, r.Retried, "JSON-RPC answers 200 (-31401): the SDK's auth retry never fires")
				require.NotNil(t, r.Error)
			})
			cases = append(cases, jsV03Cases(b)...)
		}
		add("send", func(t *testing.T, s step) {
			var r taskResult
			result(t, s, &r)
			require.Equal(t, "task", r.Kind)
			require.Equal(t, "TASK_STATE_COMPLETED", r.State)
			require.Equal(t, 1, r.Artifacts)
		})
		add("stream", func(t *testing.T, s step) {
			var r taskResult
			result(t, s, &r)
			require.Equal(t, []string{"task", "artifactUpdate", "statusUpdate"}, r.Events)
			require.Equal(t, "TASK_STATE_COMPLETED", r.Final)
		})
		add("clarify", func(t *testing.T, s step) {
			var r taskResult
			result(t, s, &r)
			require.Equal(t, "TASK_STATE_INPUT_REQUIRED", r.State)
		})
		add("subscribeOpen", func(t *testing.T, s step) {
			var r taskResult
			result(t, s, &r)
			require.Equal(t, []string{"task"}, r.Events, "the task capgate holds, as one event")
		})
		add("get", func(t *testing.T, s step) {
			var r taskResult
			result(t, s, &r)
			require.True(t, r.ID)
			require.Equal(t, "TASK_STATE_COMPLETED", r.State)
		})
		add("getUnknown", func(t *testing.T, s step) {
			failed(t, s, "TaskNotFoundError", "task not found")
		})
		add("getOther", func(t *testing.T, s step) {
			// Another caller's task is an unknown task.
			failed(t, s, "TaskNotFoundError", "task not found")
		})
		add("getNoAuth", func(t *testing.T, s step) {
			switch {
			case rest:
				failed(t, s, "A2AError", "authentication required")
			case grpc:
				failed(t, s, "A2AError", "gRPC error for getTask: 16 authentication required")
			default:
				failed(t, s, "JsonRpcTransportError", "authentication required")
			}
		})
		add("cancel", func(t *testing.T, s step) {
			var r taskResult
			result(t, s, &r)
			require.Equal(t, "TASK_STATE_CANCELED", r.State)
		})
		add("cancelCompleted", func(t *testing.T, s step) {
			failed(t, s, "TaskNotCancelableError", "")
		})
		add("list", func(t *testing.T, s step) {
			var r taskResult
			result(t, s, &r)
			require.Equal(t, 1, r.Tasks)
			require.True(t, r.NextPageToken)
			require.Equal(t, 1, r.SecondPage, "the page token gives the next page")
			require.True(t, r.Distinct)
		})
		add("subscribe", func(t *testing.T, s step) {
			// The task has completed: the stream is refused with an A2A
			// error, not left open (docs/interop.md: the spec asks for
			// UnsupportedOperationError here).
			require.False(t, s.OK, "%s", s.Result)
			require.Contains(t, s.Error.Message, "the skill's handler has no such task (decision ", "capgate's message, not the handler's")
			// On JSON-RPC too: the refusal comes before any stream, as a plain JSON-RPC error,
			// which the SDK types (docs/interop.md, "Stream errors have one form per caller
			// binding").
			require.Equal(t, "TaskNotFoundError", s.Error.Name)
		})
		add("push", func(t *testing.T, s step) {
			var r pushResult
			result(t, s, &r)
			require.Equal(t, "cfg-1", r.Created.ID)
			require.True(t, r.Created.TaskID)
			require.Equal(t, "https://hooks.example.com/a2a", r.Created.URL)
			require.Equal(t, "https://hooks.example.com/a2a", r.Got.URL)
			require.Equal(t, []string{"cfg-1"}, r.Listed)
			require.JSONEq(t, "0", string(r.AfterDelete), "deleted")
		})
		add("pushRefused", func(t *testing.T, s step) {
			failed(t, s, "RequestMalformedError", `push notification URL "https://evil.example.com/a2a" is not in push.allowed_urls`)
		})
	}
	return cases
}

// jsV03Cases are the SDK's 0.3 transports (legacyCompat) on binding b.
func jsV03Cases(b string) []jsCase {
	rest := b == "HTTP+JSON"
	var cases []jsCase
	add := func(step string, check func(t *testing.T, s step)) {
		cases = append(cases, jsCase{b, step, check})
	}
	add("v03Card", func(t *testing.T, s step) {
		// The SDK's 0.3 compatibility reads the 0.3 card at
		// /.well-known/agent.json and translates it to 1.0.
		var r struct{ Skills, Interfaces []string }
		result(t, s, &r)
		require.Equal(t, testutil.PublicSkills, r.Skills)
		require.Contains(t, r.Interfaces, "JSONRPC 0.3.0")
		require.Contains(t, r.Interfaces, "HTTP+JSON 0.3")
	})
	add("v03ExtendedCard", func(t *testing.T, s step) {
		// Over HTTP+JSON: GET /v1/card, the 0.3 proto's AgentCard in
		// ProtoJSON (security schemes as the proto's oneof), signed as served.
		var r taskResult
		result(t, s, &r)
		require.Contains(t, r.Skills, "reconcile-invoice")
	})
	add("v03Send", func(t *testing.T, s step) {
		// Over HTTP+JSON: the 0.3 specification's binding, ProtoJSON
		// (message.content, ROLE_USER) to /v1/message:send, answered with
		// SendMessageResponse ({"task": …}).
		var r taskResult
		result(t, s, &r)
		require.Equal(t, "0.3", r.Version)
		require.Equal(t, "task", r.Kind)
		require.Equal(t, "TASK_STATE_COMPLETED", r.State)
		require.Equal(t, 1, r.Artifacts)
	})
	add("v03Stream", func(t *testing.T, s step) {
		var r taskResult
		result(t, s, &r)
		require.Equal(t, []string{"task", "artifactUpdate", "statusUpdate"}, r.Events)
		require.Equal(t, "TASK_STATE_COMPLETED", r.Final)
	})
	add("v03Get", func(t *testing.T, s step) {
		var r taskResult
		result(t, s, &r)
		require.True(t, r.ID)
		require.Equal(t, "TASK_STATE_COMPLETED", r.State)
		require.Equal(t, 1, r.Artifacts)
	})
	add("v03GetUnknown", func(t *testing.T, s step) {
		if rest {
			// The SDK's 0.3 REST transport types only a {code, message}
			// body with a JSON-RPC code; capgate answers google.rpc.Status
			// (docs/interop.md): a plain Error with the status and body.
			failed(t, s, "Error", "Status: 404 Not Found")
			require.Contains(t, s.Error.Message, `"reason":"TASK_NOT_FOUND"`)
			return
		}
		failed(t, s, "TaskNotFoundError", "task not found")
	})
	add("v03Clarify", func(t *testing.T, s step) {
		var r taskResult
		result(t, s, &r)
		require.Equal(t, "TASK_STATE_INPUT_REQUIRED", r.State)
	})
	add("v03Subscribe", func(t *testing.T, s step) {
		var r taskResult
		result(t, s, &r)
		require.Equal(t, []string{"task"}, r.Events)
	})
	add("v03Cancel", func(t *testing.T, s step) {
		var r taskResult
		result(t, s, &r)
		require.Equal(t, "TASK_STATE_CANCELED", r.State)
	})
	add("v03Push", func(t *testing.T, s step) {
		var r pushResult
		result(t, s, &r)
		require.Equal(t, "cfg-1", r.Created.ID)
		require.True(t, r.Created.TaskID, "the config names the task (0.3 HTTP+JSON: in name)")
		require.Equal(t, "https://hooks.example.com/a2a", r.Got.URL)
		require.Equal(t, []string{"cfg-1"}, r.Listed)
		if rest {
			require.JSONEq(t, "0", string(r.AfterDelete))
			return
		}
		// The builtin handler (a2a-go's 0.3 JSON-RPC handler) answers an
		// empty list as null, which capgate relays on JSON-RPC and the
		// SDK's 0.3 JSON-RPC transport cannot read (docs/interop.md).
		require.Contains(t, string(r.AfterDelete), "Cannot read properties of null")
	})
	add("v03PushRefused", func(t *testing.T, s step) {
		msg := `push notification URL "https://evil.example.com/a2a" is not in push.allowed_urls`
		if rest {
			failed(t, s, "Error", "Status: 400 Bad Request")
			require.Contains(t, s.Error.Message, `"reason":"INVALID_PARAMS"`)
			require.Contains(t, s.Error.Message, "is not in push.allowed_urls")
			return
		}
		failed(t, s, "RequestMalformedError", msg)
	})
	return cases
}

// pushConfig turns push notifications on for webhooks under https://hooks.example.com/.
const pushConfig = "push: {enabled: true, allowed_urls: [\"https://hooks.example.com/\"]}\n"

// grpcTarget is the host:port of a test server's A2A listener, which serves gRPC too.
func grpcTarget(srv *testutil.Server) string { return strings.TrimPrefix(srv.URL, "http://") }

// TestJSClient runs @a2a-js/sdk over JSON-RPC, HTTP+JSON and gRPC (and its
// 0.3 transports over the first two) against capgate with signed cards and
// push notifications, step by step.
func TestJSClient(t *testing.T) {
	node := requireNode(t)
	srv := signingServer(t, 0, pushConfig)
	scopes := []string{"invoices.read", "recon.run"}
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: scopes})
	other := testutil.Token(t, testutil.TokenOptions{Subject: "partner-2", Scopes: scopes})
	got := map[string]map[string]step{}
	for _, b := range jsBindings {
		got[b] = runJS(t, node, plan{Base: srv.URL, JWKS: srv.AdminURL + "/.well-known/jwks.json", Token: tok, OtherToken: other,
			GRPC: grpcTarget(srv), Transport: b, Steps: jsSteps(b)})
	}
	cases := jsCases()
	for _, b := range jsBindings {
		n := 0
		for _, tc := range cases {
			if tc.binding == b {
				n++
			}
		}
		require.Len(t, jsSteps(b), n, "%s: one case per step", b)
	}
	for _, tc := range cases {
		t.Run(tc.binding+"/"+tc.step, func(t *testing.T) {
			s, ok := got[tc.binding][tc.step]
			require.True(t, ok, "the script reported no %s", tc.step)
			tc.check(t, s)
		})
	}
}

// streamFailingHandler is a handler that answers a streaming call with one
// event and then a JSON-RPC error, in the call's A2A version.
func streamFailingHandler(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		w.Header().Set("Content-Type", "text/event-stream")
		event := `{"task":{"id":"t-s","contextId":"c-s","status":{"state":"TASK_STATE_WORKING"}}}`
		if req.Method == "message/stream" {
			event = `{"kind":"task","id":"t-s","contextId":"c-s","status":{"state":"working"}}`
		}
		_, _ = fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", req.ID, event)
		_, _ = fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32603,\"message\":\"the ledger is down\"}}\n\n", req.ID)
	}))
	t.Cleanup(up.Close)
	return up
}

// TestJSClientStreamError: the handler fails after the first event of a
// stream. The SDK sees the event, then an error, on every binding.
func TestJSClientStreamError(t *testing.T) {
	node := requireNode(t)
	up := streamFailingHandler(t)
	d := testutil.LoadDeployment(t, "")
	d.Config.Handlers["recon.v3.reconcile"] = up.URL + "/"
	srv := testutil.Start(t, d)
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	for _, b := range jsBindings {
		steps := []string{"streamError"}
		if b != "GRPC" {
			steps = append(steps, "v03StreamError")
		}
		got := runJS(t, node, plan{Base: srv.URL, JWKS: srv.AdminURL + "/.well-known/jwks.json", Token: tok, GRPC: grpcTarget(srv),
			Transport: b, Steps: steps})
		for _, name := range steps {
			t.Run(b+"/"+name, func(t *testing.T) {
				var r taskResult
				result(t, got[name], &r)
				require.Equal(t, []string{"task"}, r.Events, "the event before the failure is relayed")
				require.Equal(t, "TASK_STATE_WORKING", r.Final)
				require.NotNil(t, r.Error, "the failure reaches the SDK as an error")
				checkStreamError(t, b, name, *r.Error)
			})
		}
	}
}

// checkStreamError is what the SDK reports for the handler's failure (an
// internal error, -32603): the message on every binding, typed by none.
func checkStreamError(t *testing.T, binding, name string, e stepError) {
	t.Helper()
	// capgate's message for the handler's -32603, never the handler's own text.
	const own = "the skill's handler failed (decision "
	require.Contains(t, e.Message, own)
	require.NotContains(t, e.Message, "the ledger is down")
	switch {
	case binding == "JSONRPC":
		// The last event is a JSON-RPC error response; the SDK's stream
		// reader (1.0 and 0.3) reports its code and data, untyped.
		require.Equal(t, "Error", e.Name)
		require.Contains(t, e.Message, "SSE event contained an error: "+own)
		require.Contains(t, e.Message, "(Code: -32603)")
	case binding == "GRPC":
		// The call's trailers: grpc-status 13 (INTERNAL).
		require.Equal(t, "A2AError", e.Name)
		require.True(t, strings.HasPrefix(e.Message, "gRPC error for sendStreamingMessage: 13 "+own), e.Message)
	case name == "streamError":
		// event: error with the google.rpc.Status body: the SDK's REST
		// reader types it from the ErrorInfo reason.
		require.Equal(t, "A2AError", e.Name)
		require.Equal(t, "INTERNAL_ERROR", e.Reason)
		require.True(t, strings.HasPrefix(e.Message, own), e.Message)
	default:
		// The same frame; the SDK's 0.3 REST reader types only a
		// {code, message} body and reports the event's text.
		require.Equal(t, "Error", e.Name)
		require.Contains(t, e.Message, `SSE error event: {"error":{"code":500,"status":"INTERNAL","message":"`+own)
	}
}

// TestJSClientAuthStatus401: with auth.jsonrpc_http_status 401, a JSON-RPC
// refusal is HTTP 401, so the SDK's auth retry fires on JSON-RPC too.
func TestJSClientAuthStatus401(t *testing.T) {
	node := requireNode(t)
	srv := signingServer(t, 401)
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"invoices.read", "recon.run"}})
	got := runJS(t, node, plan{Base: srv.URL, JWKS: srv.AdminURL + "/.well-known/jwks.json", Token: tok, Transport: "JSONRPC",
		Steps: []string{"extendedCardNoAuth", "authRetry", "send"}})

	t.Run("extendedCardNoAuth", func(t *testing.T) {
		// The SDK's JSON-RPC transport still reads the body: the same
		// error as with 200.
		failed(t, got["extendedCardNoAuth"], "JsonRpcTransportError", "authentication required")
	})
	t.Run("authRetry", func(t *testing.T) {
		var r taskResult
		result(t, got["authRetry"], &r)
		require.True(t, r.Retried, "the 401 makes the SDK retry with the token")
		require.Contains(t, r.Skills, "reconcile-invoice")
	})
	t.Run("send", func(t *testing.T) {
		var r taskResult
		result(t, got["send"], &r)
		require.Equal(t, "TASK_STATE_COMPLETED", r.State, "authenticated calls are unchanged")
	})
}
