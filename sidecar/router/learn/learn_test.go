package learn

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"i need to move my flight":                                   "i need to move my flight",
		"cancel booking ABC123 please":                               "cancel booking <id> please",
		"mail me at jane.doe+x@example.co.uk today":                  "mail me at <email> today",
		"see https://example.com/a?b=1 and www.foo.org/x":            "see <url> and <url>",
		"call +1 (555) 123-4567":                                     "call +<number> (<number>) <number>",
		"transfer $20,000.50 to 4111-1111-1111-1111":                 "transfer $<number> to <number>",
		"invoice INV-20931 for 3f2b9c1e-8d7a-4b6c-9e0f-1a2b3c4d5e6f": "invoice <id> for <id>",
		"token eyJhbGciOiJIUzI1NiJ9xyzABCdefGHI":                     "token <id>",
		"Supercalifragilistic words":                                 "Supercalifragilistic words",
		"  spaced\n\tout  ":                                          "spaced out",
	} {
		require.Equal(t, want, Redact(in, 0), in)
	}
}

func TestRedactBounds(t *testing.T) {
	long := strings.Repeat("move my flight ", 100)
	got := Redact(long, 64)
	require.LessOrEqual(t, len(got), 64)
	require.True(t, strings.HasPrefix(long, got))
	require.False(t, strings.HasSuffix(got, " "))
	require.Equal(t, "ééé", Redact("éééé", 7)) // never half a rune
}

func TestPlain(t *testing.T) {
	require.Equal(t, "cancel booking please", Plain("cancel booking <id> please"))
	require.Equal(t, "", Plain("<number> <email>"))
}

func TestMerge(t *testing.T) {
	groups := Merge([]Candidate{
		{"i need to move my flight", 2},
		{"i need to move my flight please", 1},
		{"rebook me", 1},
		{"i really need to move my flight", 1},
	})
	require.Len(t, groups, 2)
	require.Equal(t, "i need to move my flight", groups[0].Text)
	require.Equal(t, 4, groups[0].Count)
	require.Len(t, groups[0].Members, 3)
	require.Equal(t, Group{Text: "rebook me", Count: 1, Members: []string{"rebook me"}}, groups[1])
}
