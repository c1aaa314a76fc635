package jsonmodel

import (
	"encoding/base64"
	"strconv"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
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
