package jsonrpcwire

import (
	"fmt"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonmodel"
)

// MarshalError returns a JSON-RPC 2.0 error response to e in A2A 1.0's shape
// (protocol.DataList). id is echoed when it is a valid JSON-RPC id (string, number or null);
// when nil, e.ID is used; anything else becomes null.
func MarshalError(e *protocol.Error, id jsontext.Value) []byte {
	return MarshalErrorIn(e, protocol.DataList, id)
}

// MarshalErrorIn is MarshalError with data in the given shape.
func MarshalErrorIn(e *protocol.Error, shape protocol.DataShape, id jsontext.Value) []byte {
	if id == nil {
		id = e.ID
	}
	b := appendHead(make([]byte, 0, 192+len(e.Message)), id)
	b = append(b, `"error":{"code":`...)
	b = strconv.AppendInt(b, int64(e.JSONRPCCode()), 10)
	b = append(b, `,"message":`...)
	b = jsonmodel.AppendQuote(b, e.Message)
	if shape == protocol.DataObject {
		b = append(b, `,"data":`...)
		b = jsonmodel.AppendErrorDetails(b, e, false)
		return append(b, "}}"...)
	}
	b = append(b, `,"data":[`...)
	b = jsonmodel.AppendErrorDetails(b, e, true)
	return append(b, "]}}"...)
}

// AppendResult appends the JSON-RPC 2.0 response carrying result for the request id (null
// when the request had none or it is not a valid id): with MarshalError, the one JSON-RPC
// response envelope, of unary answers and of each stream event alike. It allocates nothing
// when buf has room.
func AppendResult(buf []byte, id jsontext.Value, result []byte) []byte {
	buf = appendHead(buf, id)
	buf = append(buf, `"result":`...)
	buf = append(buf, result...)
	return append(buf, '}')
}

// MarshalRequest is the JSON-RPC 2.0 request {"jsonrpc":"2.0","id":id,"method":method,"params":params}
// (params left out when empty): the one request envelope, of handler calls and of a message
// capgate re-reads through its own parser.
func MarshalRequest(id, method string, params jsontext.Value) ([]byte, error) {
	b := make([]byte, 0, 64+len(id)+len(method)+len(params))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b, err := jsontext.AppendQuote(b, id)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"method":`...)
	if b, err = jsontext.AppendQuote(b, method); err != nil {
		return nil, fmt.Errorf("method name: %w", err)
	}
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}'), nil
}

// appendHead appends the head every JSON-RPC response shares, up to the result or error
// member: {"jsonrpc":"2.0","id":<id or null>,
func appendHead(b []byte, id jsontext.Value) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	if ValidID(id) {
		b = append(b, id...)
	} else {
		b = append(b, "null"...)
	}
	return append(b, ',')
}

// ValidID reports whether id is a JSON string, number or null.
func ValidID(id jsontext.Value) bool {
	if len(id) == 0 || !id.IsValid() {
		return false
	}
	switch id.Kind() {
	case '"', '0', 'n':
		return true
	default:
		return false
	}
}
