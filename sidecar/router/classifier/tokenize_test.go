package classifier

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWords(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
	}{
		{"lower case and punctuation", "Hello, World!", []string{"hello", "world"}},
		{"digits and symbols", "transfer $20000 to acct#2", []string{"transfer", "20000", "to", "acct", "2"}},
		{"hyphen splits", "hy-vee card", []string{"hy", "vee", "card"}},
		{"n't", "I don't know", []string{"i", "do", "not", "know"}},
		{"won't and can't", "won't can't", []string{"will", "not", "can", "not"}},
		{"what's", "what's my balance", []string{"what", "is", "my", "balance"}},
		{"without apostrophe", "whats dont im", []string{"what", "is", "do", "not", "i", "am"}},
		{"possessive dropped", "john's car", []string{"john", "car"}},
		{"'re 've 'll 'd", "you're we've they'll i'd", []string{"you", "are", "we", "have", "they", "will", "i", "would"}},
		{"typographic apostrophe", "it\u2019s late", []string{"it", "is", "late"}},
		{"stray quotes", "'quoted' words'", []string{"quoted", "words"}},
		{"empty", "  ?! ", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, words(tt.text))
		})
	}
}

func TestStem(t *testing.T) {
	for word, want := range map[string]string{
		"reservations": "reserv",
		"reserved":     "reserv",
		"running":      "run",
		"cards":        "card",
		"20000":        "20000",
	} {
		require.Equal(t, want, stem(word), word)
	}
}

func TestRelatedStems(t *testing.T) {
	rel := relatedStems()
	require.Contains(t, rel[stem("vacation")], stem("holiday"))
	require.Contains(t, rel[stem("cancel")], stem("scrub"))
	require.Contains(t, rel[stem("hello")], stem("hi"))
	for head, rs := range rel {
		require.NotContains(t, rs, head)
	}
}
