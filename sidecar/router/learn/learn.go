// Package learn turns the answers callers give to clarifications into
// candidate routing examples: it keeps a message's text only, redacts obvious
// identifiers (numbers, e-mail addresses, URLs, ids) and bounds its length
// before anything is stored, and merges near-duplicate candidates for review.
// Nothing here knows who sent a message: a candidate is a text and a
// capability id.
package learn

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Placeholders that replace what Redact removes.
const (
	Number = "<number>"
	Email  = "<email>"
	URL    = "<url>"
	ID     = "<id>"
)

var (
	urlRe   = regexp.MustCompile(`(?i)\b(?:[a-z][a-z0-9+.-]*://|www\.)[^\s<>"']+`)
	emailRe = regexp.MustCompile(`(?i)[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+`)
	// wordRe is a run of characters an identifier is made of (letters,
	// digits, and the joiners ids and numbers use).
	wordRe  = regexp.MustCompile(`[\p{L}\p{N}][\p{L}\p{N}_./:#,-]*[\p{L}\p{N}]|[\p{L}\p{N}]`)
	spaceRe = regexp.MustCompile(`\s+`)
	// placeholderRe finds the placeholders (for Plain).
	placeholderRe = regexp.MustCompile(`<(?:number|email|url|id)>`)
)

// Redact is text with obvious identifiers replaced and white space collapsed,
// cut to at most maxBytes bytes on a word boundary (maxBytes <= 0: no cut):
// URLs become <url>, e-mail addresses <email>, a word with a digit <number>
// when it has no letter and <id> otherwise (INV-20931, ABC123, a UUID), and a
// word of 16 or more letters mixing cases (not a capitalised word) <id>
// (tokens, keys). What is left is words a routing example needs.
func Redact(text string, maxBytes int) string {
	s := urlRe.ReplaceAllString(text, " "+URL+" ")
	s = emailRe.ReplaceAllString(s, " "+Email+" ")
	s = wordRe.ReplaceAllStringFunc(s, redactWord)
	s = strings.TrimSpace(spaceRe.ReplaceAllString(s, " "))
	return cut(s, maxBytes)
}

// redactWord replaces one word that is, or holds, an identifier.
func redactWord(w string) string {
	var letters, digits, upper, lower int
	for _, r := range w {
		switch {
		case unicode.IsDigit(r):
			digits++
		case unicode.IsLetter(r):
			letters++
			if unicode.IsUpper(r) {
				upper++
			} else if unicode.IsLower(r) {
				lower++
			}
		}
	}
	switch {
	case digits > 0 && letters == 0:
		return Number
	case digits > 0:
		return ID
	case letters >= 16 && upper > 0 && lower > 0 && !titleCase(w):
		return ID
	}
	return w
}

// titleCase reports whether w is one capitalised word (not a mixed-case token).
func titleCase(w string) bool {
	for i, r := range w {
		if i > 0 && unicode.IsUpper(r) {
			return false
		}
	}
	return true
}

// cut shortens s to at most max bytes, at a word boundary when there is one.
func cut(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	s = s[:max]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	if i := strings.LastIndexByte(s, ' '); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// Plain is a redacted text with its placeholders removed: what the classifier
// indexes of a learned example (a placeholder says nothing of the skill).
func Plain(text string) string {
	return strings.TrimSpace(spaceRe.ReplaceAllString(placeholderRe.ReplaceAllString(text, " "), " "))
}
