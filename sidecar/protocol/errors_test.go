package protocol

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJSONRPCDataShapes: a caller that names no A2A version (a 0.3 client) reads data as the
// ErrorInfo object; one that names any version, 0.3 included, reads a list (how each shape is
// written, and that refusals carry it: jsonrpcwire.TestErrorDataShapes).
func TestJSONRPCDataShapes(t *testing.T) {
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
}

// headerMap is a Header over a plain map (canonical names).
type headerMap map[string][]string

func (h headerMap) Values(n string) []string { return h[n] }

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
	// The cause never reaches a client: jsonrpcwire.TestErrorHidesCause,
	// httpjsonwire.TestErrorHidesCause.
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
