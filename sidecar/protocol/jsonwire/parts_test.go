package jsonwire

import (
	"encoding/base64"
	"strconv"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

// TestBase64Len checks the counted size against decoding, for every
// alphabet and padding protobuf JSON accepts.
func TestBase64Len(t *testing.T) {
	for n := range 20 {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*37 + 250)
		}
		for name, enc := range map[string]*base64.Encoding{
			"std": base64.StdEncoding, "raw std": base64.RawStdEncoding,
			"url": base64.URLEncoding, "raw url": base64.RawURLEncoding,
		} {
			s := enc.EncodeToString(data)
			require.Equal(t, int64(n), base64Len(jsontext.Value(strconv.Quote(s))), "%s %q", name, s)
		}
	}
	// Escapes are decoded first: "\u0041\u0041\u0041\u0041" is "AAAA", 3 bytes.
	require.Equal(t, int64(3), base64Len(jsontext.Value(`"\u0041\u0041\u0041\u0041"`)))
	require.Equal(t, int64(3), base64Len(jsontext.Value(`"AAAA\r\n"`)))
	require.Equal(t, int64(0), base64Len(jsontext.Value(`""`)))
}

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
			r, err := ParseJSONRPC(tt.v, ctJSON, body, protocol.Limits{})
			require.Nil(t, err)
			require.Equal(t, tt.want, r.Message.Parts)
			clear(body) // the data values are copies, not the body's memory
			require.Equal(t, tt.want, r.Message.Parts)
		})
	}
}
