package jsonrpcwire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
)

// TestJSONRPCEnvelope: results and errors share one envelope: the same id rule (echoed when
// valid, else null), valid JSON-RPC 2.0 either way, and a result appended without allocating.
func TestJSONRPCEnvelope(t *testing.T) {
	ids := map[string]string{ // the id given → the id echoed
		`7`: `7`, `"a-1"`: `"a-1"`, `null`: `null`, ``: `null`,
		`{"x":1}`: `null`, `[1]`: `null`, `true`: `null`, `{`: `null`,
	}
	for in, want := range ids {
		var res, errResp struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   json.RawMessage `json:"error"`
		}
		r := AppendResult(nil, jsontext.Value(in), []byte(`{"task":{"id":"t"}}`))
		require.NoError(t, json.Unmarshal(r, &res), "%s", r)
		e := MarshalError(protocol.Errorf(protocol.TaskNotFound, "no such task"), jsontext.Value(in))
		require.NoError(t, json.Unmarshal(e, &errResp), "%s", e)
		for _, got := range []struct {
			JSONRPC string
			ID      json.RawMessage
		}{{res.JSONRPC, res.ID}, {errResp.JSONRPC, errResp.ID}} {
			require.Equal(t, "2.0", got.JSONRPC)
			require.JSONEq(t, want, string(got.ID), "id %q", in)
		}
		require.JSONEq(t, `{"task":{"id":"t"}}`, string(res.Result))
		require.Nil(t, res.Error)
		require.NotNil(t, errResp.Error)
	}
	buf := make([]byte, 0, 256)
	id, result := jsontext.Value(`"id-1"`), []byte(`{"message":{}}`)
	allocs := testing.AllocsPerRun(100, func() {
		buf = AppendResult(buf[:0], id, result)
	})
	require.Zero(t, allocs)
}

func TestMarshalJSONRPCShape(t *testing.T) {
	tests := []struct {
		name string
		err  *protocol.Error
		id   jsontext.Value
		want string
	}{
		{name: "numeric id", err: protocol.Errorf(protocol.TaskNotFound, "task not found"), id: jsontext.Value(`7`),
			want: `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"task not found","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}}`},
		{name: "nil id uses error id", err: protocol.Errorf(protocol.InvalidParams, "id is required").WithID(jsontext.Value(`"r1"`)),
			want: `{"jsonrpc":"2.0","id":"r1","error":{"code":-32602,"message":"id is required","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INVALID_PARAMS","domain":"a2a-protocol.org"}]}}`},
		{name: "no id is null", err: protocol.Errorf(protocol.ParseError, "request body is not valid JSON"),
			want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"request body is not valid JSON","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"PARSE_ERROR","domain":"a2a-protocol.org"}]}}`},
		{name: "object id is null", err: protocol.Errorf(protocol.InvalidRequest, "x"), id: jsontext.Value(`{"a":1}`),
			want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INVALID_REQUEST","domain":"a2a-protocol.org"}]}}`},
		{name: "garbage id is null", err: protocol.Errorf(protocol.InvalidRequest, "x"), id: jsontext.Value(`1}, "evil": {`),
			want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INVALID_REQUEST","domain":"a2a-protocol.org"}]}}`},
		{name: "metadata sorted and escaped", err: protocol.Errorf(protocol.ExtensionSupportRequired, "need \"ext\"").WithMetadata("z", "1").WithMetadata("extensions", "https://e/a,https://e/b"),
			id:   jsontext.Value(`"a"`),
			want: `{"jsonrpc":"2.0","id":"a","error":{"code":-32008,"message":"need \"ext\"","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"EXTENSION_SUPPORT_REQUIRED","domain":"a2a-protocol.org","metadata":{"extensions":"https://e/a,https://e/b","z":"1"}}]}}`},
		{name: "invalid utf-8 message replaced", err: protocol.Errorf(protocol.Internal, "bad \xff"), id: jsontext.Value(`1`),
			want: `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"bad ` + "\ufffd" + `","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INTERNAL_ERROR","domain":"a2a-protocol.org"}]}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MarshalError(tc.err, tc.id)
			require.Equal(t, tc.want, string(got))
			require.True(t, jsontext.Value(got).IsValid())
		})
	}
}

// TestErrorDataShapes: the data of a JSON-RPC error is written in the caller's shape (the
// ErrorInfo object, or a list holding it: protocol.TestJSONRPCDataShapes says who reads which),
// and a streaming method's refusal carries it.
func TestErrorDataShapes(t *testing.T) {
	e := protocol.Errorf(protocol.TaskNotFound, "task not found").WithMetadata("k", "v")
	require.Equal(t, `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"task not found","data":{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"k":"v"}}}}`,
		string(MarshalErrorIn(e, protocol.DataObject, jsontext.Value(`7`))))
	require.Equal(t, string(MarshalError(e, jsontext.Value(`7`))), string(MarshalErrorIn(e, protocol.DataList, jsontext.Value(`7`))))

	r := Refusal(protocol.V1, protocol.DataObject, true, jsontext.Value(`1`), e, false)
	require.Equal(t, 404, r.Status, "a streaming method's refusal: a plain JSON-RPC error with the error's status")
	require.True(t, strings.HasPrefix(string(r.Body), `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"task not found","data":{"@type"`), "%s", r.Body)
	r = Refusal(protocol.V03, protocol.DataObject, true, jsontext.Value(`1`), e, false)
	require.Equal(t, 200, r.Status, "0.3: one Server-Sent Event")
	require.True(t, strings.HasPrefix(string(r.Body), `data: {"jsonrpc":"2.0","id":1,"error":{"code":-32001`), "%s", r.Body)
}

// TestErrorHidesCause: the wrapped cause of an error never reaches a client.
func TestErrorHidesCause(t *testing.T) {
	e := protocol.Wrap(protocol.ParseError, errors.New("jsontext: offset 17"), "request body is not valid JSON")
	require.NotContains(t, string(MarshalError(e, nil)), "offset")
}
