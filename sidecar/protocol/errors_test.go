package protocol

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
)

func TestMarshalJSONRPCShape(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		id   jsontext.Value
		want string
	}{
		{name: "numeric id", err: Errorf(TaskNotFound, "task not found"), id: jsontext.Value(`7`),
			want: `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"task not found","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}}`},
		{name: "nil id uses error id", err: Errorf(InvalidParams, "id is required").WithID(jsontext.Value(`"r1"`)),
			want: `{"jsonrpc":"2.0","id":"r1","error":{"code":-32602,"message":"id is required","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INVALID_PARAMS","domain":"a2a-protocol.org"}]}}`},
		{name: "no id is null", err: Errorf(ParseError, "request body is not valid JSON"),
			want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"request body is not valid JSON","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"PARSE_ERROR","domain":"a2a-protocol.org"}]}}`},
		{name: "object id is null", err: Errorf(InvalidRequest, "x"), id: jsontext.Value(`{"a":1}`),
			want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INVALID_REQUEST","domain":"a2a-protocol.org"}]}}`},
		{name: "garbage id is null", err: Errorf(InvalidRequest, "x"), id: jsontext.Value(`1}, "evil": {`),
			want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INVALID_REQUEST","domain":"a2a-protocol.org"}]}}`},
		{name: "metadata sorted and escaped", err: Errorf(ExtensionSupportRequired, "need \"ext\"").WithMetadata("z", "1").WithMetadata("extensions", "https://e/a,https://e/b"),
			id:   jsontext.Value(`"a"`),
			want: `{"jsonrpc":"2.0","id":"a","error":{"code":-32008,"message":"need \"ext\"","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"EXTENSION_SUPPORT_REQUIRED","domain":"a2a-protocol.org","metadata":{"extensions":"https://e/a,https://e/b","z":"1"}}]}}`},
		{name: "invalid utf-8 message replaced", err: Errorf(Internal, "bad \xff"), id: jsontext.Value(`1`),
			want: `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"bad ` + "\ufffd" + `","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INTERNAL_ERROR","domain":"a2a-protocol.org"}]}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.err.MarshalJSONRPC(tc.id)
			require.Equal(t, tc.want, string(got))
			require.True(t, jsontext.Value(got).IsValid())
		})
	}
}

// TestJSONRPCDataShapes: a caller that names no A2A version (a 0.3 client) reads data as the
// ErrorInfo object; one that names any version, 0.3 included, reads a list; a parse refusal,
// a streaming refusal and an answer carry the caller's shape.
func TestJSONRPCDataShapes(t *testing.T) {
	e := Errorf(TaskNotFound, "task not found").WithMetadata("k", "v")
	require.Equal(t, `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"task not found","data":{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"k":"v"}}}}`,
		string(e.MarshalJSONRPCIn(DataObject, jsontext.Value(`7`))))
	require.Equal(t, string(e.MarshalJSONRPC(jsontext.Value(`7`))), string(e.MarshalJSONRPCIn(DataList, jsontext.Value(`7`))))

	type hdr map[string][]string
	for _, tc := range []struct {
		name   string
		h      hdr
		query  string
		want   DataShape
		parsed bool
	}{
		{"no version", hdr{}, "", DataObject, true},
		{"A2A-Version 0.3", hdr{VersionHeader: {"0.3"}}, "", DataList, true},
		{"A2A-Version 1.0", hdr{VersionHeader: {"1.0"}}, "", DataList, true},
		{"version parameter", hdr{}, "A2A-Version=1.0", DataList, true},
		{"unreadable version", hdr{VersionHeader: {"9"}}, "", DataList, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := headerMap(tc.h)
			require.Equal(t, tc.want, ErrorDataShape(h, tc.query)) // wire.TestParseErrorData: Parse sets it
		})
	}
	r := Refuse(JSONRPC, V1, DataObject, true, jsontext.Value(`1`), e, false)
	require.Equal(t, 404, r.Status, "a streaming method's refusal: a plain JSON-RPC error with the error's status")
	require.True(t, strings.HasPrefix(string(r.Body), `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"task not found","data":{"@type"`), "%s", r.Body)
	r = Refuse(JSONRPC, V03, DataObject, true, jsontext.Value(`1`), e, false)
	require.Equal(t, 200, r.Status, "0.3: one Server-Sent Event")
	require.True(t, strings.HasPrefix(string(r.Body), `data: {"jsonrpc":"2.0","id":1,"error":{"code":-32001`), "%s", r.Body)
}

// headerMap is a Header over a plain map (canonical names).
type headerMap map[string][]string

func (h headerMap) Values(n string) []string { return h[n] }

func TestMarshalStatusShape(t *testing.T) {
	e := Errorf(NotFound, `no A2A route matches "/x"`).WithMetadata("path", "/x")
	require.Equal(t, `{"error":{"code":404,"status":"NOT_FOUND","message":"no A2A route matches \"/x\"","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"METHOD_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"path":"/x"}}]}}`,
		string(e.MarshalStatus()))
}

func TestWWWAuthenticate(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{name: "missing credentials", err: MissingCredentials(), want: "Bearer"},
		{name: "invalid token", err: Errorf(Unauthenticated, "token expired"), want: `Bearer error="invalid_token", error_description="token expired"`},
		{name: "description sanitised", err: Errorf(Unauthenticated, "bad \"sig\"\\\n\u00e9"), want: `Bearer error="invalid_token", error_description="bad  sig    "`},
		{name: "insufficient scope", err: Errorf(Unauthorized, "scope recon.run required"), want: `Bearer error="insufficient_scope", error_description="scope recon.run required"`},
		{name: "other code", err: Errorf(TaskNotFound, "x"), want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.err.WWWAuthenticate())
		})
	}
	require.Equal(t, 401, MissingCredentials().HTTPStatus())
	require.Equal(t, -31401, MissingCredentials().JSONRPCCode())
}

func TestErrorIsUnwrap(t *testing.T) {
	cause := errors.New("jsontext: offset 17")
	e := Wrap(ParseError, cause, "request body is not valid JSON")
	wrapped := fmt.Errorf("gateway: %w", e)

	require.ErrorIs(t, wrapped, cause)
	require.ErrorIs(t, wrapped, &Error{Code: ParseError})
	require.NotErrorIs(t, wrapped, &Error{Code: InvalidRequest})
	require.True(t, IsCode(wrapped, ParseError))
	require.False(t, IsCode(wrapped, InvalidRequest))
	require.False(t, IsCode(cause, ParseError))
	require.False(t, IsCode(nil, ParseError))
	require.Equal(t, "PARSE_ERROR: request body is not valid JSON: jsontext: offset 17", e.Error())
	// The cause never reaches a client.
	require.NotContains(t, string(e.MarshalJSONRPC(nil)), "offset")
	require.NotContains(t, string(e.MarshalStatus()), "offset")
}

func TestErrorfFormats(t *testing.T) {
	require.Equal(t, "a 1", Errorf(Internal, "a %d", 1).Message)
	require.Equal(t, "plain", Errorf(Internal, "plain").Message)
}

func TestUnknownCodeIsInternal(t *testing.T) {
	e := &Error{Code: "NOPE", Message: "x"}
	require.False(t, Code("NOPE").Valid())
	require.Equal(t, -32603, e.JSONRPCCode())
	require.Equal(t, 500, e.HTTPStatus())
	require.Equal(t, "INTERNAL_ERROR", e.Reason())
}

// TestAsError: the one way from an error back to an *Error keeps a protocol error as it is
// (wrapped or not), turns nil — and a nil *Error in an error — into nil, and wraps anything
// else without showing it to the client.
func TestAsError(t *testing.T) {
	require.Nil(t, AsError(nil, Internal, "x"))
	var typedNil *Error
	require.Nil(t, AsError(error(typedNil), Internal, "x"))

	pe := Errorf(TaskNotFound, "task not found")
	require.Same(t, pe, AsError(pe, Internal, "x"))
	require.Same(t, pe, AsError(fmt.Errorf("relay: %w", pe), Internal, "x"))

	cause := errors.New("broken pipe")
	got := AsError(cause, InvalidRequest, "could not be decoded")
	require.Equal(t, InvalidRequest, got.Code)
	require.Equal(t, "could not be decoded", got.Message)
	require.ErrorIs(t, got, cause)
}
