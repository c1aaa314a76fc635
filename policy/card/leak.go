package card

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/capgate/capgate/policy/manifest"
)

// Leak detection. Text is normalised to words: lowercase, split on every
// rune that is not a letter or digit. A hidden capability leaks when any
// string value of the public card (each checked on its own) contains:
//   - its id as a whole token, where tokens split on runes outside the id
//     alphabet [a-z0-9.-] and lose trailing '.' and '-': "reconcile-invoice"
//     matches "(see reconcile-invoice)." but not "reconcile-invoice-v2" or
//     "reconcile invoice";
//   - any run of leakRun consecutive words of its name, description or an
//     example;
//   - the whole of a name, description or example shorter than leakRun
//     words, if it has at least two words or eight characters (so a name
//     such as "Lookup" alone is not a leak).
const (
	leakRun      = 6
	leakMinWords = 2
	leakMinChars = 8
)

// publicString is one string value of the public card and where it is.
type publicString struct {
	path  string
	words []string
	ids   []string
}

// hiddenText is one text of a hidden capability to look for.
type hiddenText struct {
	field string   // "name", "description", "examples[0]"
	words []string // normalised
	whole bool     // short text: match only as a whole
}

func findLeaks(doc map[string]any, hidden []manifest.Capability) []Finding {
	var strs []publicString
	collectStrings("", doc, &strs)

	caps := slices.Clone(hidden)
	slices.SortStableFunc(caps, func(a, b manifest.Capability) int { return strings.Compare(a.ID, b.ID) })
	var fs []Finding
	for i := range caps {
		h := &caps[i]
		kind := hiddenKind(h)
		// Id first: reported once per public location.
		if h.ID != "" {
			for _, s := range strs {
				if slices.Contains(s.ids, h.ID) {
					fs = append(fs, Finding{Kind: KindLeak, Skill: h.ID, Field: s.path, New: h.ID,
						Message: fmt.Sprintf("the public card names %s capability %s at %s", kind, h.ID, s.path)})
				}
			}
		}
		for _, t := range hiddenTexts(h) {
			for _, s := range strs {
				if run, ok := t.match(s.words); ok {
					fs = append(fs, Finding{Kind: KindLeak, Skill: h.ID, Field: s.path, New: run,
						Message: fmt.Sprintf("text of the %s of %s capability %s appears at %s", t.field, kind, h.ID, s.path)})
				}
			}
		}
	}
	return fs
}

// hiddenKind says why a capability is hidden, for messages.
func hiddenKind(m *manifest.Capability) string {
	switch {
	case m.State == manifest.StatePreview:
		return "preview"
	case m.Visibility == "":
		return "hidden"
	}
	return string(m.Visibility)
}

func hiddenTexts(m *manifest.Capability) []hiddenText {
	var out []hiddenText
	add := func(field, text string) {
		w := words(text)
		switch {
		case len(w) >= leakRun:
			out = append(out, hiddenText{field: field, words: w})
		case len(w) >= leakMinWords || (len(w) > 0 && utf8.RuneCountInString(strings.TrimSpace(text)) >= leakMinChars):
			out = append(out, hiddenText{field: field, words: w, whole: true})
		}
	}
	add("name", m.Skill.Name)
	add("description", m.Skill.Description)
	for i, e := range m.Skill.Examples {
		add(fmt.Sprintf("examples[%d]", i), e)
	}
	return out
}

// match returns the first leaked run of t found in s.
func (t hiddenText) match(s []string) (string, bool) {
	if t.whole {
		if i := indexRun(s, t.words); i >= 0 {
			return strings.Join(t.words, " "), true
		}
		return "", false
	}
	for i := 0; i+leakRun <= len(t.words); i++ {
		run := t.words[i : i+leakRun]
		if indexRun(s, run) >= 0 {
			return strings.Join(run, " "), true
		}
	}
	return "", false
}

// indexRun is the index of the first occurrence of run in s, or -1.
func indexRun(s, run []string) int {
	for i := 0; i+len(run) <= len(s); i++ {
		if slices.Equal(s[i:i+len(run)], run) {
			return i
		}
	}
	return -1
}

// collectStrings gathers every string value of a decoded card with its path;
// skills are addressed by id ("skills[lookup-invoice].description").
func collectStrings(path string, v any, out *[]publicString) {
	switch v := v.(type) {
	case string:
		*out = append(*out, publicString{path: path, words: words(v), ids: idTokens(v)})
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			collectStrings(p, v[k], out)
		}
	case []any:
		for i, e := range v {
			p := fmt.Sprintf("%s[%d]", path, i)
			if path == "skills" {
				if m, ok := e.(map[string]any); ok {
					if id, ok := m["id"].(string); ok && id != "" {
						p = "skills[" + id + "]"
					}
				}
			}
			collectStrings(p, e, out)
		}
	}
}

// words normalises text: lowercase words of letters and digits.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// idTokens splits lowercased text on runes outside the id alphabet and trims
// trailing sentence punctuation ('.', '-') from each token.
func idTokens(s string) []string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '.' && r != '-'
	})
	out := f[:0]
	for _, t := range f {
		if t = strings.TrimRight(t, ".-"); t != "" {
			out = append(out, t)
		}
	}
	return out
}
