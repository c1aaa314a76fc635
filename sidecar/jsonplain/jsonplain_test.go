package jsonplain_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/jsonplain"
)

// TestStringMatchesMarshal: every string String accepts is written by
// json.Marshal as it is, for each byte alone and inside a longer string; and
// it accepts all of printable ASCII but the five encoding/json escapes (it
// refuses DEL and every non-ASCII byte, which encoding/json may write as they
// are: a refusal only sends the string to encoding/json).
func TestStringMatchesMarshal(t *testing.T) {
	check := func(s string) {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		if jsonplain.String(s) {
			require.Equal(t, `"`+s+`"`, string(b), "%q", s)
		}
	}
	check("")
	require.True(t, jsonplain.String(""))
	for c := range 256 {
		check(string([]byte{byte(c)}))
		check("ab" + string([]byte{byte(c)}) + "cd")
		escaped := c == '"' || c == '\\' || c == '<' || c == '>' || c == '&'
		require.Equal(t, c >= 0x20 && c <= 0x7e && !escaped, jsonplain.String("ab"+string([]byte{byte(c)})+"cd"), "%#x", c)
	}
	for _, s := range []string{"https://idp.example.com/", "é", "\u2028", "a\u00a0b", "<script>", "x&y", `"q"`} {
		check(s)
	}
}
