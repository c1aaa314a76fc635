package card

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
)

func TestFindLeaksRules(t *testing.T) {
	hidden := []manifest.Capability{{
		ID: "recon.v2", State: manifest.StateGA, Visibility: manifest.VisibilityExtended,
		Skill: manifest.Skill{
			Name:        "Lookup",
			Description: "Three-way match.",
			Examples:    []string{"Match PO 7 now"},
		},
	}}
	tests := []struct {
		name string
		text string
		want []string // leaked runs, in order
	}{
		{name: "one-word short name is not matched", text: "Lookup an invoice"},
		{name: "id as whole token", text: "See recon.v2.", want: []string{"recon.v2"}},
		{name: "id in a URL path", text: "https://x.example/recon.v2/run", want: []string{"recon.v2"}},
		{name: "id prefix of a longer id", text: "recon.v2-beta"},
		{name: "id words without its punctuation", text: "recon v2"},
		{name: "short description as a whole, any case and punctuation", text: "Offers a THREE WAY match!", want: []string{"three way match"}},
		{name: "part of a short description", text: "three way"},
		{name: "short example as a whole", text: "match po 7 now, please", want: []string{"match po 7 now"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []string{}
			for _, f := range findLeaks(map[string]any{"description": tt.text}, hidden) {
				require.Equal(t, "description", f.Field)
				got = append(got, f.New)
			}
			if tt.want == nil {
				tt.want = []string{}
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestWordsAndIDTokens(t *testing.T) {
	require.Equal(t, []string{"größe", "m", "2", "x"}, words("Größe: M-2 (x)"))
	require.Equal(t, []string{"a-b", "c.d", "e"}, idTokens("A-B, c.d. e-"))
}
