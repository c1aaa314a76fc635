package protocol

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestCanonicalKey: the spelled-out keys of HTTPHeader.Values are net/http's canonical forms,
// and a lookup by any spelling of a header name finds its values.
func TestCanonicalKey(t *testing.T) {
	for _, name := range []string{VersionHeader, ExtensionsHeader, ExtensionsHeaderV03, "Authorization", "x-other-header"} {
		if got, want := canonicalKey(name), http.CanonicalHeaderKey(name); got != want {
			t.Errorf("canonicalKey(%q) = %q, want %q", name, got, want)
		}
		h := http.Header{}
		h.Add(name, "v1")
		h.Add(strings.ToLower(name), "v2")
		for _, spelling := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			if got := HTTPHeader(h).Values(spelling); !slices.Equal(got, []string{"v1", "v2"}) {
				t.Errorf("Values(%q) = %q, want [v1 v2]", spelling, got)
			}
		}
	}
}
