package jsonmodel

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
)

// AppendQuote appends s as a JSON string; invalid UTF-8 is replaced, never rejected.
func AppendQuote(b []byte, s string) []byte {
	out, err := jsontext.AppendQuote(b, s)
	if err != nil {
		out, _ = jsontext.AppendQuote(b, strings.ToValidUTF8(s, "\uFFFD"))
	}
	return out
}

// AppendErrorDetails appends the details of e both JSON bindings' error bodies carry: its
// google.rpc.ErrorInfo object (protocol.ErrorInfoType: reason, domain, metadata sorted by key),
// and, when e carries a retry delay (protocol.Error.RetryAfter) and retry is set, a comma and
// its google.rpc.RetryInfo object. A JSON-RPC error's data of A2A 0.3's shape holds the
// ErrorInfo alone (protocol.DataObject); every list of details holds both.
func AppendErrorDetails(b []byte, e *protocol.Error, retry bool) []byte {
	b = append(b, `{"@type":"`+protocol.ErrorInfoType+`","reason":`...)
	b = AppendQuote(b, e.Reason())
	b = append(b, `,"domain":"`+protocol.Domain+`"`...)
	if len(e.Metadata) > 0 {
		b = append(b, `,"metadata":{`...)
		for i, k := range slices.Sorted(maps.Keys(e.Metadata)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendQuote(b, k)
			b = append(b, ':')
			b = AppendQuote(b, e.Metadata[k])
		}
		b = append(b, '}')
	}
	b = append(b, '}')
	if !retry {
		return b
	}
	n, ok := e.RetryAfter()
	if !ok {
		return b
	}
	b = append(b, `,{"@type":"`+protocol.RetryInfoType+`","retryDelay":"`...)
	b = strconv.AppendInt(b, n, 10)
	return append(b, `s"}`...)
}
