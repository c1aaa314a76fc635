package redisstore

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
)

// TestPositionKeyOrder: the Redis index's member keys order bytewise as
// Position.Compare orders, and parse back, for times around the edges
// (before 1970, the zero time, equal seconds or nanoseconds).
func TestPositionKeyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 7))
	secs := []int64{math.MinInt64, time.Time{}.Unix(), -1, 0, 1, 100, 1_800_000_000, math.MaxInt64}
	var ps []tasks.Position
	for range 2000 {
		var p tasks.Position
		p.Sec = secs[rng.IntN(len(secs))]
		if rng.IntN(3) == 0 {
			p.Sec = rng.Int64() - math.MaxInt64/2
		}
		p.Nsec = []uint32{0, 1, 999_999_999, rng.Uint32N(1e9)}[rng.IntN(4)]
		for i := range p.Digest {
			p.Digest[i] = byte(rng.IntN(3) * 127)
		}
		ps = append(ps, p)
	}
	ps = append(ps, tasks.PositionOf(tasks.Binding{TaskID: "z"}), tasks.PositionOf(tasks.Binding{TaskID: "a", CreatedAt: time.Unix(-5, 7)}))
	for _, p := range ps {
		k := positionKey(p)
		require.Len(t, k, keyLen)
		back, ok := positionOfKey(k)
		require.True(t, ok)
		require.Equal(t, p, back)
	}
	for i := range ps {
		a, b := ps[i], ps[rng.IntN(len(ps))]
		require.Equal(t, a.Compare(b), strings.Compare(positionKey(a), positionKey(b)), "%+v %+v", a, b)
	}
	byKey := slices.Clone(ps)
	slices.SortFunc(byKey, func(a, b tasks.Position) int { return strings.Compare(positionKey(a), positionKey(b)) })
	require.True(t, slices.IsSortedFunc(byKey, tasks.Position.Compare))
	for _, bad := range []string{"", "zz", strings.Repeat("g", keyLen), strings.Repeat("0", keyLen-1)} {
		_, ok := positionOfKey(bad)
		require.False(t, ok, bad)
	}
}
