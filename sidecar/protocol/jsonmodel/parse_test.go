package jsonmodel_test

// Tests of the shared JSON reading through the JSON bindings' parsers.

import (
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

func TestPartContent(t *testing.T) {
	tests := []struct {
		name string
		v    protocol.Version
		body string
		want []protocol.PartInfo
	}{
		{name: "1.0 raw and data", v: protocol.V1,
			body: rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"raw":"AAECAwQF"},{"data":[1, {"a": "b"}]},{"data":"s","mediaType":"application/vnd.x+json"}]}}`),
			want: []protocol.PartInfo{{Kind: protocol.PartRaw, MediaType: "application/octet-stream", InlineBytes: 6},
				{Kind: protocol.PartData, MediaType: "application/json", Data: jsontext.Value(`[1, {"a": "b"}]`)},
				{Kind: protocol.PartData, MediaType: "application/vnd.x+json", Data: jsontext.Value(`"s"`)}}},
		{name: "0.3 file bytes and data", v: protocol.V03,
			body: rpc(`1`, "message/send", `{"message":{"messageId":"m","parts":[{"kind":"file","file":{"bytes":"AAECAw=="}},{"kind":"data","data":{"x":1}}]}}`),
			want: []protocol.PartInfo{{Kind: protocol.PartRaw, MediaType: "application/octet-stream", InlineBytes: 4},
				{Kind: protocol.PartData, MediaType: "application/json", Data: jsontext.Value(`{"x":1}`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			r, err := jsonrpcwire.ParseJSONRPC(tt.v, ctJSON, body, protocol.Limits{})
			require.Nil(t, err)
			require.Equal(t, tt.want, r.Message.Parts)
			clear(body) // the data values are copies, not the body's memory
			require.Equal(t, tt.want, r.Message.Parts)
		})
	}
}

func TestLargeObjectFieldCollision(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"id":"t"`)
	for i := range 40 {
		b.WriteString(`,"k` + strconv.Itoa(i) + `":1`)
	}
	b.WriteString(`,"ID":"u"}`)
	_, err := jsonrpcwire.ParseJSONRPC(protocol.V1, ctJSON, []byte(rpc(`1`, "GetTask", b.String())), protocol.Limits{})
	require.NotNil(t, err)
	require.Equal(t, protocol.ParseError, err.Code)
	require.Equal(t, `duplicate object key "ID" (same field as "id")`, err.Message)
}

func TestManyExactDuplicateNamesAfterSetThreshold(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"metadata":{`)
	for i := range 100 {
		b.WriteString(`"k` + strconv.Itoa(i) + `":1,`)
	}
	b.WriteString(`"k7":2}}`)
	_, err := httpjsonwire.ParseHTTP(protocol.V1, "POST", "/message:send", ctJSON, []byte(b.String()), protocol.Limits{})
	require.NotNil(t, err)
	require.Equal(t, `duplicate object key "k7"`, err.Message)
}

// TestJSONSizeLimit checks invariant 5 through both parses that read a body.
func TestJSONSizeLimit(t *testing.T) {
	body := []byte(rpc(`1`, "SendMessage", msg10))
	for _, limit := range []int64{1, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 1} {
		lim := protocol.Limits{MaxBodyBytes: limit, MaxDepth: 16}
		for name, parse := range map[string]func() *protocol.Error{
			"JSON-RPC": func() *protocol.Error { _, err := jsonrpcwire.ParseJSONRPC(protocol.V1, ctJSON, body, lim); return err },
			"HTTP+JSON": func() *protocol.Error {
				_, err := httpjsonwire.ParseHTTP(protocol.V1, "POST", "/message:send", ctJSON, body, lim)
				return err
			},
		} {
			err := parse()
			if int64(len(body)) > limit {
				require.NotNil(t, err, "%s, limit %d", name, limit)
				require.Equal(t, protocol.PayloadTooLarge, err.Code, "%s, limit %d", name, limit)
			} else if err != nil {
				require.NotEqual(t, protocol.PayloadTooLarge, err.Code, "%s, limit %d", name, limit)
			}
		}
	}
	// Over the limit, not even the JSON is read: a bad body is refused for its size.
	_, err := jsonrpcwire.ParseJSONRPC(protocol.V1, ctJSON, []byte(`{"a":1,"a":2}`), protocol.Limits{MaxBodyBytes: 4})
	require.Equal(t, protocol.PayloadTooLarge, err.Code)
}
