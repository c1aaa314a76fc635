package jsonmodel

// The validating JSON scanner's invariants (json.go, scan.go), checked over a generated corpus,
// the golden corpus and the fuzz corpora of testdata/fuzz:
//
//  1. Acceptance: checkJSON(body, maxDepth) accepts exactly the bodies go-json-experiment's
//     jsontext accepts with its default, strict options (valid UTF-8, no duplicate object
//     member names after unescaping, one value and white space around it), whose objects and
//     arrays nest at most maxDepth deep, and which are not empty. encoding/json accepts every
//     body it accepts.
//  2. Depth limit: a valid body nested deeper than maxDepth is refused as InvalidRequest, naming
//     the limit; an invalid one may be too, when it nests too deep before its first other
//     problem; every other refusal is a ParseError.
//  3. Duplicate-member rule: exact duplicates (after unescaping) within one object are refused,
//     as ParseError "duplicate object key", wherever the object is; equal names in different
//     objects and names differing in case are not checkJSON's business (readObject's
//     same-field rule refuses the latter for the objects it reads).
//  4. Errors are our own: a refusal's message never carries the library's text, and the error
//     renders as valid JSON.
//  5. Size limit: a parse refuses a body over Limits.MaxBodyBytes as PayloadTooLarge before
//     reading it, and never refuses a body within the limit for its size.
//  6. Spans: on an accepted body, every recorded span is an object or array of the body, start
//     to end, and every object and array down to maxSpanDepth is recorded (within the
//     budget of maxPooledLen spans).
//  7. Scanner: on an accepted body, readObject and readArray split every object and array as a
//     jsontext decoder does, from spans or by scanning (checkScanner); on any other input the
//     scanner ends and stays within its slice.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

// invariantDepths are the maxDepth limits every body is checked under.
var invariantDepths = []int{1, 2, 4, 16, 1 << 10}

// refDepth is how deep the objects and arrays of a valid body nest (a scalar: 0), read with
// encoding/json's token stream, independent of the decoder checkJSON uses (and of duplicate
// names, which a decoded map would merge).
func refDepth(t testing.TB, body []byte) int {
	dec := json.NewDecoder(bytes.NewReader(body))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return deepest
		}
		require.NoError(t, err, "%q", body)
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// checkInvariants checks invariants 1–4, 6 and 7 for one body.
func checkInvariants(t testing.TB, body []byte) {
	strict := jsontext.Value(body).IsValid()
	lenient := jsontext.Value(body).IsValid(jsontext.AllowDuplicateNames(true))
	depth := -1
	if lenient {
		depth = refDepth(t, body)
	}
	for _, maxDepth := range invariantDepths {
		ps := newParser()
		err := ps.checkJSON(body, maxDepth)
		switch {
		case strict && depth <= maxDepth:
			require.Nil(t, err, "maxDepth %d, body %q", maxDepth, body)
			require.True(t, json.Valid(body), "encoding/json accepts %q", body)
			checkSpans(t, ps, body)
		case strict: // deeper than the limit
			require.NotNil(t, err, "maxDepth %d, body %q", maxDepth, body)
			require.Equal(t, protocol.InvalidRequest, err.Code, "depth %d over %d: %q", depth, maxDepth, body)
			require.Contains(t, err.Message, "nests deeper than the limit of "+strconv.Itoa(maxDepth))
		case lenient: // valid but for duplicate names: the first problem in the body is reported
			require.NotNil(t, err, "maxDepth %d, body %q", maxDepth, body)
			if depth <= maxDepth || err.Code == protocol.ParseError {
				require.Equal(t, protocol.ParseError, err.Code, "%q", body)
				require.True(t, strings.HasPrefix(err.Message, "duplicate object key "), "%q: %s", body, err.Message)
			} else {
				require.Equal(t, protocol.InvalidRequest, err.Code, "%q", body)
				require.Contains(t, err.Message, "nests deeper than the limit of "+strconv.Itoa(maxDepth))
			}
		default:
			require.NotNil(t, err, "maxDepth %d, body %q", maxDepth, body)
			require.Contains(t, []protocol.Code{protocol.ParseError, protocol.InvalidRequest}, err.Code, "%q", body)
			if err.Code == protocol.InvalidRequest {
				require.Contains(t, err.Message, "nests deeper than the limit")
			}
		}
		if err != nil {
			for _, lib := range []string{"jsontext", "json:", "offset", "invalid character", "syntactic"} {
				require.NotContains(t, err.Message, lib, "%q", body)
			}
			require.True(t, jsontext.Value(errorJSON(err)).IsValid())
		}
		ps.release()
	}
	checkScanner(t, body)
	checkScannerBounded(t, body)
}

// errorJSON renders what the JSON bindings' error bodies carry of e (its message and its
// details), the way they write it.
func errorJSON(e *protocol.Error) []byte {
	b := AppendQuote([]byte(`{"message":`), e.Message)
	b = append(b, `,"details":[`...)
	return append(AppendErrorDetails(b, e, true), "]}"...)
}

// checkSpans checks invariant 6 on a body checkJSON has just accepted with ps.
func checkSpans(t testing.TB, ps *parser, body []byte) {
	for _, s := range ps.spans {
		if c := body[s.start]; (c != '{' && c != '[') || containerEnd(body, s.start) != s.end {
			t.Fatalf("span %d–%d of %q is not an object or array", s.start, s.end, body)
		}
	}
	if len(ps.spans) >= maxPooledLen {
		return // over budget: the rest is scanned
	}
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			break
		}
		if k := tok.Kind(); (k == '{' || k == '[') && dec.StackDepth() <= maxSpanDepth {
			start := int(dec.InputOffset()) - 1
			if _, ok := ps.spanEnd(start); !ok {
				t.Fatalf("object or array at %d of %q (depth %d) not recorded", start, body, dec.StackDepth())
			}
		}
	}
}

// checkScannerBounded checks the other half of invariant 7: on any input, the scanner ends and
// every value it returns is within the slice it scans.
func checkScannerBounded(t testing.TB, body []byte) {
	scanned := 0
	for i, c := range body {
		if c != '{' && c != '[' {
			continue
		}
		if scanned++; scanned > 8 {
			break // the first containers are enough: the rest are within them
		}
		raw := body[i:]
		ps := newParser() // no body: nothing is read from spans
		s := ps.scan(raw)
		for n := 0; s.more(); n++ { // a panic out of bounds fails the test too
			if n > len(raw) {
				t.Fatalf("the scanner does not end on %q", raw)
			}
			_ = s.value()
			if c == '{' {
				s.colon()
				_ = s.value()
			}
			if s.i > len(raw) {
				t.Fatalf("the scanner reads past the end of %q", raw)
			}
		}
		ps.release()
	}
}

// genJSON generates bodies that are mostly valid JSON, from a seeded source: objects whose
// names repeat (exactly, escaped or in another case), nesting up to about 12 deep, strings with
// escapes, non-ASCII and the odd invalid byte, numbers valid and not, and white space; then
// some of them mutated (cut, a byte changed, inserted or dropped, a second value after).
type genJSON struct{ r *rand.Rand }

var genNames = []string{`"a"`, `"b"`, `"\u0061"`, `"A"`, `"task_id"`, `"taskId"`, `""`, `"é"`, `"\u00e9"`, `"e\u0301"`, `"k"`, `"\u212a"`}

var genScalars = []string{`0`, `-1`, `1.5e3`, `-0.0`, `1E-2`, `true`, `false`, `null`, `""`, `"x"`, `"\"q\\"`,
	`"\ud83d\ude00"`, `"😀"`, `"tab\there"`, `"\u0000"`, `"\/"`,
	// not JSON:
	`01`, `1.`, `-`, `+1`, `.5`, `tru`, `nul`, `'s'`, `"\x"`, `"\ud800"`, "\"\x01\"", "\"\xff\"", `NaN`, `1e`}

func (g genJSON) space() string {
	if g.r.IntN(4) > 0 {
		return ""
	}
	return []string{" ", "\n", "\t", "\r\n  ", "\v", "\u00a0"}[g.r.IntN(6)] // the last two are not JSON space
}

func (g genJSON) value(b *strings.Builder, depth int) {
	b.WriteString(g.space())
	switch k := g.r.IntN(10); {
	case depth > 0 && k < 3:
		b.WriteByte('{')
		for i := range g.r.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(g.space() + genNames[g.r.IntN(len(genNames))] + g.space() + ":")
			g.value(b, depth-1)
		}
		b.WriteString(g.space() + "}")
	case depth > 0 && k < 6:
		b.WriteByte('[')
		for i := range g.r.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			g.value(b, depth-1)
		}
		b.WriteString(g.space() + "]")
	default:
		// Mostly valid scalars: the invalid ones are the last 13.
		n := len(genScalars) - 13
		if g.r.IntN(20) == 0 {
			n = len(genScalars)
		}
		b.WriteString(genScalars[g.r.IntN(n)])
	}
	b.WriteString(g.space())
}

func (g genJSON) body() []byte {
	var b strings.Builder
	g.value(&b, 1+g.r.IntN(12))
	body := []byte(b.String())
	switch g.r.IntN(8) {
	case 0:
		return body[:g.r.IntN(len(body)+1)]
	case 1:
		if len(body) > 0 {
			const bytes = "{}[]\",:0 \\\x00\xc3"
			body[g.r.IntN(len(body))] = bytes[g.r.IntN(len(bytes))]
		}
	case 2:
		i := g.r.IntN(len(body) + 1)
		const bytes = "{}[]\",:0 \\"
		body = append(body[:i:i], append([]byte{bytes[g.r.IntN(len(bytes))]}, body[i:]...)...)
	case 3:
		if len(body) > 0 {
			i := g.r.IntN(len(body))
			body = append(body[:i:i], body[i+1:]...)
		}
	case 4:
		body = append(body, []string{` 1`, `{}`, `"x"`, ` `, `x`, `,`}[g.r.IntN(6)]...)
	}
	return body
}

// generatedCorpus is the generated bodies, plus bodies at and around each depth limit and with
// duplicates deep down.
func generatedCorpus() [][]byte {
	g := genJSON{rand.New(rand.NewPCG(23, 5))}
	var out [][]byte
	for range 2000 {
		out = append(out, g.body())
	}
	for _, d := range []int{1, 2, 3, 4, 5, 16, 17, 40} {
		out = append(out,
			[]byte(strings.Repeat("[", d)+strings.Repeat("]", d)),
			[]byte(strings.Repeat(`{"a":`, d)+"1"+strings.Repeat("}", d)),
			[]byte(strings.Repeat(`[{"a":`, d)+"1"+strings.Repeat("}]", d)),
			[]byte(strings.Repeat("[", d)+`{"a":1,"a":2}`+strings.Repeat("]", d)),
			[]byte(strings.Repeat("[", d)+`{"a":1,"\u0061":2}`+strings.Repeat("]", d)),
			[]byte(strings.Repeat("[", d)+strings.Repeat("]", d-1)), // unclosed
		)
	}
	// Many members: the name stack switches to a set past 16 names.
	var many strings.Builder
	many.WriteByte('{')
	for i := range 40 {
		fmt.Fprintf(&many, `"n%d":{"n%d":[]},`, i, i)
	}
	out = append(out, []byte(many.String()+`"n0":1}`), []byte(many.String()+`"n40":1}`))
	out = append(out, []byte(""), []byte("  \n"), []byte(`{} `), []byte(` {}`), []byte(`{}{}`), []byte(`{}x`), []byte("{}\x00"))
	return out
}

// fuzzCorpus is every string argument of the seed files of this package's fuzz targets.
func fuzzCorpus(t testing.TB) [][]byte {
	var out [][]byte
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "*", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "the fuzz corpus is found")
	for _, name := range files {
		f, err := os.Open(name)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "string(") || !strings.HasSuffix(line, ")") {
				continue
			}
			s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "string("), ")"))
			require.NoError(t, err, "%s: %s", name, line)
			out = append(out, []byte(s))
		}
		require.NoError(t, sc.Err())
		require.NoError(t, f.Close())
	}
	return out
}

func TestJSONInvariants(t *testing.T) {
	var corpus [][]byte
	corpus = append(corpus, generatedCorpus()...)
	corpus = append(corpus, fuzzCorpus(t)...)
	for _, c := range goldenCases(t) {
		corpus = append(corpus, []byte(c.body))
	}
	kinds := map[string]int{}
	for _, body := range corpus {
		checkInvariants(t, body)
		switch {
		case jsontext.Value(body).IsValid():
			kinds["valid"]++
		case jsontext.Value(body).IsValid(jsontext.AllowDuplicateNames(true)):
			kinds["duplicate names"]++
		case !utf8.Valid(body):
			kinds["invalid UTF-8"]++
		default:
			kinds["not JSON"]++
		}
	}
	// The corpus exercises every class of body.
	for _, k := range []string{"valid", "duplicate names", "invalid UTF-8", "not JSON"} {
		require.Greater(t, kinds[k], 20, "%s bodies in the corpus: %v", k, kinds)
	}
}

func FuzzJSONInvariants(f *testing.F) {
	for _, body := range generatedCorpus()[:200] {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkInvariants(t, body)
	})
}
