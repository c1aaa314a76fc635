package jsonmodel

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
)

// splitWithDecoder splits every object and array of a valid body into members and elements with
// a jsontext decoder, keyed by where each starts: what readObject and readArray must find.
func splitWithDecoder(t testing.TB, body []byte) map[int][]string {
	out := map[int][]string{}
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), jsontext.AllowDuplicateNames(true))
	var walk func() int
	// walk reads one value and returns where it starts.
	walk = func() int {
		kind := dec.PeekKind()
		if kind != '{' && kind != '[' {
			v, err := dec.ReadValue()
			require.NoError(t, err)
			return int(dec.InputOffset()) - len(v)
		}
		_, err := dec.ReadToken()
		require.NoError(t, err)
		start := int(dec.InputOffset()) - 1
		parts := []string{}
		for dec.PeekKind() != kind+2 {
			if kind == '{' {
				name, err := dec.ReadValue()
				require.NoError(t, err)
				parts = append(parts, string(name))
			}
			at := walk()
			parts = append(parts, string(body[at:dec.InputOffset()]))
		}
		_, err = dec.ReadToken()
		require.NoError(t, err)
		out[start] = parts
		return start
	}
	walk()
	return out
}

// splitWithScanner does the same with readObject and readArray, from spans or (fromSpans
// false) by scanning.
func splitWithScanner(t testing.TB, ps *parser, body []byte, want map[int][]string, fromSpans bool) map[int][]string {
	out := map[int][]string{}
	if !fromSpans {
		ps.spans = ps.spans[:0]
	}
	for start := range want {
		end := containerEnd(body, start)
		raw := jsontext.Value(body[start:end])
		parts := []string{}
		if raw.Kind() == '{' {
			obj := ps.scanObject(raw)
			for _, m := range obj {
				parts = append(parts, m.name, m.value)
			}
		} else {
			elems, ok := ps.readArray(raw)
			require.True(t, ok)
			for _, e := range elems {
				parts = append(parts, string(e))
			}
		}
		out[start] = parts
	}
	return out
}

// scanObject lists an object's raw names and values as readObject finds them, without its
// check for names of the same field.
func (ps *parser) scanObject(raw jsontext.Value) []struct{ name, value string } {
	var out []struct{ name, value string }
	for s := ps.scan(raw); s.more(); {
		name := s.value()
		s.colon()
		out = append(out, struct{ name, value string }{string(name), string(s.value())})
	}
	return out
}

// checkScanner compares readObject and readArray with a decoder on every object and array of
// body, when checkJSON accepts it.
func checkScanner(t testing.TB, body []byte) {
	ps := newParser()
	defer ps.release()
	if ps.checkJSON(body, 1<<10) != nil {
		return
	}
	want := splitWithDecoder(t, body)
	for _, fromSpans := range []bool{true, false} {
		got := splitWithScanner(t, ps, body, want, fromSpans)
		require.Equal(t, want, got, "fromSpans=%v body %q", fromSpans, body)
	}
}

func TestScannerMatchesDecoder(t *testing.T) {
	for _, c := range goldenCases(t) {
		checkScanner(t, []byte(c.body))
	}
	checkScanner(t, []byte(` { "a" : [ 1 , -2.5e3 , true , false , null , "x\"y\\" , { } , [ ] ] , "b\u0041" : { "c" : "\\\\\"" } } `))
	checkScanner(t, []byte(`[`+strings.Repeat(`[1,{"a":[]}],`, 2000)+`0]`)) // more spans than are recorded
}

func FuzzScanner(f *testing.F) {
	for _, c := range goldenCases(f) {
		f.Add(c.body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		checkScanner(t, []byte(body))
	})
}

func TestOffsetIn(t *testing.T) {
	body := make([]byte, 10, 20)
	off, ok := offsetIn(body, body[3:7])
	require.True(t, ok)
	require.Equal(t, 3, off)
	_, ok = offsetIn(body, body[3:5:5]) // capacity cut: not recognised
	require.False(t, ok)
	_, ok = offsetIn(body, bytes.Clone(body[3:7]))
	require.False(t, ok)
	_, ok = offsetIn(body, body[10:12]) // past len(body)
	require.False(t, ok)
	_, ok = offsetIn(body, nil)
	require.False(t, ok)
}

func TestSpansRecorded(t *testing.T) {
	body := []byte(` {"a":[1,{"b":{}}],"c":"}"} `)
	ps := newParser()
	defer ps.release()
	require.Nil(t, ps.checkJSON(body, 64))
	for _, tc := range []struct{ start, end int }{{1, 27}, {6, 18}, {9, 17}, {14, 16}} {
		end, ok := ps.spanEnd(tc.start)
		require.True(t, ok, "span at %d", tc.start)
		require.Equal(t, tc.end, end, "span at %d", tc.start)
	}
	_, ok := ps.spanEnd(2)
	require.False(t, ok)
	require.NotNil(t, ps.scan(body[6:18]).ps, "a slice of the body is scanned with its spans")
}
