package wordvec

import (
	"encoding/binary"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// vec is the word's dequantized vector in the default table.
func vec(t *testing.T, word string) []float32 {
	t.Helper()
	v := make([]float32, Dim)
	r, ok := Default().Rank(word)
	require.True(t, ok, word)
	require.True(t, Default().AddRank(v, r, 1), word)
	return v
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

func TestEmbeddedTable(t *testing.T) {
	tab, err := Parse([]byte(embedded))
	require.NoError(t, err)
	require.Equal(t, tableWords, tab.Len())
	require.Equal(t, tableWords, Default().Len())
	require.Same(t, Default(), Default(), "parsed once")

	for word, maxRank := range map[string]int{"the": 1, "flight": 2000, "reservation": 10000, "invoice": 50000, "zebra": 100000} {
		r, ok := Default().Rank(word)
		require.True(t, ok, word)
		require.LessOrEqual(t, r, maxRank, word)
		r2, ok := tab.Rank(word)
		require.True(t, ok)
		require.Equal(t, r, r2, "Parse and Default read the same table")
	}
	r, _ := Default().Rank("the")
	require.Equal(t, 1, r)

	for _, word := range []string{"zzzzqx", "Flight", "flight ", "flights!", "", "\n", "the\nthe", "a\x00", "é"} {
		r, ok := Default().Rank(word)
		require.False(t, ok, "%q", word)
		require.Zero(t, r, "%q", word)
	}
}

// TestEveryWordFound: each word of the words block is found at its own position with a rank of
// its own, and the words beside it (it with a letter more, with its last letter dropped or
// changed) are found exactly when they are in the block too.
func TestEveryWordFound(t *testing.T) {
	tab := Default()
	words := strings.Split(strings.TrimSuffix(tab.words, "\n"), "\n")
	require.Len(t, words, tab.Len())
	in := make(map[string]bool, len(words))
	for _, w := range words {
		in[w] = true
	}
	seen := make([]bool, tab.Len()+1)
	for i, w := range words {
		pos, ok := tab.find(w)
		require.True(t, ok, w)
		require.Equal(t, i, pos, w)
		r, ok := tab.Rank(w)
		require.True(t, ok, w)
		require.False(t, seen[r], "rank %d twice", r)
		seen[r] = true
		last := w[len(w)-1]
		for _, near := range []string{w + "a", w + "z", w[:len(w)-1], w[:len(w)-1] + string(rune(last+1)), w[:len(w)-1] + string(rune(last-1))} {
			_, ok := tab.Rank(near)
			require.Equal(t, in[near], ok, "%q beside %q", near, w)
		}
	}
}

// TestQuantizationBound: the dequantized vectors of the golden words are within half a
// quantization step (s/14, s the word's largest absolute component) of the source's.
func TestQuantizationBound(t *testing.T) {
	f, err := os.Open("testdata/sample.txt")
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	words, vecs, err := readGlove(f, 10)
	require.NoError(t, err)
	require.Len(t, words, 4)
	for i, w := range words {
		got := vec(t, w)
		var s float64
		for _, x := range vecs[i] {
			s = max(s, math.Abs(float64(x)))
		}
		bound := s/14*(1+1.0/1024) + 1e-6
		var worst float64
		for k, x := range vecs[i] {
			d := math.Abs(float64(got[k]) - float64(x))
			require.LessOrEqual(t, d, bound, "%s component %d: %v, source %v", w, k, got[k], x)
			worst = max(worst, d)
		}
		require.Greater(t, worst, 0.0, "%s: the vector is quantized", w)
		require.Greater(t, cosine(got, vecs[i]), 0.95, "%s: the dequantized vector points the source's way", w)
	}
}

func TestCosineSanity(t *testing.T) {
	for _, c := range []struct{ word, near, far string }{
		{"flight", "plane", "invoice"},
		{"flight", "airline", "rain"},
		{"invoice", "payment", "flight"},
		{"invoice", "refund", "weather"},
		{"reservation", "booking", "forecast"},
		{"hotel", "booking", "bill"},
		{"weather", "forecast", "ticket"},
	} {
		near, far := cosine(vec(t, c.word), vec(t, c.near)), cosine(vec(t, c.word), vec(t, c.far))
		require.Greater(t, near, far, "cos(%s, %s) = %.3f > cos(%s, %s) = %.3f", c.word, c.near, near, c.word, c.far, far)
	}
}

func TestAddRank(t *testing.T) {
	tab := Default()
	r, ok := tab.Rank("flight")
	require.True(t, ok)
	once, twice := make([]float32, Dim), make([]float32, Dim)
	require.True(t, tab.AddRank(once, r, 0.5))
	require.True(t, tab.AddRank(twice, r, 0.5))
	require.True(t, tab.AddRank(twice, r, 0.5))
	one := vec(t, "flight")
	for k := range Dim {
		require.InDelta(t, one[k]/2, once[k], 1e-6, "weight scales the vector")
		require.InDelta(t, 2*once[k], twice[k], 1e-6, "two calls add twice")
	}
	// Adding onto something: the sum.
	sum := vec(t, "plane")
	require.True(t, tab.AddRank(sum, r, 1))
	plane := vec(t, "plane")
	for k := range Dim {
		require.InDelta(t, plane[k]+one[k], sum[k], 1e-6)
	}
	// A dst of another length, and ranks out of range, are refused, dst unchanged.
	for _, n := range []int{0, 1, Dim - 1, Dim + 1} {
		dst := make([]float32, n)
		require.False(t, tab.AddRank(dst, r, 1), n)
		require.Equal(t, make([]float32, n), dst)
	}
	require.False(t, tab.AddRank(nil, r, 1))
	for _, bad := range []int{0, -1, tab.Len() + 1} {
		dst := make([]float32, Dim)
		require.False(t, tab.AddRank(dst, bad, 1), bad)
		require.Equal(t, make([]float32, Dim), dst)
	}
	require.True(t, tab.AddRank(make([]float32, Dim), tab.Len(), 1), "the last rank is in range")
}

func TestNoAllocations(t *testing.T) {
	tab := Default()
	dst := make([]float32, Dim)
	words := []string{"flight", "zzzzqx", "the", "Flight", "invoice", ""}
	require.Zero(t, testing.AllocsPerRun(100, func() {
		for _, w := range words {
			if r, ok := tab.Rank(w); ok {
				tab.AddRank(dst, r, 0.5)
			}
		}
	}))
}

// tiny is a small table written by the generator's writer: words in frequency order.
func tiny(t *testing.T) ([]string, [][]float32, []byte) {
	t.Helper()
	words := []string{"the", "of", "flight", "a", "zebra", "plane", "ab", "abc", "invoice", "z", "b", "ba"}
	vecs := make([][]float32, len(words))
	for i := range words {
		vecs[i] = make([]float32, Dim)
		for k := range Dim {
			vecs[i][k] = float32(math.Sin(float64(i*Dim+k))) * float32(i+1) / 3
		}
	}
	vecs[3] = make([]float32, Dim) // a zero vector
	data, err := writeTable(words, vecs)
	require.NoError(t, err)
	return words, vecs, data
}

func TestTinyTableRoundTrip(t *testing.T) {
	words, vecs, data := tiny(t)
	tab, err := Parse(data)
	require.NoError(t, err)
	require.Equal(t, len(words), tab.Len())
	for i, w := range words {
		r, ok := tab.Rank(w)
		require.True(t, ok, w)
		require.Equal(t, i+1, r, w)
		got := make([]float32, Dim)
		require.True(t, tab.AddRank(got, r, 1))
		var s float64
		for _, x := range vecs[i] {
			s = max(s, math.Abs(float64(x)))
		}
		for k, x := range vecs[i] {
			require.InDelta(t, x, got[k], s/14*(1+1.0/1024)+1e-6, "%s[%d]", w, k)
		}
	}
	for _, w := range []string{"aa", "abcd", "bb", "zz", "c", "th", "thee"} {
		_, ok := tab.Rank(w)
		require.False(t, ok, w)
	}
}

func TestWriterRejects(t *testing.T) {
	v := make([]float32, Dim)
	for name, c := range map[string]struct {
		words []string
		vecs  [][]float32
	}{
		"none":           {nil, nil},
		"twice":          {[]string{"a", "a"}, [][]float32{v, v}},
		"upper case":     {[]string{"A"}, [][]float32{v}},
		"empty word":     {[]string{""}, [][]float32{v}},
		"short vector":   {[]string{"a"}, [][]float32{v[:Dim-1]}},
		"vectors differ": {[]string{"a", "b"}, [][]float32{v}},
		"nan":            {[]string{"a"}, [][]float32{append([]float32{float32(math.NaN())}, v[1:]...)}},
		"huge":           {[]string{"a"}, [][]float32{append([]float32{1e6}, v[1:]...)}},
	} {
		_, err := writeTable(c.words, c.vecs)
		require.Error(t, err, name)
	}
}

func TestParseRejects(t *testing.T) {
	_, _, data := tiny(t)
	mod := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), data...))
	}
	n := binary.LittleEndian.Uint32(data[8:])
	wordsAt := headerLen + int(n)*rankLen
	vectorsAt := len(data) - int(n)*vectorLen
	type bad struct {
		data []byte
		want string // in the error
	}
	cases := map[string]bad{
		"empty":         {[]byte{}, "shorter than"},
		"nil":           {nil, "shorter than"},
		"bad magic":     {mod(func(b []byte) []byte { b[0] = 'X'; return b }), "bad magic"},
		"version":       {mod(func(b []byte) []byte { b[4] = 2; return b }), "version 2"},
		"dim":           {mod(func(b []byte) []byte { b[6] = 50; return b }), "dimension 50"},
		"zero words":    {mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 0); return b }), "word count 0"},
		"more words":    {mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], n+1); return b }), "want"},
		"fewer words":   {mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], n-1); return b }), "want"},
		"huge count":    {mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], math.MaxUint32); return b }), "word count"},
		"words length":  {mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], math.MaxUint32); return b }), "bytes, want"},
		"trailing byte": {append(append([]byte(nil), data...), 0), "bytes, want"},
		"rank zero":     {mod(func(b []byte) []byte { b[headerLen], b[headerLen+1], b[headerLen+2] = 0, 0, 0; return b }), "rank 0,"},
		"rank too big":  {mod(func(b []byte) []byte { b[headerLen] = byte(n + 1); return b }), "rank 13,"},
		"rank twice":    {mod(func(b []byte) []byte { copy(b[headerLen:], b[headerLen+rankLen:headerLen+2*rankLen]); return b }), "not a new rank"},
		"upper case":    {mod(func(b []byte) []byte { b[wordsAt] = 'A'; return b }), "byte 0x41"},
		"unsorted":      {mod(func(b []byte) []byte { b[wordsAt] = 'z'; return b }), "not after"},
		"empty word":    {mod(func(b []byte) []byte { b[wordsAt] = '\n'; return b }), "is empty"},
		"no newline":    {mod(func(b []byte) []byte { b[vectorsAt-1] = 'z'; return b }), "holds 11 words"},
		"nan scale":     {mod(func(b []byte) []byte { b[vectorsAt], b[vectorsAt+1] = 0x01, 0x7e; return b }), "scale NaN"},
		"inf scale":     {mod(func(b []byte) []byte { b[vectorsAt], b[vectorsAt+1] = 0x00, 0x7c; return b }), "scale +Inf"},
		"neg scale":     {mod(func(b []byte) []byte { b[vectorsAt+1] |= 0x80; return b }), "scale -"},
	}
	for i := range len(data) {
		cases["prefix "+strconv.Itoa(i)] = bad{data[:i], "bytes"}
	}
	for name, c := range cases {
		require.NotPanics(t, func() {
			tab, err := Parse(c.data)
			require.Error(t, err, name)
			require.Nil(t, tab, name)
			require.True(t, strings.HasPrefix(err.Error(), "wordvec: "), "%s: %v", name, err)
			require.Contains(t, err.Error(), c.want, name)
		}, name)
	}
	_, err := Parse(data)
	require.NoError(t, err, "the unmodified table parses")
}

// TestDefaultHeap: loading the table keeps a small heap (the table is read in place).
func TestDefaultHeap(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tab, err := parse(embedded)
	require.NoError(t, err)
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "bytes allocated by loading")
	require.Equal(t, tableWords, tab.Len())
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parse(embedded); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookup is a word's vector as the classifier reads it: Rank, then AddRank.
func BenchmarkLookup(b *testing.B) {
	tab := Default()
	dst := make([]float32, Dim)
	words := []string{"flight", "invoice", "the", "reservation", "zzzzqx", "booking", "please", "refund"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if r, ok := tab.Rank(words[i%len(words)]); ok {
			tab.AddRank(dst, r, 0.5)
		}
		i++
	}
}
