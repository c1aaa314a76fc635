package cardsig_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/cardsig"
)

// TestRFC8785Vectors: each published input canonicalizes to its published
// output, byte for byte (testdata/rfc8785/SOURCE.md). Canonical is the
// function that produces card payloads; none of these inputs has a
// signatures member, so it canonicalizes the whole object.
func TestRFC8785Vectors(t *testing.T) {
	names, err := filepath.Glob("testdata/rfc8785/input/*.json")
	require.NoError(t, err)
	require.Len(t, names, 6)
	for _, in := range names {
		t.Run(filepath.Base(in), func(t *testing.T) {
			input, err := os.ReadFile(in)
			require.NoError(t, err)
			want, err := os.ReadFile(filepath.Join("testdata/rfc8785/output", filepath.Base(in)))
			require.NoError(t, err)
			got, err := cardsig.Canonical(input)
			if strings.HasPrefix(string(input), "[") {
				require.Error(t, err, "a card is an object")
				v := jsontext.Value(input)
				require.NoError(t, v.Canonicalize())
				got = v
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, string(want), string(got))
		})
	}
}

// numbers regenerates the RFC 8785 number test sequence (testdata/numgen.go
// of the reference repository): the static values, 2000 serial values, then
// SHA-256-chained doubles.
func numbers(t *testing.T) func() float64 {
	f, err := os.Open("testdata/rfc8785/numgen-static.txt")
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	var static []uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		u, err := strconv.ParseUint(strings.TrimPrefix(sc.Text(), "0x"), 16, 64)
		require.NoError(t, err)
		static = append(static, u)
	}
	require.NoError(t, sc.Err())
	require.Len(t, static, 168)
	var (
		idx   int
		data  []byte
		block [sha256.Size]byte
	)
	return func() float64 {
		const numSerial = 2000
		var f float64
		switch {
		case idx < len(static):
			f = math.Float64frombits(static[idx])
		case idx < len(static)+numSerial:
			f = math.Float64frombits(0x0010000000000000 + uint64(idx-len(static)))
		default:
			for f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
				if len(data) == 0 {
					block = sha256.Sum256(block[:])
					data = block[:]
				}
				f = math.Float64frombits(binary.LittleEndian.Uint64(data))
				data = data[8:]
			}
		}
		idx++
		return f
	}
}

// TestRFC8785Numbers: the canonical form of each number of the published
// sequence, hashed as the reference file's lines, matches the published
// SHA-256 of its first 1,000, 10,000 and 100,000 lines.
func TestRFC8785Numbers(t *testing.T) {
	want := map[int]string{
		1000:   "be18b62b6f69cdab33a7e0dae0d9cfa869fda80ddc712221570f9f40a5878687",
		10000:  "b9f7a8e75ef22a835685a52ccba7f7d6bdc99e34b010992cbc5864cd12be6892",
		100000: "22776e6d4b49fa294a0d0f349268e5c28808fe7e0cb2bcbe28f63894e494d4c7",
	}
	next := numbers(t)
	h := sha256.New()
	var line []byte
	for n := 1; n <= 100000; n++ {
		f := next()
		// Canonicalize a JSON number that round-trips to f, as a card's
		// number would be read and canonicalized.
		v := jsontext.Value(`{"n":` + strconv.FormatFloat(f, 'g', -1, 64) + `}`)
		require.NoError(t, v.Canonicalize())
		num := strings.TrimSuffix(strings.TrimPrefix(string(v), `{"n":`), "}")
		line = strconv.AppendUint(line[:0], math.Float64bits(f), 16)
		line = append(line, ',')
		line = append(line, num...)
		line = append(line, '\n')
		_, _ = h.Write(line)
		if sum, ok := want[n]; ok {
			require.Equal(t, sum, hex.EncodeToString(h.Sum(nil)), "first %d lines", n)
		}
	}
}
