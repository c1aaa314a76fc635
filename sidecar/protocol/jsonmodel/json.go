package jsonmodel

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"slices"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
)

// parser holds what one parse reuses: the decoder that validates the body, the names of its open
// objects, where its shallow objects and arrays end, and the members and elements of those the
// parser reads. Parsers are pooled; nothing a parse returns refers to a parser's memory.
type parser struct {
	body    []byte
	in      bytes.Buffer // the body, read in place by dec
	dec     *jsontext.Decoder
	names   nameStack
	spans   []span // in body order
	open    []int  // index in spans of each open object or array, -1 when not recorded
	members []member
	elems   []jsontext.Value
}

// span is where an object or array of the body starts and ends.
type span struct{ start, end int }

// maxSpanDepth is the deepest object or array whose span is recorded: the parser reads objects
// down to a 0.3 part's file object (envelope, params, message, parts, part, file) and skips their
// members' values, one level deeper. Deeper values are skipped with the value holding them.
const maxSpanDepth = 7

// decodeOptions leaves duplicate names to checkJSON, which reports them in its own words.
var decodeOptions = jsontext.AllowDuplicateNames(true)

var parsers = sync.Pool{New: func() any {
	p := new(parser)
	p.dec = jsontext.NewDecoder(&p.in, decodeOptions)
	return p
}}

// maxPooledLen bounds the slices a parser keeps for reuse, so that one huge body does not pin
// its high-water mark in the pool.
const maxPooledLen = 1 << 10

func newParser() *parser { return parsers.Get().(*parser) }

// release returns ps to the pool, first dropping every reference into the body it parsed.
func (ps *parser) release() {
	ps.body = nil
	ps.in = bytes.Buffer{}
	ps.dec.Reset(&ps.in, decodeOptions)
	ps.names.reset()
	ps.spans = clearForReuse(ps.spans)
	ps.open = clearForReuse(ps.open[:0])
	ps.members = clearForReuse(ps.members) // a parse only appends: [len:cap) is clear
	ps.elems = clearForReuse(ps.elems)
	parsers.Put(ps)
}

// clearForReuse empties s for reuse, or drops it when it is too large to keep. Elements past
// len(s) must be clear already.
func clearForReuse[T any](s []T) []T {
	if cap(s) > maxPooledLen {
		return nil
	}
	clear(s)
	return s[:0]
}

// checkJSON validates a whole body once, before anything reads it: well-formed JSON, valid UTF-8,
// no duplicate object key anywhere (exact match), nesting within maxDepth, nothing after the
// value. Error messages are our own; the library's text and offsets are never shown. Everything
// else reads the body with the scanner of scan.go, which relies on this validation and on the
// spans recorded here.
func (ps *parser) checkJSON(body []byte, maxDepth int) *protocol.Error {
	if len(trimSpace(body)) == 0 {
		return protocol.Errorf(protocol.ParseError, "request body is empty")
	}
	if !utf8.Valid(body) {
		return protocol.Errorf(protocol.ParseError, "request body is not valid UTF-8")
	}
	// A bytes.Buffer is read in place: no copy, and offsets index body.
	ps.body = body
	ps.in = *bytes.NewBuffer(body)
	ps.dec.Reset(&ps.in, decodeOptions)
	dec := ps.dec
	for {
		prevEnd := dec.InputOffset()
		tok, err := dec.ReadToken()
		if err != nil {
			return syntaxError(err)
		}
		depth := dec.StackDepth()
		switch tok.Kind() {
		case '{', '[':
			if depth > maxDepth {
				return protocol.Errorf(protocol.InvalidRequest, "request body nests deeper than the limit of %d levels", maxDepth)
			}
			if tok.Kind() == '{' {
				ps.names.push()
			}
			ps.openSpan(int(dec.InputOffset())-1, depth)
		case '}', ']':
			if tok.Kind() == '}' {
				ps.names.pop()
			}
			ps.closeSpan(int(dec.InputOffset()))
		case '"':
			if kind, n := dec.StackIndex(depth); kind == '{' && n%2 == 1 {
				name := unquote(nameAt(body, prevEnd, dec.InputOffset()))
				if !ps.names.add(name) {
					return protocol.Errorf(protocol.ParseError, "duplicate object key %q", protocol.Clip(string(name)))
				}
			}
		}
		if depth == 0 {
			break
		}
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return protocol.Errorf(protocol.ParseError, "request body has data after the JSON value")
	}
	return nil
}

// openSpan records the start of an object or array at depth, when it is shallow enough and the
// budget allows.
func (ps *parser) openSpan(start, depth int) {
	if depth > maxSpanDepth || len(ps.spans) >= maxPooledLen {
		ps.open = append(ps.open, -1)
		return
	}
	ps.open = append(ps.open, len(ps.spans))
	ps.spans = append(ps.spans, span{start: start, end: -1})
}

// closeSpan records the end of the innermost open object or array.
func (ps *parser) closeSpan(end int) {
	n := len(ps.open) - 1
	if i := ps.open[n]; i >= 0 {
		ps.spans[i].end = end
	}
	ps.open = ps.open[:n]
}

// spanEnd returns the end of the object or array that starts at body[start], if it was recorded.
func (ps *parser) spanEnd(start int) (int, bool) {
	i, found := slices.BinarySearchFunc(ps.spans, start, func(s span, start int) int { return cmp.Compare(s.start, start) })
	if !found || ps.spans[i].end < 0 {
		return 0, false
	}
	return ps.spans[i].end, true
}

// nameAt is the raw (quoted) object name the decoder read from body[from:to]: only white space
// and a comma precede its opening quote.
func nameAt(body []byte, from, to int64) []byte {
	raw := body[from:to]
	return raw[bytes.IndexByte(raw, '"'):]
}

func syntaxError(err error) *protocol.Error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return protocol.Wrap(protocol.ParseError, err, "request body is not valid JSON: unexpected end of input")
	}
	return protocol.Wrap(protocol.ParseError, err, "request body is not valid JSON")
}

// nameStack holds the names of the open objects of one body in one flat slice: starts[i] is
// where the names of the i-th open object begin. Objects with many names also get a set.
type nameStack struct {
	names  [][]byte
	starts []int
	sets   []map[string]struct{}
}

func (s *nameStack) push() {
	s.starts = append(s.starts, len(s.names))
	s.sets = append(s.sets, nil)
}

func (s *nameStack) pop() {
	n := len(s.starts) - 1
	s.names = s.names[:s.starts[n]]
	s.starts, s.sets = s.starts[:n], s.sets[:n]
}

// reset empties the stack for the next body. Popped entries past the stack's length are
// cleared too: they may still hold names from this body.
func (s *nameStack) reset() {
	s.names = clearForReuse(s.names[:cap(s.names)])
	s.starts = clearForReuse(s.starts[:0])
	s.sets = clearForReuse(s.sets[:cap(s.sets)])
}

// add records name in the innermost object, reporting false when it was already there.
func (s *nameStack) add(name []byte) bool {
	n := len(s.starts) - 1
	if set := s.sets[n]; set != nil {
		if _, dup := set[string(name)]; dup {
			return false
		}
		set[string(name)] = struct{}{}
		return true
	}
	own := s.names[s.starts[n]:]
	for _, have := range own {
		if bytes.Equal(have, name) {
			return false
		}
	}
	s.names = append(s.names, name)
	if len(own) >= 16 {
		set := make(map[string]struct{}, 2*len(own)+2)
		for _, have := range s.names[s.starts[n]:] {
			set[string(have)] = struct{}{}
		}
		s.sets[n] = set
	}
	return true
}

// member is one name/value pair of an object the parser interprets. name is unescaped; like
// value, it usually is a slice of the body.
type member struct {
	name  []byte
	value jsontext.Value
}

// object is a schema object of the protocol (envelope, params, message, part, ...).
//
// Every JSON decoder downstream reads field names its own way: encoding/json folds case
// ("TaskId" is taskId), protojson accepts the proto name ("task_id"). The parser therefore reads a
// field under every such spelling and refuses an object where two spellings of one field both
// appear, so no reader can see a value this parser did not.
type object []member

// readObject splits raw, a JSON object of a body checkJSON accepted, into members. The members
// live in ps until it is released.
func (ps *parser) readObject(raw jsontext.Value) (object, *protocol.Error) {
	start := len(ps.members)
	for s := ps.scan(raw); s.more(); {
		name := unquote(s.value())
		s.colon()
		ps.members = append(ps.members, member{name: name, value: s.value()})
	}
	obj := object(ps.members[start:len(ps.members):len(ps.members)])
	if i, j := obj.sameFields(); i >= 0 {
		return nil, protocol.Errorf(protocol.ParseError, "duplicate object key %q (same field as %q)", protocol.Clip(string(obj[i].name)), protocol.Clip(string(obj[j].name)))
	}
	return obj, nil
}

// readArray splits raw, when it is a JSON array of a body checkJSON accepted, into its elements.
// The elements live in ps until it is released.
func (ps *parser) readArray(raw jsontext.Value) ([]jsontext.Value, bool) {
	if raw.Kind() != '[' {
		return nil, false
	}
	start := len(ps.elems)
	for s := ps.scan(raw); s.more(); {
		ps.elems = append(ps.elems, s.value())
	}
	return ps.elems[start:len(ps.elems):len(ps.elems)], true
}

// sameFields finds two members naming the same field: the later one's index first, or -1, -1.
func (o object) sameFields() (int, int) {
	if len(o) <= 16 {
		for i := range o {
			for j := range i {
				if sameField(o[i].name, o[j].name) {
					return i, j
				}
			}
		}
		return -1, -1
	}
	seen := make(map[string]int, len(o))
	for i, m := range o {
		k := fieldKey(m.name)
		if j, dup := seen[k]; dup {
			return i, j
		}
		seen[k] = i
	}
	return -1, -1
}

// lookup returns a member's value (JSON null included) and whether it is present.
func (o object) lookup(field string) (jsontext.Value, bool) {
	for _, m := range o {
		if sameField(m.name, field) {
			return m.value, true
		}
	}
	return nil, false
}

// get returns the value of field (a camelCase name), nil when absent or null.
func (o object) get(field string) jsontext.Value {
	if v, _ := o.lookup(field); v.Kind() != 'n' {
		return v
	}
	return nil
}

// text is a field name as read (bytes) or as written in code (string).
type text interface{ ~string | ~[]byte }

// fieldKey folds a field name so that every spelling a decoder may accept for it is equal:
// Unicode simple case folding (as encoding/json matches) and no underscores (protojson's
// proto-name form).
func fieldKey[T text](name T) string {
	b := make([]byte, 0, len(name))
	for len(name) > 0 {
		r, n := decodeRune(name)
		name = name[n:]
		switch {
		case r == '_':
			continue
		case r < utf8.RuneSelf:
			b = append(b, upperASCII(byte(r)))
		default:
			b = utf8.AppendRune(b, foldRune(r))
		}
	}
	return string(b)
}

// SameField reports whether two JSON member names are one field to the
// parser (case folded, underscores ignored: taskId, task_id, TASKID): the
// rule a handler call's params are split by too.
func SameField(a, b string) bool { return sameField(a, b) }

// sameField reports fieldKey(a) == fieldKey(b) without allocating.
func sameField[A, B text](a A, b B) bool {
	// Most names of an object differ from the field looked up in their first, ASCII, letter.
	if len(a) > 0 && len(b) > 0 && a[0] < utf8.RuneSelf && b[0] < utf8.RuneSelf &&
		a[0] != '_' && b[0] != '_' && upperASCII(a[0]) != upperASCII(b[0]) {
		return false
	}
	return foldEqual(a, b)
}

// foldEqual is sameField without the shortcut.
func foldEqual[A, B text](a A, b B) bool {
	if string(a) == string(b) {
		return true
	}
	for {
		for len(a) > 0 && a[0] == '_' {
			a = a[1:]
		}
		for len(b) > 0 && b[0] == '_' {
			b = b[1:]
		}
		if len(a) == 0 || len(b) == 0 {
			return len(a) == len(b)
		}
		if a[0] < utf8.RuneSelf && b[0] < utf8.RuneSelf {
			// Both ASCII: the smallest rune of an ASCII letter's folding orbit is its upper case
			// (the Kelvin sign and long s fold with k and s but sort after them).
			if upperASCII(a[0]) != upperASCII(b[0]) {
				return false
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := decodeRune(a)
		rb, nb := decodeRune(b)
		if ra != rb && foldRune(ra) != foldRune(rb) {
			return false
		}
		a, b = a[na:], b[nb:]
	}
}

// decodeRune decodes the first rune of s, which is not empty.
func decodeRune[T text](s T) (rune, int) {
	if s[0] < utf8.RuneSelf {
		return rune(s[0]), 1
	}
	var buf [utf8.UTFMax]byte
	n := copy(buf[:], s)
	return utf8.DecodeRune(buf[:n])
}

func upperASCII(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// foldRune maps r to the smallest rune of its case-folding orbit (k, K and the Kelvin sign all
// map to K).
func foldRune(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < m {
			m = f
		}
	}
	return m
}

// unquote returns the contents of v, a JSON string checkJSON accepted: a slice of v unless v has
// escapes. It returns nil for any other value.
func unquote(v jsontext.Value) []byte {
	if len(v) < 2 || v[0] != '"' {
		return nil
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1]
	}
	b, err := jsontext.AppendUnquote(nil, v)
	if err != nil {
		return nil
	}
	return b
}

// str decodes a JSON string value into a string of its own.
func str(v jsontext.Value) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	b, err := jsontext.AppendUnquote(nil, v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// isString reports whether v is the JSON string s.
func isString(v jsontext.Value, s string) bool {
	b := unquote(v)
	return b != nil && string(b) == s
}
