package classifier

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGenerateSynonyms regenerates synonyms.txt from a local WordNet 3.0
// database (Debian package wordnet-base):
//
//	CLASSIFIER_WORDNET=/usr/share/wordnet go test -run TestGenerateSynonyms
//
// For each single common word (one with at least one sense tagged in
// SemCor) it lists the other common single words of its most frequent
// senses' synsets and the words derivationally related to it in those
// senses.
func TestGenerateSynonyms(t *testing.T) {
	dir := os.Getenv("CLASSIFIER_WORDNET")
	if dir == "" {
		t.Skip("set CLASSIFIER_WORDNET to a WordNet dict directory")
	}
	senses, maxRelated := envInt("WN_SENSES", 2), envInt("WN_MAX", 6)
	type synset struct {
		words []string
		deriv map[int][]string // source word number (1-based) → targets
	}
	type entry struct {
		tagged  int
		offsets []string
	}
	common := map[string]bool{}
	index := map[string]map[string]entry{} // pos → lemma → entry
	data := map[string]map[string]synset{} // pos → offset → synset
	for _, pos := range []string{"noun", "verb", "adj", "adv"} {
		index[pos] = map[string]entry{}
		f, err := os.Open(filepath.Join(dir, "index."+pos))
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, " ") {
				continue
			}
			fs := strings.Fields(line)
			nptr, _ := strconv.Atoi(fs[3])
			tagged, _ := strconv.Atoi(fs[5+nptr])
			e := entry{tagged: tagged, offsets: fs[6+nptr:]}
			index[pos][fs[0]] = e
			if tagged > 0 && simpleWord(fs[0]) {
				common[fs[0]] = true
			}
		}
		require.NoError(t, f.Close())
		data[pos] = map[string]synset{}
		f, err = os.Open(filepath.Join(dir, "data."+pos))
		require.NoError(t, err)
		sc = bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, " ") {
				continue
			}
			fs := strings.Fields(strings.SplitN(line, " | ", 2)[0])
			nw, _ := strconv.ParseInt(fs[3], 16, 32)
			ss := synset{deriv: map[int][]string{}}
			for i := range int(nw) {
				w := strings.ToLower(fs[4+2*i])
				if k := strings.IndexByte(w, '('); k >= 0 {
					w = w[:k]
				}
				ss.words = append(ss.words, w)
			}
			p := 4 + 2*int(nw)
			nptr, _ := strconv.Atoi(fs[p])
			for i := range nptr {
				sym, off, tpos, st := fs[p+1+4*i], fs[p+2+4*i], fs[p+3+4*i], fs[p+4+4*i]
				if sym != "+" {
					continue
				}
				src, _ := strconv.ParseInt(st[:2], 16, 32)
				tgt, _ := strconv.ParseInt(st[2:], 16, 32)
				ss.deriv[int(src)] = append(ss.deriv[int(src)], tpos+":"+off+":"+strconv.Itoa(int(tgt)))
			}
			data[pos][fs[0]] = ss
		}
		require.NoError(t, f.Close())
	}
	posOf := map[string]string{"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}
	related := map[string][]string{}
	for pos, lemmas := range index {
		for lemma, e := range lemmas {
			if !common[lemma] {
				continue
			}
			for _, off := range e.offsets[:min(senses, e.tagged, len(e.offsets))] {
				ss := data[pos][off]
				var self int
				for i, w := range ss.words {
					if w == lemma {
						self = i + 1
					}
					if w != lemma && common[w] {
						related[lemma] = append(related[lemma], w)
					}
				}
				for _, d := range ss.deriv[self] {
					parts := strings.Split(d, ":")
					tss := data[posOf[parts[0]]][parts[1]]
					k, _ := strconv.Atoi(parts[2])
					if k >= 1 && k <= len(tss.words) && common[tss.words[k-1]] && tss.words[k-1] != lemma {
						related[lemma] = append(related[lemma], tss.words[k-1])
					}
				}
			}
		}
	}
	lemmas := make([]string, 0, len(related))
	for l := range related {
		lemmas = append(lemmas, l)
	}
	slices.Sort(lemmas)
	var b strings.Builder
	b.WriteString(synonymsHeader)
	for _, l := range lemmas {
		rs := related[l]
		var uniq []string
		for _, r := range rs {
			if !slices.Contains(uniq, r) {
				uniq = append(uniq, r)
			}
		}
		if len(uniq) > maxRelated {
			uniq = uniq[:maxRelated]
		}
		fmt.Fprintf(&b, "%s %s\n", l, strings.Join(uniq, " "))
	}
	require.NoError(t, os.WriteFile("synonyms.txt", []byte(b.String()), 0o644))
}

func simpleWord(w string) bool {
	if len(w) < 2 {
		return false
	}
	for _, r := range w {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

const synonymsHeader = `# Related words derived from WordNet 3.0 (Debian package wordnet-base) by
# TestGenerateSynonyms in wordnet_gen_test.go: for each common single word,
# the common single words sharing one of its two most frequent senses and the
# words derivationally related to it in those senses. One line per word:
# "word related related ...".
#
# WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.
# WordNet Release 3.0. This software and database is being provided to you,
# the LICENSEE, by Princeton University under the following license. By
# obtaining, using and/or copying this software and database, you agree that
# you have read, understood, and will comply with these terms and conditions.:
# Permission to use, copy, modify and distribute this software and database
# and its documentation for any purpose and without fee or royalty is hereby
# granted, provided that you agree to comply with the following copyright
# notice and statements, including the disclaimer, and that the same appear
# on ALL copies of the software, database and documentation, including
# modifications that you make for internal use or for distribution.
# THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY
# MAKES NO REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED. BY WAY OF
# EXAMPLE, BUT NOT LIMITATION, PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS
# OR WARRANTIES OF MERCHANTABILITY OR FITNESS FOR ANY PARTICULAR PURPOSE OR
# THAT THE USE OF THE LICENSED SOFTWARE, DATABASE OR DOCUMENTATION WILL NOT
# INFRINGE ANY THIRD PARTY PATENTS, COPYRIGHTS, TRADEMARKS OR OTHER RIGHTS.
# The name of Princeton University or Princeton may not be used in
# advertising or publicity pertaining to distribution of the software and/or
# database. Title to copyright in this software, database and any associated
# documentation shall at all times remain with Princeton University and
# LICENSEE agrees to preserve same.
`

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
