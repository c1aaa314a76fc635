package jsonmodel_test

import (
	"bufio"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonmodel"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

var update = flag.Bool("update", false, "rewrite testdata/parse.golden.txt from the current output")

const goldenFile = "parse.golden.txt"

// TestParseGolden pins the parser's whole observable behaviour (the accepted Request or the
// returned *Error, cause included) over a generated corpus: mutations of realistic bodies (every
// member deleted, retyped, duplicated or respelled; truncations; limits; encodings) and the fuzz
// seed corpus. A change in any output is a change in behaviour; if it is intended, rerun with
// -update and review the diff of testdata/parse.golden.txt.
func TestParseGolden(t *testing.T) {
	cases := jsonmodel.GoldenCases(t)
	var b strings.Builder
	seen := map[string]bool{}
	first := map[string]string{} // output -> first case with it
	got := map[string]string{}
	for _, c := range cases {
		require.False(t, seen[c.Name], "duplicate case %s", c.Name)
		seen[c.Name] = true
		out := run(c)
		got[c.Name] = out
		if f, ok := first[out]; ok {
			out = sameAs + f
		} else {
			first[out] = c.Name
		}
		fmt.Fprintf(&b, "%s\t%s\n", c.Name, out)
	}
	path := filepath.Join("testdata", goldenFile)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test ./sidecar/protocol/jsonmodel -run TestParseGolden -update")
	wantOut := goldenLines(t, string(want))
	for _, c := range cases {
		w, ok := wantOut[c.Name]
		switch {
		case !ok:
			t.Errorf("%s: not in %s (run with -update)\n  got:  %s", c.Name, goldenFile, got[c.Name])
		case w != got[c.Name]:
			t.Errorf("%s:\n  want: %s\n  got:  %s", c.Name, w, got[c.Name])
		}
	}
	for name := range wantOut {
		if !seen[name] {
			t.Errorf("%s: in %s but no longer generated (run with -update)", name, goldenFile)
		}
	}
}

// sameAs starts an output recorded as that of an earlier case, to keep the golden file short.
const sameAs = "= "

// goldenLines reads the golden file into each case's output.
func goldenLines(t *testing.T, s string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, res, _ := strings.Cut(sc.Text(), "\t")
		if ref, ok := strings.CutPrefix(res, sameAs); ok {
			r, found := out[ref]
			require.True(t, found, "%s refers to unknown case %s", name, ref)
			res = r
		}
		out[name] = res
	}
	require.NoError(t, sc.Err())
	return out
}

// run parses c and renders the result.
func run(c jsonmodel.GoldenCase) string { return renderResult(parse(c)) }

// parse parses the case with the parser its binding names; body is the
// slice parsed, which the result may alias.
func parse(c jsonmodel.GoldenCase) (body []byte, r *protocol.Request, err *protocol.Error) {
	body = []byte(c.Body)
	if c.Method == "" {
		r, err = jsonrpcwire.ParseJSONRPC(c.V, c.CT, body, c.Lim)
	} else {
		r, err = httpjsonwire.ParseHTTP(c.V, c.Method, c.Target, c.CT, body, c.Lim)
	}
	return body, r, err
}

// renderResult prints every field of a parse result on one line. Raw JSON the result holds is
// shown as its position in body, which also pins that it aliases the body rather than a copy.
func renderResult(body []byte, r *protocol.Request, err *protocol.Error) string {
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "ERR %s %q", err.Code, err.Message)
		for _, k := range slices.Sorted(maps.Keys(err.Metadata)) {
			fmt.Fprintf(&b, " meta[%s]=%q", k, err.Metadata[k])
		}
		if err.ID != nil {
			fmt.Fprintf(&b, " id=%s", rawAt(body, err.ID, false))
		}
		if c := err.Unwrap(); c != nil {
			fmt.Fprintf(&b, " cause=%q", c.Error())
		}
		if r != nil {
			b.WriteString(" AND A REQUEST")
		}
		return b.String()
	}
	fmt.Fprintf(&b, "OK %s %s %s method=%q", r.Binding, r.Version, r.Operation, r.Method)
	if r.ID != nil {
		fmt.Fprintf(&b, " id=%s", rawAt(body, r.ID, false))
	}
	if r.Params != nil {
		fmt.Fprintf(&b, " params=%s", rawAt(body, r.Params, true))
	}
	fmt.Fprintf(&b, " tenant=%q task=%q config=%q", r.Tenant, r.TaskID, r.ConfigID)
	if m := r.Message; m != nil {
		fmt.Fprintf(&b, " msg{id=%q task=%q ctx=%q skill=%q", m.MessageID, m.TaskID, m.ContextID, m.SkillHint)
		if m.AcceptedOutputModes != nil {
			fmt.Fprintf(&b, " modes=%q", m.AcceptedOutputModes)
		}
		for _, p := range m.Parts {
			fmt.Fprintf(&b, " part{%s %q %q}", p.Kind, p.MediaType, p.Text)
		}
		b.WriteString("}")
	}
	return b.String()
}

// rawAt shows raw JSON held by a result: its offsets in body when it is a slice of body. With
// fromEnd the end is counted from the end of body ($), so that it stays put when a mutation
// inside the value changes its length.
func rawAt(body []byte, v jsontext.Value, fromEnd bool) string {
	if len(v) > 0 && cap(v) > 0 && cap(body) >= cap(v) {
		start := cap(body) - cap(v)
		if start+len(v) <= len(body) && &body[start] == &v[0] {
			if fromEnd {
				return fmt.Sprintf("[%d:$-%d]", start, len(body)-start-len(v))
			}
			return fmt.Sprintf("[%d:%d]", start, start+len(v))
		}
	}
	return fmt.Sprintf("copy(%q)", string(v))
}
