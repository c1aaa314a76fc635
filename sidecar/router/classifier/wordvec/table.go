// Package wordvec holds an embedded table of English word vectors (GloVe 6B, 100 dimensions, 4-bit) for the router's classifier.
//
// The table (glove100k.q4, about 6.3 MB) holds the 100,000 most frequent words of GloVe 6B that
// consist only of the letters a–z; see NOTICE for its source, licence and regeneration. It is
// read in place: loading it checks the file and keeps one offset per 16 words (about 25 kB of
// heap); a lookup is a binary search over the sorted words and does not allocate.
//
// # File format
//
// Little-endian throughout:
//
//	magic    "WVQ4"
//	version  uint16 (1)
//	dim      uint16 (Dim)
//	count    uint32 (number of words, n)
//	wordsLen uint32 (bytes of the words block)
//	ranks    n × uint24: the frequency rank (1 = most frequent) of each word, in sorted order
//	words    wordsLen bytes: the words, sorted, each of the letters a–z and ended by '\n'
//	vectors  n × (2 + Dim/2) bytes, in rank order (vector r−1 is the word of rank r): the scale
//	         s as an IEEE 754 half-precision float, then Dim signed 4-bit components q
//	         (two's complement; component 2k in the low nibble of byte k, 2k+1 in the high
//	         nibble); the vector is q·s/7
package wordvec

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
)

// Dim is the number of components of a vector.
const Dim = 100

// File format constants (see the package comment).
const (
	magic      = "WVQ4"
	version    = 1
	headerLen  = 4 + 2 + 2 + 4 + 4
	rankLen    = 3
	vectorLen  = 2 + Dim/2
	blockWords = 16 // words per entry of Table.blocks
)

// embedded is the table file; it is read in place, never copied.
//
//go:embed glove100k.q4
var embedded string

// Default returns the embedded table, parsed once on first use; never nil.
func Default() *Table { return defaultTable() }

// defaultTable parses the embedded table once.
var defaultTable = sync.OnceValue(func() *Table {
	t, err := parse(embedded)
	if err != nil {
		// The embedded file is written by the generator and checked by the package's tests.
		panic("wordvec: the embedded table is malformed: " + err.Error())
	}
	return t
})

// Table is a table of word vectors. It is immutable and safe for concurrent use.
type Table struct {
	n       int
	ranks   string   // n × uint24, in sorted order
	words   string   // sorted words, each ended by '\n'
	vectors string   // n × vectorLen bytes, in rank order
	blocks  []uint32 // offset in words of word i·blockWords, for each i
}

// Len is the number of words.
func (t *Table) Len() int { return t.n }

// Rank returns the word's frequency rank (1 = most frequent) and whether it is in the table.
// It does not allocate.
func (t *Table) Rank(word string) (int, bool) {
	i, ok := t.find(word)
	if !ok {
		return 0, false
	}
	return t.rank(i), true
}

// AddRank adds weight × the vector of the word of rank r (as Rank returns it) to dst and
// reports whether it did: not when r is not in 1..Len or len(dst) is not Dim. It does not
// allocate. A word's vector is Rank, then AddRank: one lookup, and the weight may depend on the
// rank.
func (t *Table) AddRank(dst []float32, r int, weight float32) bool {
	if len(dst) != Dim || r < 1 || r > t.n {
		return false
	}
	v := t.vectors[(r-1)*vectorLen : r*vectorLen]
	f := weight * half(uint16(v[0])|uint16(v[1])<<8) / 7
	v = v[2:]
	dst = dst[:Dim]
	for k := range Dim / 2 {
		b := v[k]
		dst[2*k] += f * float32(int8(b<<4)>>4)
		dst[2*k+1] += f * float32(int8(b)>>4)
	}
	return true
}

// rank is the rank of the word at sorted position i.
func (t *Table) rank(i int) int {
	p := t.ranks[i*rankLen:]
	return int(p[0]) | int(p[1])<<8 | int(p[2])<<16
}

// find returns the sorted position of word.
func (t *Table) find(word string) (int, bool) {
	if word == "" {
		return 0, false
	}
	for i := range len(word) {
		if word[i] < 'a' || word[i] > 'z' {
			return 0, false
		}
	}
	// The last block whose first word is ≤ word.
	lo, hi := 0, len(t.blocks) // blocks[lo-1] ≤ word < blocks[hi]
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.compare(int(t.blocks[m]), word) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0, false
	}
	b := lo - 1
	off := int(t.blocks[b])
	for i := b * blockWords; i < t.n && i < (b+1)*blockWords; i++ {
		switch c := t.compare(off, word); {
		case c == 0:
			return i, true
		case c > 0:
			return 0, false
		}
		off += strings.IndexByte(t.words[off:], '\n') + 1
	}
	return 0, false
}

// compare compares the word starting at offset off of the words block with word (of the letters
// a–z), as strings.Compare does, without finding the stored word's end first: the stored word's
// '\n' sorts before every letter.
func (t *Table) compare(off int, word string) int {
	end := off + len(word)
	if end >= len(t.words) {
		return strings.Compare(t.words[off:], word) // holds a '\n' before word's end: not equal
	}
	if c := strings.Compare(t.words[off:end], word); c != 0 {
		return c
	}
	if t.words[end] == '\n' {
		return 0
	}
	return 1 // word is a prefix of the stored word
}

// Parse reads a table in the file format (see the package comment). It returns an error for a
// malformed or truncated file.
func Parse(data []byte) (*Table, error) {
	return parse(string(data))
}

// parse reads a table, referring to data in place.
func parse(data string) (*Table, error) {
	if len(data) < headerLen {
		return nil, fmt.Errorf("wordvec: %d bytes is shorter than the %d-byte header", len(data), headerLen)
	}
	if data[:4] != magic {
		return nil, errors.New("wordvec: not a word-vector table (bad magic)")
	}
	h := []byte(data[:headerLen])
	if v := binary.LittleEndian.Uint16(h[4:]); v != version {
		return nil, fmt.Errorf("wordvec: version %d, want %d", v, version)
	}
	if d := binary.LittleEndian.Uint16(h[6:]); d != Dim {
		return nil, fmt.Errorf("wordvec: dimension %d, want %d", d, Dim)
	}
	n64 := uint64(binary.LittleEndian.Uint32(h[8:]))
	wordsLen := uint64(binary.LittleEndian.Uint32(h[12:]))
	if n64 == 0 || n64 >= 1<<24 {
		return nil, fmt.Errorf("wordvec: word count %d is not in 1..%d", n64, 1<<24-1)
	}
	want := uint64(headerLen) + n64*rankLen + wordsLen + n64*vectorLen
	if uint64(len(data)) != want {
		return nil, fmt.Errorf("wordvec: %d bytes, want %d for %d words and a %d-byte words block", len(data), want, n64, wordsLen)
	}
	n := int(n64)
	t := &Table{n: n}
	p := headerLen
	t.ranks, p = data[p:p+n*rankLen], p+n*rankLen
	t.words, p = data[p:p+int(wordsLen)], p+int(wordsLen)
	t.vectors = data[p:]

	// Ranks: a permutation of 1..n.
	seen := make([]uint64, (n+64)/64)
	for i := range n {
		r := t.rank(i)
		if r < 1 || r > n || seen[r/64]&(1<<(r%64)) != 0 {
			return nil, fmt.Errorf("wordvec: word %d has rank %d, not a new rank in 1..%d", i, r, n)
		}
		seen[r/64] |= 1 << (r % 64)
	}

	// Words: n of them, of the letters a–z, strictly increasing.
	t.blocks = make([]uint32, 0, (n+blockWords-1)/blockWords)
	prev, start, i := "", 0, 0
	for off := range len(t.words) {
		c := t.words[off]
		if c >= 'a' && c <= 'z' {
			continue
		}
		if c != '\n' {
			return nil, fmt.Errorf("wordvec: word %d has byte %#x, not a letter a–z", i, c)
		}
		w := t.words[start:off]
		if w == "" || w <= prev {
			return nil, fmt.Errorf("wordvec: word %d (%q) is empty or not after the one before", i, w)
		}
		if i == n {
			return nil, fmt.Errorf("wordvec: the words block holds more than %d words", n)
		}
		if i%blockWords == 0 {
			t.blocks = append(t.blocks, uint32(start))
		}
		prev, start, i = w, off+1, i+1
	}
	if start != len(t.words) || i != n {
		return nil, fmt.Errorf("wordvec: the words block holds %d words ended by a newline, want %d", i, n)
	}

	// Scales: finite, not negative.
	for r := range n {
		v := t.vectors[r*vectorLen:]
		s := uint16(v[0]) | uint16(v[1])<<8
		if f := half(s); math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) || f < 0 {
			return nil, fmt.Errorf("wordvec: vector %d has scale %v", r, f)
		}
	}
	return t, nil
}

// half decodes an IEEE 754 half-precision float.
func half(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp, mant := uint32(h>>10)&0x1f, uint32(h&0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13) // Inf or NaN
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	default: // zero or subnormal: mant × 2⁻²⁴
		f := float32(mant) / (1 << 24)
		if sign != 0 {
			f = -f
		}
		return f
	}
}
