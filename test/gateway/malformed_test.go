package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// rpcErr is the exact JSON-RPC error response the gateway writes to a 1.0 caller: data is a
// list holding the ErrorInfo.
func rpcErr(id string, code int, reason, msg string, meta ...string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s,"data":[%s]}}`, id, code, quote(msg), errorInfo(reason, meta))
}

// rpcErr03 is the exact JSON-RPC error response the gateway writes to a 0.3 caller (no
// A2A-Version): data is the ErrorInfo object itself, as 0.3 clients decode it.
func rpcErr03(id string, code int, reason, msg string, meta ...string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s,"data":%s}}`, id, code, quote(msg), errorInfo(reason, meta))
}

// statusErr is the exact google.rpc.Status body of an HTTP+JSON error.
func statusErr(httpCode int, status, reason, msg string, meta ...string) string {
	return fmt.Sprintf(`{"error":{"code":%d,"status":%q,"message":%s,"details":[%s]}}`, httpCode, status, quote(msg), errorInfo(reason, meta))
}

func errorInfo(reason string, meta []string) string {
	s := fmt.Sprintf(`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":%q,"domain":"a2a-protocol.org"`, reason)
	if len(meta) > 0 {
		m := map[string]string{}
		for i := 0; i+1 < len(meta); i += 2 {
			m[meta[i]] = meta[i+1]
		}
		b, _ := json.Marshal(m)
		s += `,"metadata":` + string(b)
	}
	return s + "}"
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// leakMarkers are fragments of Go and JSON-library error text that must
// never reach a client.
var leakMarkers = []string{"jsontext", "invalid character", "json:", "syntactic", "EOF", "offset", "goroutine", "panic", "runtime error", "*protocol.", "%!"}

func requireNoParserText(t testing.TB, body []byte) {
	t.Helper()
	for _, m := range leakMarkers {
		require.NotContains(t, string(body), m, "parser or Go error text reached the client")
	}
}

// unsized hides a body's length so that the client sends it chunked,
// without Content-Length.
type unsized struct{ r io.Reader }

func (u unsized) Read(p []byte) (int, error) { return u.r.Read(p) }

const (
	v1      = "1.0"
	jsonCT  = "application/json"
	getCard = `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`
)

// TestMalformedRequests sends malformed requests to the running gateway and
// pins the exact error each one gets.
func TestMalformedRequests(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))

	big := `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{"pad":"` + strings.Repeat("a", 1<<20) + `"}}`
	deep := `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`
	// Free-form metadata (a Struct) holds the depth: a member the request message does not
	// define is refused before the nesting matters.
	atLimit := `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"t","metadata":{"x":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}}}`
	tooLarge := "request body exceeds the limit of 1048576 bytes"
	unauth := rpcErr("1", -31401, "UNAUTHENTICATED", "authentication required")

	cases := []struct {
		name    string
		method  string // default POST
		path    string // default "/"
		headers []string
		body    string
		chunked bool // send the body without Content-Length
		status  int
		want    string // exact JSON body
		allow   string // the Allow header of a 405
	}{
		// JSON-RPC envelope.
		{name: "truncated JSON", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,`,
			status: 200, want: rpcErr("null", -32700, "PARSE_ERROR", "request body is not valid JSON: unexpected end of input")},
		{name: "not JSON", headers: []string{"A2A-Version", v1}, body: `{jsonrpc: 2.0}`,
			status: 200, want: rpcErr("null", -32700, "PARSE_ERROR", "request body is not valid JSON")},
		{name: "empty body", headers: []string{"A2A-Version", v1}, body: ``,
			status: 200, want: rpcErr("null", -32700, "PARSE_ERROR", "request body is empty")},
		{name: "data after the value", headers: []string{"A2A-Version", v1}, body: getCard + getCard,
			status: 200, want: rpcErr("null", -32700, "PARSE_ERROR", "request body has data after the JSON value")},
		{name: "not an object", headers: []string{"A2A-Version", v1}, body: `"GetExtendedAgentCard"`,
			status: 200, want: rpcErr("null", -32600, "INVALID_REQUEST", "request must be a JSON object")},
		{name: "batch array", headers: []string{"A2A-Version", v1}, body: "[" + getCard + "]",
			status: 200, want: rpcErr("null", -32600, "INVALID_REQUEST", "batch requests are not supported")},
		{name: "wrong jsonrpc version", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"1.0","id":"a","method":"GetExtendedAgentCard"}`,
			status: 200, want: rpcErr(`"a"`, -32600, "INVALID_REQUEST", `jsonrpc must be "2.0"`)},
		{name: "jsonrpc as a number", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":2.0,"id":"a","method":"GetExtendedAgentCard"}`,
			status: 200, want: rpcErr(`"a"`, -32600, "INVALID_REQUEST", `jsonrpc must be "2.0"`)},
		{name: "missing jsonrpc", headers: []string{"A2A-Version", v1}, body: `{"id":5,"method":"GetExtendedAgentCard"}`,
			status: 200, want: rpcErr("5", -32600, "INVALID_REQUEST", `jsonrpc must be "2.0"`)},
		{name: "missing id", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","method":"GetExtendedAgentCard"}`,
			status: 200, want: rpcErr("null", -32600, "INVALID_REQUEST", "id is required; A2A methods are not notifications")},
		{name: "id is an object", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":{"a":1},"method":"GetExtendedAgentCard"}`,
			status: 200, want: rpcErr("null", -32600, "INVALID_REQUEST", "id must be a string, number or null")},
		{name: "null id is echoed", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":null,"method":"Nope"}`,
			status: 200, want: rpcErr("null", -32601, "METHOD_NOT_FOUND", `method "Nope" not found`)},
		{name: "missing method", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1}`,
			status: 200, want: rpcErr("1", -32600, "INVALID_REQUEST", "method is required")},
		{name: "method not a string", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,"method":7}`,
			status: 200, want: rpcErr("1", -32600, "INVALID_REQUEST", "method must be a string")},
		{name: "method twice", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","method":"SendMessage"}`,
			status: 200, want: rpcErr("null", -32700, "PARSE_ERROR", `duplicate object key "method"`)},
		{name: "params twice", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{},"params":{"tenant":"x"}}`,
			status: 200, want: rpcErr("null", -32700, "PARSE_ERROR", `duplicate object key "params"`)},
		{name: "method under two spellings", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","Method":"SendMessage"}`,
			status: 200, want: rpcErr("null", -32700, "PARSE_ERROR", `duplicate object key "Method" (same field as "method")`)},
		{name: "duplicate key deep in params", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{"a":{"b":1,"b":2}}}`,
			status: 200, want: rpcErr("null", -32700, "PARSE_ERROR", `duplicate object key "b"`)},
		{name: "params not an object", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":[]}`,
			status: 200, want: rpcErr("1", -32602, "INVALID_PARAMS", "params must be an object")},
		{name: "unknown 1.0 method", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,"method":"GetAgentCard"}`,
			status: 200, want: rpcErr("1", -32601, "METHOD_NOT_FOUND", `method "GetAgentCard" not found`)},
		{name: "1.0 method in another case", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,"method":"getExtendedAgentCard"}`,
			status: 200, want: rpcErr("1", -32601, "METHOD_NOT_FOUND", `method "getExtendedAgentCard" not found`)},
		{name: "0.3 name sent as 1.0", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"}`,
			status: 200, want: rpcErr("1", -32601, "METHOD_NOT_FOUND", `method "agent/getAuthenticatedExtendedCard" is not an A2A 1.0 method; send A2A-Version: 0.3 or use GetExtendedAgentCard`)},
		{name: "unknown 0.3 method", body: `{"jsonrpc":"2.0","id":1,"method":"agent/getCard"}`,
			status: 200, want: rpcErr03("1", -32601, "METHOD_NOT_FOUND", `method "agent/getCard" not found`)},
		{name: "1.0-only method sent as 0.3", body: `{"jsonrpc":"2.0","id":1,"method":"ListTasks"}`,
			status: 200, want: rpcErr03("1", -32601, "METHOD_NOT_FOUND", `method "ListTasks" is not an A2A 0.3 method; send A2A-Version: 1.0`)},
		{name: "long unknown method is clipped", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,"method":"` + strings.Repeat("x", 100) + `"}`,
			status: 200, want: rpcErr("1", -32601, "METHOD_NOT_FOUND", `method "`+strings.Repeat("x", 64)+`…" not found`)},
		{name: "deep nesting", headers: []string{"A2A-Version", v1}, body: deep,
			status: 200, want: rpcErr("null", -32600, "INVALID_REQUEST", "request body nests deeper than the limit of 64 levels")},
		{name: "nesting at the limit passes the parser", headers: []string{"A2A-Version", v1}, body: atLimit,
			status: 200, want: unauth},
		{name: "invalid UTF-8", headers: []string{"A2A-Version", v1}, body: `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{"x":"` + "\xff\xfe" + `"}}`,
			status: 200, want: rpcErr("null", -32700, "PARSE_ERROR", "request body is not valid UTF-8")},

		// Content types.
		{name: "text/plain", headers: []string{"A2A-Version", v1, "Content-Type", "text/plain"}, body: getCard,
			status: 200, want: rpcErr("null", -32005, "CONTENT_TYPE_NOT_SUPPORTED", "Content-Type is not supported; use application/json")},
		{name: "no Content-Type", headers: []string{"A2A-Version", v1, "Content-Type", ""}, body: getCard,
			status: 200, want: rpcErr("null", -32005, "CONTENT_TYPE_NOT_SUPPORTED", "Content-Type is not supported; use application/json")},
		{name: "form content type", headers: []string{"A2A-Version", v1, "Content-Type", "application/x-www-form-urlencoded"}, body: getCard,
			status: 200, want: rpcErr("null", -32005, "CONTENT_TYPE_NOT_SUPPORTED", "Content-Type is not supported; use application/json")},
		{name: "malformed content type", headers: []string{"A2A-Version", v1, "Content-Type", "application/json; ;"}, body: getCard,
			status: 200, want: rpcErr("null", -32005, "CONTENT_TYPE_NOT_SUPPORTED", "Content-Type is not supported; use application/json")},
		{name: "latin1 charset", headers: []string{"A2A-Version", v1, "Content-Type", "application/json; charset=iso-8859-1"}, body: getCard,
			status: 200, want: rpcErr("null", -32005, "CONTENT_TYPE_NOT_SUPPORTED", "Content-Type charset is not supported; use utf-8")},
		{name: "application/a2a+json is accepted", headers: []string{"A2A-Version", v1, "Content-Type", "application/a2a+json"}, body: getCard,
			status: 200, want: unauth},
		{name: "utf-8 charset is accepted", headers: []string{"A2A-Version", v1, "Content-Type", "application/json; charset=UTF-8"}, body: getCard,
			status: 200, want: unauth},

		// Size.
		{name: "oversize with Content-Length", headers: []string{"A2A-Version", v1}, body: big,
			status: 200, want: rpcErr("null", -32600, "INVALID_REQUEST", tooLarge)},
		{name: "oversize chunked", headers: []string{"A2A-Version", v1}, body: big, chunked: true,
			status: 200, want: rpcErr("null", -32600, "INVALID_REQUEST", tooLarge)},
		{name: "REST oversize with Content-Length", method: "POST", path: "/message:send", headers: []string{"A2A-Version", v1}, body: big,
			status: 413, want: statusErr(413, "INVALID_ARGUMENT", "INVALID_REQUEST", tooLarge)},
		{name: "REST oversize chunked", method: "POST", path: "/message:send", headers: []string{"A2A-Version", v1}, body: big, chunked: true,
			status: 413, want: statusErr(413, "INVALID_ARGUMENT", "INVALID_REQUEST", tooLarge)},

		// Versions.
		{name: "A2A-Version 2.0 (JSON-RPC)", headers: []string{"A2A-Version", "2.0"}, body: `{"jsonrpc":"2.0","id":"v2","method":"GetExtendedAgentCard"}`,
			status: 200, want: rpcErr(`"v2"`, -32009, "VERSION_NOT_SUPPORTED", `A2A version "2.0" is not supported; supported versions: 1.0, 0.3`, "supportedVersions", "1.0,0.3")},
		{name: "A2A-Version 2.0 (HTTP+JSON)", method: "GET", path: "/extendedAgentCard", headers: []string{"A2A-Version", "2.0"},
			status: 400, want: statusErr(400, "UNIMPLEMENTED", "VERSION_NOT_SUPPORTED", `A2A version "2.0" is not supported; supported versions: 1.0, 0.3`, "supportedVersions", "1.0,0.3")},

		// Routes.
		{name: "GET on the JSON-RPC endpoint", method: "GET", path: "/",
			status: 405, allow: "POST", want: statusErr(405, "UNIMPLEMENTED", "METHOD_NOT_FOUND", "the JSON-RPC endpoint accepts POST only", "allow", "POST")},
		{name: "unknown route", method: "GET", path: "/agent/info", headers: []string{"A2A-Version", v1},
			status: 404, want: statusErr(404, "NOT_FOUND", "METHOD_NOT_FOUND", `no A2A route matches "/agent/info"`)},
		{name: "0.3 route under 1.0", method: "GET", path: "/v1/card", headers: []string{"A2A-Version", v1},
			status: 404, want: statusErr(404, "NOT_FOUND", "METHOD_NOT_FOUND", `no A2A route matches "/v1/card"`)},
		{name: "dot-dot before the route", method: "GET", path: "/../extendedAgentCard", headers: []string{"A2A-Version", v1},
			status: 404, want: statusErr(404, "NOT_FOUND", "METHOD_NOT_FOUND", `no A2A route matches "/../extendedAgentCard"`)},
		{name: "encoded dot-dot tenant", method: "GET", path: "/%2e%2e/extendedAgentCard", headers: []string{"A2A-Version", v1},
			status: 404, want: statusErr(404, "NOT_FOUND", "METHOD_NOT_FOUND", `no A2A route matches "/%2e%2e/extendedAgentCard"`)},
		{name: "encoded slash in tenant", method: "GET", path: "/a%2Fb/extendedAgentCard", headers: []string{"A2A-Version", v1},
			status: 404, want: statusErr(404, "NOT_FOUND", "METHOD_NOT_FOUND", `no A2A route matches "/a%2Fb/extendedAgentCard"`)},
		{name: "tenant then dot-dot", method: "GET", path: "/acme/../extendedAgentCard", headers: []string{"A2A-Version", v1},
			status: 404, want: statusErr(404, "NOT_FOUND", "METHOD_NOT_FOUND", `no A2A route matches "/acme/../extendedAgentCard"`)},
		{name: "empty segment", method: "GET", path: "//extendedAgentCard", headers: []string{"A2A-Version", v1},
			status: 404, want: statusErr(404, "NOT_FOUND", "METHOD_NOT_FOUND", `no A2A route matches "//extendedAgentCard"`)},
		{name: "trailing slash", method: "GET", path: "/extendedAgentCard/", headers: []string{"A2A-Version", v1},
			status: 404, want: statusErr(404, "NOT_FOUND", "METHOD_NOT_FOUND", `no A2A route matches "/extendedAgentCard/"`)},
		{name: "task id with an encoded slash", method: "GET", path: "/tasks/a%2Fb", headers: []string{"A2A-Version", v1},
			status: 404, want: statusErr(404, "NOT_FOUND", "METHOD_NOT_FOUND", `no A2A route matches "/tasks/a%2Fb"`)},
		{name: "wrong method on a route", method: "POST", path: "/extendedAgentCard", headers: []string{"A2A-Version", v1}, body: `{}`,
			status: 405, allow: "GET", want: statusErr(405, "UNIMPLEMENTED", "METHOD_NOT_FOUND", `method "POST" is not allowed for /extendedAgentCard; use GET`, "allow", "GET")},
		{name: "wrong method on a two-method route", method: "PUT", path: "/tasks/t1:subscribe", headers: []string{"A2A-Version", v1},
			status: 405, allow: "GET, POST", want: statusErr(405, "UNIMPLEMENTED", "METHOD_NOT_FOUND", `method "PUT" is not allowed for /tasks/{id}:subscribe; use GET or POST`, "allow", "GET, POST")},
		{name: "GET with a body", method: "GET", path: "/extendedAgentCard", headers: []string{"A2A-Version", v1}, body: `{"tenant":"x"}`,
			status: 400, want: statusErr(400, "INVALID_ARGUMENT", "INVALID_REQUEST", "GET requests must not have a body")},
		{name: "repeated query parameter", method: "GET", path: "/tasks?pageSize=1&pageSize=2", headers: []string{"A2A-Version", v1},
			status: 400, want: statusErr(400, "INVALID_ARGUMENT", "INVALID_REQUEST", `query parameter "pageSize" is repeated`)},
		{name: "query names the tenant", method: "GET", path: "/tasks?tenant=other", headers: []string{"A2A-Version", v1},
			status: 400, want: statusErr(400, "INVALID_ARGUMENT", "INVALID_REQUEST", `query parameter "tenant" is not allowed; the path names it`)},
		{name: "REST body not JSON", method: "POST", path: "/message:send", headers: []string{"A2A-Version", v1, "Content-Type", jsonCT}, body: `{"message":`,
			status: 400, want: statusErr(400, "INVALID_ARGUMENT", "PARSE_ERROR", "request body is not valid JSON: unexpected end of input")},
		{name: "REST wrong content type", method: "POST", path: "/message:send", headers: []string{"A2A-Version", v1, "Content-Type", "text/plain"}, body: `{}`,
			status: 415, want: statusErr(415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED", "Content-Type is not supported; use application/json")},
		{name: "REST duplicate keys", method: "POST", path: "/message:send", headers: []string{"A2A-Version", v1, "Content-Type", jsonCT}, body: `{"message":{},"message":{}}`,
			status: 400, want: statusErr(400, "INVALID_ARGUMENT", "PARSE_ERROR", `duplicate object key "message"`)},
		{name: "REST body is an array", method: "POST", path: "/message:send", headers: []string{"A2A-Version", v1, "Content-Type", jsonCT}, body: `[]`,
			status: 400, want: statusErr(400, "INVALID_ARGUMENT", "INVALID_REQUEST", "request body must be a JSON object")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method, path := tc.method, tc.path
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = "/"
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
				if tc.chunked {
					body = unsized{body}
				}
			}
			req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, body)
			require.NoError(t, err)
			if tc.chunked {
				req.ContentLength = -1
			}
			hdr := map[string]string{"Content-Type": jsonCT}
			for i := 0; i+1 < len(tc.headers); i += 2 {
				hdr[tc.headers[i]] = tc.headers[i+1]
			}
			for _, k := range slices.Sorted(maps.Keys(hdr)) {
				if hdr[k] != "" {
					req.Header.Set(k, hdr[k])
				}
			}
			r := srv.RoundTrip(t, req)
			require.Equal(t, tc.status, r.Status, "%s", r.Body)
			require.JSONEq(t, tc.want, string(r.Body))
			require.Equal(t, "application/json", r.Header.Get("Content-Type"))
			require.Equal(t, tc.allow, r.Header.Get("Allow"))
			requireNoParserText(t, r.Body)
		})
	}
}
