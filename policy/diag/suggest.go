package diag

import (
	"strings"

	"github.com/agnivade/levenshtein"
)

// Suggest returns the word of vocab a misspelling most likely meant: the one
// at the smallest edit distance (Levenshtein, case-insensitive, with "_" and
// "-" ignored when that makes them equal), if that distance is small for the
// word's length (1 up to 8 characters, 2 up to 14, 3 beyond). Ties go to the
// earlier word of vocab. ok is false when nothing is close, or when word is
// itself in vocab.
func Suggest(word string, vocab []string) (string, bool) {
	return Close(word, vocab, maxDistance(word))
}

// Close is Suggest with a maximum distance of the caller's choosing, for
// vocabularies whose neighbours are legitimate words of their own (a
// handler's limit max_pages is not a misspelling of max_parts).
func Close(word string, vocab []string, maxDist int) (string, bool) {
	if word == "" {
		return "", false
	}
	lw, nw := strings.ToLower(word), normalize(word)
	best, bestD := "", -1
	for _, v := range vocab {
		if v == word {
			return "", false
		}
		d := levenshtein.ComputeDistance(lw, strings.ToLower(v))
		if normalize(v) == nw {
			d = 0
		}
		if bestD < 0 || d < bestD {
			best, bestD = v, d
		}
	}
	if bestD < 0 || bestD > maxDist {
		return "", false
	}
	return best, true
}

// DidYouMean is Suggest as a message suffix: "; did you mean X?" or "".
func DidYouMean(word string, vocab []string) string {
	if s, ok := Suggest(word, vocab); ok {
		return "; did you mean " + s + "?"
	}
	return ""
}

func maxDistance(word string) int {
	switch n := len([]rune(word)); {
	case n <= 8:
		return 1
	case n <= 14:
		return 2
	}
	return 3
}

func normalize(s string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
}
