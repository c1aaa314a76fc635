package learn

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"unicode"
)

// Candidate is one stored candidate example: a redacted text, how many
// answers produced it, and its review id.
type Candidate struct {
	Text  string
	Count int
}

// Group is a set of near-duplicate candidates of one capability, shown and
// reviewed as one: Text is the most frequent member (the first of the most
// frequent, by text), Count the answers of every member, Members every text.
type Group struct {
	Text    string
	Count   int
	Members []string
}

// Similar is the share of words two texts must have in common (Jaccard
// similarity of their lower-case word sets) to be merged.
const Similar = 0.8

// Merge groups near-duplicate candidates (Similar), largest group first, then
// by text; each candidate joins the first group whose representative it is
// similar to, in that order.
func Merge(cands []Candidate) []Group {
	sorted := slices.Clone(cands)
	slices.SortFunc(sorted, func(a, b Candidate) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Text, b.Text)
	})
	var groups []Group
	var sets []map[string]bool
	for _, c := range sorted {
		ws := words(c.Text)
		joined := false
		for i := range groups {
			if jaccard(ws, sets[i]) >= Similar {
				groups[i].Count += c.Count
				groups[i].Members = append(groups[i].Members, c.Text)
				joined = true
				break
			}
		}
		if !joined {
			groups = append(groups, Group{Text: c.Text, Count: c.Count, Members: []string{c.Text}})
			sets = append(sets, ws)
		}
	}
	slices.SortStableFunc(groups, func(a, b Group) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Text, b.Text)
	})
	return groups
}

// words is the set of lower-case words of s.
func words(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '<' && r != '>'
	}) {
		out[w] = true
	}
	return out
}

func jaccard(a, b map[string]bool) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	inter := 0
	for w := range a {
		if b[w] {
			inter++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// ReviewID is the short, stable id a group is reviewed by (`capgate route
// examples accept|reject`): the first 10 hex digits of the SHA-256 of its text.
func ReviewID(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:5])
}
