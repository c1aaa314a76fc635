package handler_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

// leaky is a handler error of the kind issue 21 found reaching callers: an internal address, a
// Go type name, a shard in the metadata and a credential in the text.
func leaky() *protocol.Error {
	return protocol.Errorf(protocol.InvalidParams, "dial tcp 10.3.4.5:6379: json: cannot unmarshal number into Go struct field "+
		"CancelTaskRequest.metadata of type map[string]interface {} (shard eu-west-7, Bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln)").
		WithMetadata("shard", "eu-west-7")
}

// leakyServer answers every call with leaky() in the binding's own error shape: a JSON-RPC
// error (its data an ErrorInfo carrying the metadata), a google.rpc.Status body, or a gRPC status
// with its details. A streamed call gets the error as its first event (JSON-RPC, as an SSE
// event), or as the plain answer before any (HTTP+JSON, gRPC trailers-only).
func leakyServer(t *testing.T, b protocol.Binding) string {
	t.Helper()
	h := func(w http.ResponseWriter, r *http.Request) {
		e := leaky()
		switch b {
		case protocol.JSONRPC:
			body := jsonrpcwire.MarshalError(e, []byte(rpcID(t, r)))
			if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("data: " + string(body) + "\n\n"))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
		case protocol.HTTPJSON:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(e.HTTPStatus())
			_, _ = w.Write(httpjsonwire.MarshalStatus(e))
		case protocol.GRPC:
			w.Header().Set("Content-Type", "application/grpc")
			for _, kv := range grpcwire.Status(e) {
				w.Header().Set(kv[0], kv[1])
			}
			w.WriteHeader(http.StatusOK)
		}
	}
	if b == protocol.GRPC {
		return h2cServer(t, h)
	}
	srv := httptest.NewServer(http.HandlerFunc(h))
	t.Cleanup(srv.Close)
	if b == protocol.HTTPJSON {
		return srv.URL + "/v1/"
	}
	return srv.URL
}

// TestHandlerErrorsAreFiltered: a handler's error reaches the caller as its A2A code with
// capgate's own message and the decision id, unary and streamed, over every handler binding;
// the handler's text and data are logged for operators with the credential masked. A handler
// declared expose_errors passes them on.
func TestHandlerErrorsAreFiltered(t *testing.T) {
	for _, b := range bindings {
		for _, stream := range []bool{false, true} {
			name := string(b) + "/unary"
			if stream {
				name = string(b) + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				url := leakyServer(t, b)
				core, logs := observer.New(zap.InfoLevel)
				inv, err := handler.NewInvoker(map[string]string{"up": url, "frank": url}, handler.WithLogger(zap.New(core)),
					handler.WithBindings(map[string]protocol.Binding{"up": b, "frank": b}),
					handler.WithExposedErrors(map[string]bool{"frank": true}))
				require.NoError(t, err)
				t.Cleanup(func() { _ = inv.Close() })
				do := func(name string) *protocol.Error {
					r := req("GetTask", `{"id":"t1"}`)
					if stream {
						r = req("SubscribeToTask", `{"id":"t1"}`)
					}
					r.Handler = name
					if !stream {
						_, perr := inv.Call(t.Context(), r)
						return perr
					}
					events, perr := collect(t, inv, r)
					require.Empty(t, events)
					return perr
				}

				perr := do("up")
				require.NotNil(t, perr)
				require.Equal(t, protocol.InvalidParams, perr.Code)
				require.Equal(t, "the skill's handler refused the request's parameters (decision dec-9)", perr.Message)
				require.Equal(t, map[string]string{"decision_id": "dec-9"}, perr.Metadata)
				for _, wire := range [][]byte{jsonrpcwire.MarshalError(perr, nil), httpjsonwire.MarshalStatus(perr)} {
					for _, leak := range []string{"10.3.4.5", "Go struct", "map[string]interface", "eu-west-7", "eyJ"} {
						require.NotContains(t, string(wire), leak)
					}
				}

				entries := logs.FilterMessage("handler returned an error").All()
				require.Len(t, entries, 1)
				fields := entries[0].ContextMap()
				require.Equal(t, "dec-9", fields["decision_id"])
				require.Equal(t, "up", fields["handler"])
				logged := fields["handler_message"].(string) + " " + fields["handler_data"].(string)
				require.Contains(t, logged, "10.3.4.5:6379")
				if b != protocol.GRPC { // a gRPC status's details are binary: its metadata is not logged as text
					require.Contains(t, fields["handler_data"], "eu-west-7")
				}
				require.Contains(t, logged, "Bearer [masked]")
				require.NotContains(t, logged, "eyJ", "a credential in the handler's text is never logged")

				perr = do("frank")
				require.NotNil(t, perr)
				require.Equal(t, protocol.InvalidParams, perr.Code)
				require.Contains(t, perr.Message, "10.3.4.5:6379", "expose_errors passes the handler's text on")
				require.Equal(t, "eu-west-7", perr.Metadata["shard"])
			})
		}
	}
}
