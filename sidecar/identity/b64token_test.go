package identity

import (
	"strings"
	"testing"
)

// plainB64tokenChar is RFC 6750's b64token alphabet written out as the
// grammar reads: ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/".
func plainB64tokenChar(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0
}

// TestB64tokenChar holds the bit-set b64tokenChar equal to the plain form
// over every byte.
func TestB64tokenChar(t *testing.T) {
	n := 0
	for c := 0; c < 256; c++ {
		got, want := b64tokenChar(byte(c)), plainB64tokenChar(byte(c))
		if got != want {
			t.Errorf("b64tokenChar(%#02x %q) = %v, want %v", c, rune(c), got, want)
		}
		if got {
			n++
		}
	}
	if n != 26+26+10+6 {
		t.Errorf("%d bytes admitted, want 68", n)
	}
}

// BenchmarkBearerToken reads the Authorization header of a typical token
// (a compact JWS of ~800 bytes).
func BenchmarkBearerToken(b *testing.B) {
	h := "Bearer " + strings.Repeat("eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0", 22) + "." + strings.Repeat("Ab-_", 10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := BearerToken(h); err != nil {
			b.Fatal(err)
		}
	}
}
