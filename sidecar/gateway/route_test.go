package gateway

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/wire"
)

// The http.route of a request is a template, never the path with its ids:
// the parser's own route for HTTP+JSON, the endpoint for JSON-RPC, the
// method path for gRPC.
func TestRouteOf(t *testing.T) {
	parse := func(method, path, body, ctype string) *protocol.Request {
		t.Helper()
		h := http.Header{}
		h.Set("A2A-Version", "1.0")
		h.Set("Content-Type", ctype)
		req, perr := wire.Parse(protocol.Envelope{Method: method, Path: path, Body: []byte(body), Header: protocol.HTTPHeader(h)}, "", protocol.Limits{})
		require.Nil(t, perr)
		return req
	}
	const json = "application/json"
	require.Equal(t, "/", routeOf(parse("POST", "/", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"}}`, json), "", "/"))
	require.Equal(t, "/tasks/{id}:cancel", routeOf(parse("POST", "/tasks/t-123:cancel", `{}`, json), "", "/tasks/t-123:cancel"))
	require.Equal(t, "/{tenant}/tasks/{id}", routeOf(parse("GET", "/acme/tasks/t-9", "", json), "", "/acme/tasks/t-9"))
	require.Equal(t, "/a2a/tasks/{id}", routeOf(&protocol.Request{Binding: protocol.HTTPJSON, Method: "GET /tasks/{id}"}, "/a2a", ""))
	require.Equal(t, "/lf.a2a.v1.A2AService/GetTask", routeOf(&protocol.Request{Binding: protocol.GRPC}, "", "/lf.a2a.v1.A2AService/GetTask"))
}
