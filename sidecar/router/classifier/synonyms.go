package classifier

import (
	_ "embed"
	"slices"
	"strings"
	"sync"
)

// synonymsText is a small table of related words derived from WordNet 3.0;
// see its header for the derivation and the WordNet licence.
//
//go:embed synonyms.txt
var synonymsText string

// relatedStems maps a stem to the stems of its related words. It is parsed
// once, on first use, and never changed afterwards.
var relatedStems = sync.OnceValue(func() map[string][]string {
	m := make(map[string][]string, 12000)
	for line := range strings.Lines(synonymsText) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 2 {
			continue
		}
		head := stem(fs[0])
		for _, w := range fs[1:] {
			s := stem(w)
			if s != head && !slices.Contains(m[head], s) {
				m[head] = append(m[head], s)
			}
		}
	}
	return m
})
