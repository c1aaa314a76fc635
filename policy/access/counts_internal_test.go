package access

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The diff's counts agree in number with their nouns, as the text,
// Markdown and HTML reports print them.
func TestDiffCountsPlurals(t *testing.T) {
	for _, tt := range []struct {
		caps, config int
		want         string
	}{
		{1, 1, "0 gained, 0 lost, 1 capability and 1 config field changed"},
		{2, 0, "0 gained, 0 lost, 2 capabilities and 0 config fields changed"},
		{0, 3, "0 gained, 0 lost, 0 capabilities and 3 config fields changed"},
	} {
		d := &Diff{Capabilities: make([]CapabilityChange, tt.caps), Config: make([]FieldChange, tt.config)}
		require.Equal(t, tt.want, d.counts())
	}
}
