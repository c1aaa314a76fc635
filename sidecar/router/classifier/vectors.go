package classifier

import (
	"math"

	"github.com/capgate/capgate/sidecar/router/classifier/wordvec"
)

// The linear model's word-vector block: what the words of a message mean,
// where the other blocks only know which words it has. A message's mean
// word vector (GloVe 6B, 100 dimensions, the 100,000 most frequent words;
// wordvec) lets the regression rank "a vehicle to drive" for a skill whose
// examples say "rent a car" and never "vehicle", as a lexical model with
// ten examples per skill cannot (TestWordVectorsKnowMeaning). Each word
// weighs r / (r + EmbedRank) by its frequency rank r in the vectors'
// corpus, so that "the", "my" and "is" (ranks 1–100) weigh almost nothing
// and rarer words about 1 (the smooth inverse frequency weighting of Arora,
// Liang and Ma, 2017, with the rank standing for the frequency); the sum is
// L2-normalised and weighted by Config.Embed. Chosen on folds of the
// learning curve's usage block (docs/routing.md, "At ten examples per
// skill").

// meanVector sets dst (len wordvec.Dim) to the message's normalised mean
// word vector and returns it, or nil when the block is off or no word of
// ts is in the table.
func (ix *Index) meanVector(dst []float32, ts []token) []float32 {
	if ix.cfg.Embed == 0 {
		return nil
	}
	clear(dst)
	tab := wordvec.Default()
	for _, t := range ts {
		if r, ok := tab.Rank(t.word); ok {
			tab.AddRank(dst, r, float32(float64(r)/(float64(r)+ix.cfg.EmbedRank)))
		}
	}
	var n float64
	for _, v := range dst {
		n += float64(v) * float64(v)
	}
	if n == 0 { // no word in the table (or vectors that cancel out)
		return nil
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range dst {
		dst[i] *= inv
	}
	return dst
}
