package protocol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHasControlMatchesIndexFunc(t *testing.T) {
	for _, s := range []string{"", "abc", "a\nb", "\x7f", "a\u0085", "\u009f", "\u00a0", "é\x01", "é", "\xff", "\xc2", "a\xc2\x85b", "ok-id_1"} {
		require.Equal(t, strings.IndexFunc(s, isControl) >= 0, HasControl(s), "%q", s)
	}
}
