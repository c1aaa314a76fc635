package classifier

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/router/classifier/wordvec"
)

// vehicleDocs are skills whose examples never use the words of the
// messages in TestWordVectorsKnowMeaning.
func vehicleDocs() []Doc {
	return []Doc{
		{ID: "rent-car", Name: "Rent a car", Examples: []string{
			"i want to rent a car", "book a car for me this weekend", "can i hire a car at the airport",
			"reserve a rental car", "i need a car for three days"}},
		{ID: "book-hotel", Name: "Book a hotel", Examples: []string{
			"i need a hotel room", "book me a room for two nights", "find a hotel near the station",
			"reserve a room downtown", "get me a place to stay tonight"}},
		{ID: "weather", Name: "Weather", Examples: []string{
			"will it rain tomorrow", "what is the forecast", "is it cold outside",
			"how hot will it be today", "do i need an umbrella"}},
	}
}

// TestWordVectorsKnowMeaning: a message whose content words no example
// has ("vehicle", "lodging", "cloudy") is ranked first for the skill whose
// examples say what they mean only through the word-vector block. (In a
// registry this small the out-of-domain guard still asks the caller: no
// content word of these messages is in the vocabulary.)
func TestWordVectorsKnowMeaning(t *testing.T) {
	with := New(vehicleDocs())
	cfg := DefaultConfig()
	cfg.Embed = 0
	without := NewWithConfig(vehicleDocs(), cfg)
	for text, want := range map[string]string{
		"a vehicle to drive": "rent-car",
		"lodging":            "book-hotel",
		"sunny or cloudy":    "weather",
	} {
		require.Equal(t, want, with.Classify(text, nil).Best, "%q with word vectors", text)
		require.NotEqual(t, want, without.Classify(text, nil).Best,
			"%q is ranked right without word vectors: the case would show nothing", text)
	}
}

func TestMeanVector(t *testing.T) {
	ix := New(vehicleDocs())
	buf := make([]float32, wordvec.Dim)
	norm := func(v []float32) float64 {
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		return math.Sqrt(n)
	}
	v := slices.Clone(ix.meanVector(buf, tokens("book a hotel room", nil)))
	require.NotNil(t, v)
	require.InDelta(t, 1, norm(v), 1e-5, "normalised")
	// Words the table lacks add nothing; none known: no vector.
	require.Nil(t, ix.meanVector(buf, tokens("zzqxv qqzzk", nil)))
	require.Nil(t, ix.meanVector(buf, nil))
	w := ix.meanVector(make([]float32, wordvec.Dim), tokens("book a hotel room zzqxv", nil))
	require.Equal(t, v, w)
	// A frequent word weighs little: "the" barely moves the vector.
	u := ix.meanVector(make([]float32, wordvec.Dim), tokens("the book a hotel room", nil))
	var dot float64
	for i := range u {
		dot += float64(u[i]) * float64(v[i])
	}
	require.Greater(t, dot, 0.999)
	// Off: no vector, and the linear model has no block for it.
	cfg := DefaultConfig()
	cfg.Embed = 0
	off := NewWithConfig(vehicleDocs(), cfg)
	require.Nil(t, off.meanVector(buf, tokens("book a hotel room", nil)))
	require.Equal(t, int(off.lin.offVec), len(off.lin.w)/off.lin.classes, "no word-vector features")
	require.Equal(t, int(ix.lin.offVec)+wordvec.Dim, len(ix.lin.w)/ix.lin.classes)
}
