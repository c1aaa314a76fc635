package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/router/classifier"
)

// solve returns the x of a·x = y for random well-conditioned systems of
// every size the fits use.
func TestSolve(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, len(classifier.Features{}), len(classifier.Corrections{})} {
		want := make([]float64, n)
		for i := range want {
			want[i] = rng.NormFloat64()
		}
		a := squareMatrix(n)
		y := make([]float64, n)
		for r := range n {
			for c := range n {
				a[r][c] = rng.NormFloat64()
			}
			a[r][r] += float64(n) // diagonally dominant enough
			for c := range n {
				y[r] += a[r][c] * want[c]
			}
		}
		got := solve(a, y)
		for i := range want {
			require.InDelta(t, want[i], got[i], 1e-9, "n=%d x[%d]", n, i)
		}
	}
}

// fitLogistic recovers the coefficients of samples drawn from a logistic
// model over the selected features, and leaves the others at 0.
func TestFitLogisticRecoversCoefficients(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	want := classifier.Features{-0.5, 2, -1, 0.8}
	use := make([]bool, len(want))
	use[0], use[1], use[2], use[3] = true, true, true, true
	ss := make([]sample, 20000)
	for i := range ss {
		ft := classifier.Features{1, rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		var z float64
		for k := range want {
			z += want[k] * ft[k]
		}
		ss[i] = sample{ft: ft, ok: true, inScope: true, correct: rng.Float64() < 1/(1+math.Exp(-z))}
	}
	got := fitLogistic(ss, 1, use)
	for k := range want {
		require.InDelta(t, want[k], got[k], 0.1, "coefficient %d", k)
	}
}
