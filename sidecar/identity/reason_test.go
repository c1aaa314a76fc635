package identity

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// FuzzBoundIssuer: the issuer an Error carries for logs is valid UTF-8, at most MaxIssuerBytes,
// without control or line-separator characters, and a prefix of the claim's printable text.
func FuzzBoundIssuer(f *testing.F) {
	for _, s := range []string{"https://idp.example.com", "a\x00b\nc\u2028d", strings.Repeat("é", 300), "\xff\xfe", strings.Repeat("x", 257)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := boundIssuer(s)
		require.True(t, utf8.ValidString(b))
		require.LessOrEqual(t, len(b), MaxIssuerBytes)
		for _, r := range b {
			require.False(t, unicode.IsControl(r) || r == '\u2028' || r == '\u2029', "%q", b)
		}
		kept := strings.Map(func(r rune) rune {
			if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
				return -1
			}
			return r
		}, strings.ToValidUTF8(s, "\uFFFD"))
		require.True(t, strings.HasPrefix(kept, b), "%q is not a prefix of %q", b, kept)
		if len(kept) <= MaxIssuerBytes {
			require.Equal(t, kept, b)
		}
	})
}

// TestEveryFailureHasAReason: every *Error the verifier makes carries one of the Reasons.
func TestEveryFailureHasAReason(t *testing.T) {
	for _, k := range []Kind{ErrMalformed, ErrInvalidToken, ErrExpired, ErrUnknownIssuer, ErrUnknownKey, ErrUnavailable} {
		require.Contains(t, Reasons, newError(k, "anything", nil).Reason)
	}
}
