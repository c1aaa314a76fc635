package classifier

import (
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// token is one word of a text: its surface form (lower case, contractions
// expanded) and its Porter2 stem.
type token struct {
	word string
	stem string
}

// words splits text into lower-case words. A word is a run of letters and
// digits; an apostrophe inside a word is kept so that contractions can be
// expanded; everything else separates words. Contractions are expanded,
// with or without the apostrophe ("what's", "whats" → "what is"); a
// possessive "'s" is dropped.
func words(text string) []string {
	return appendWords(nil, text)
}

// appendWords appends the words of text to out.
func appendWords(out []string, text string) []string {
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		w := strings.Trim(text[start:end], "'")
		start = -1
		if w == "" {
			return
		}
		out = appendExpanded(out, strings.ToLower(w))
	}
	if strings.ContainsAny(text, "\u2019\u2018\u02bc") {
		text = apostrophes.Replace(text) // which allocates even when it replaces nothing
	}
	for i, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if start < 0 {
				start = i
			}
		case r == '\'' && start >= 0:
			// kept inside a word; trimmed at its ends by flush
		default:
			flush(i)
		}
	}
	flush(len(text))
	return out
}

// apostrophes maps the typographic apostrophes to the ASCII one.
var apostrophes = strings.NewReplacer("\u2019", "'", "\u2018", "'", "\u02bc", "'")

// tokens returns the words of text with their stems. A non-nil memo
// caches stems across calls (index builds stem the same words many times).
func tokens(text string, memo map[string]string) []token {
	ws := words(text)
	out := make([]token, len(ws))
	for i, w := range ws {
		s, ok := memo[w]
		if !ok {
			s = stem(w)
			if memo != nil {
				memo[w] = s
			}
		}
		out[i] = token{word: w, stem: s}
	}
	return out
}

// appendKnownTokens appends the tokens of the words ws to out: tokens
// with the stems of known words looked up rather than computed; known is
// only read (the index's build memo, shared).
func appendKnownTokens(out []token, ws []string, known map[string]string) []token {
	for _, w := range ws {
		s, ok := known[w]
		if !ok {
			s = stem(w)
		}
		out = append(out, token{word: w, stem: s})
	}
	return out
}

// stem returns the Porter2 (Snowball English) stem of a lower-case word.
// Words made only of digits are kept as they are.
func stem(w string) string {
	if isNumber(w) {
		return w
	}
	return english.Stem(w, true)
}

func isNumber(w string) bool {
	for _, r := range w {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return w != ""
}

// contractions maps whole contracted words, with and without apostrophe, to
// their expansion. Forms without an apostrophe that are also ordinary words
// ("ill", "its", "wed", "well", "were", "hell", "shed", "id", "lets") are
// left out on purpose.
var contractions = map[string][]string{
	"can't": {"can", "not"}, "cant": {"can", "not"}, "cannot": {"can", "not"},
	"won't": {"will", "not"}, "shan't": {"shall", "not"}, "ain't": {"is", "not"},
	"let's": {"let", "us"}, "i'm": {"i", "am"}, "im": {"i", "am"},
	"dont": {"do", "not"}, "doesnt": {"does", "not"}, "didnt": {"did", "not"},
	"isnt": {"is", "not"}, "arent": {"are", "not"}, "wasnt": {"was", "not"},
	"werent": {"were", "not"}, "havent": {"have", "not"}, "hasnt": {"has", "not"},
	"hadnt": {"had", "not"}, "wouldnt": {"would", "not"}, "couldnt": {"could", "not"},
	"shouldnt": {"should", "not"}, "ive": {"i", "have"}, "youre": {"you", "are"},
	"youve": {"you", "have"}, "theyre": {"they", "are"}, "whats": {"what", "is"},
	"thats": {"that", "is"}, "hows": {"how", "is"}, "wheres": {"where", "is"},
	"whos": {"who", "is"}, "theres": {"there", "is"}, "whens": {"when", "is"},
	"whys": {"why", "is"}, "youll": {"you", "will"}, "itll": {"it", "will"},
}

// isReaders are the words whose "'s" means "is" (or "has") rather than a
// possessive.
var isReaders = map[string]bool{
	"it": true, "that": true, "what": true, "where": true, "who": true, "how": true,
	"there": true, "here": true, "he": true, "she": true, "when": true, "why": true,
	"this": true, "which": true,
}

// appendExpanded appends one lower-case word that may be a contraction,
// expanded, to out.
func appendExpanded(out []string, w string) []string {
	if e, ok := contractions[w]; ok {
		return append(out, e...)
	}
	i := strings.LastIndexByte(w, '\'')
	if i < 0 {
		return append(out, w)
	}
	head, tail := w[:i], w[i+1:]
	switch tail {
	case "t":
		if strings.HasSuffix(head, "n") {
			return append(out, head[:len(head)-1], "not")
		}
	case "re":
		return append(out, head, "are")
	case "ve":
		return append(out, head, "have")
	case "ll":
		return append(out, head, "will")
	case "d":
		return append(out, head, "would")
	case "m":
		return append(out, head, "am")
	case "s":
		if isReaders[head] {
			return append(out, head, "is")
		}
		return append(out, head)
	}
	return append(out, strings.ReplaceAll(w, "'", ""))
}
