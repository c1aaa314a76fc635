package protocol

import (
	"bytes"
	"errors"
	"io"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// checkJSON validates a whole body once, before anything reads it: well-formed JSON, valid UTF-8,
// no duplicate object key anywhere (exact match), nesting within maxDepth, nothing after the
// value. Error messages are our own; the library's text and offsets are never shown.
func checkJSON(body []byte, maxDepth int) *Error {
	if len(trimSpace(body)) == 0 {
		return Errorf(ParseError, "request body is empty")
	}
	if !utf8.Valid(body) {
		return Errorf(ParseError, "request body is not valid UTF-8")
	}
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), jsontext.AllowDuplicateNames(true))
	names := nameStack{names: make([]string, 0, 32), starts: make([]int, 0, 8), sets: make([]map[string]struct{}, 0, 8)}
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return syntaxError(err)
		}
		depth := dec.StackDepth()
		switch tok.Kind() {
		case '{', '[':
			if depth > maxDepth {
				return Errorf(InvalidRequest, "request body nests deeper than the limit of %d levels", maxDepth)
			}
			if tok.Kind() == '{' {
				names.push()
			}
		case '}':
			names.pop()
		case '"':
			if kind, n := dec.StackIndex(depth); kind == '{' && n%2 == 1 {
				name := tok.String()
				if !names.add(name) {
					return Errorf(ParseError, "duplicate object key %q", clip(name))
				}
			}
		}
		if depth == 0 {
			break
		}
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return Errorf(ParseError, "request body has data after the JSON value")
	}
	return nil
}

func syntaxError(err error) *Error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Wrap(ParseError, err, "request body is not valid JSON: unexpected end of input")
	}
	return Wrap(ParseError, err, "request body is not valid JSON")
}

// nameStack holds the names of the open objects of one body in one flat slice: starts[i] is
// where the names of the i-th open object begin. Objects with many names also get a set.
type nameStack struct {
	names  []string
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

// add records name in the innermost object, reporting false when it was already there.
func (s *nameStack) add(name string) bool {
	n := len(s.starts) - 1
	if set := s.sets[n]; set != nil {
		if _, dup := set[name]; dup {
			return false
		}
		set[name] = struct{}{}
		return true
	}
	own := s.names[s.starts[n]:]
	for _, have := range own {
		if have == name {
			return false
		}
	}
	s.names = append(s.names, name)
	if len(own) >= 16 {
		set := make(map[string]struct{}, 2*len(own)+2)
		for _, have := range s.names[s.starts[n]:] {
			set[have] = struct{}{}
		}
		s.sets[n] = set
	}
	return true
}

// member is one name/value pair of an object the parser interprets.
type member struct {
	name  string
	value jsontext.Value
}

// object is a schema object of the protocol (envelope, params, message, part, ...).
//
// Every JSON decoder downstream reads field names its own way: encoding/json folds case
// ("TaskId" is taskId), protojson accepts the proto name ("task_id"). The parser therefore reads a
// field under every such spelling and refuses an object where two spellings of one field both
// appear, so no reader can see a value this parser did not.
type object []member

// readObject splits a valid JSON object (checked by checkJSON) into members. where names the
// object in messages.
func readObject(raw jsontext.Value, where string) (object, *Error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(raw), jsontext.AllowDuplicateNames(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, Errorf(ParseError, "%s is not a JSON object", where)
	}
	var obj object
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, syntaxError(err)
		}
		name := tok.String() // before the next read voids tok
		v, err := dec.ReadValue()
		if err != nil {
			return nil, syntaxError(err)
		}
		end := int(dec.InputOffset())
		obj = append(obj, member{name: name, value: jsontext.Value(raw[end-len(v) : end])})
	}
	if i, j := obj.sameFields(); i >= 0 {
		return nil, Errorf(ParseError, "duplicate object key %q (same field as %q)", clip(obj[i].name), clip(obj[j].name))
	}
	return obj, nil
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

// get returns the value of field (a camelCase name), nil when absent or null.
func (o object) get(field string) jsontext.Value {
	for _, m := range o {
		if sameField(m.name, field) {
			if m.value.Kind() == 'n' {
				return nil
			}
			return m.value
		}
	}
	return nil
}

// fieldKey folds a field name so that every spelling a decoder may accept for it is equal:
// Unicode simple case folding (as encoding/json matches) and no underscores (protojson's
// proto-name form).
func fieldKey(name string) string {
	ascii := true
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	b := make([]byte, 0, len(name))
	if ascii {
		for i := 0; i < len(name); i++ {
			c := name[i]
			switch {
			case c == '_':
				continue
			case 'a' <= c && c <= 'z':
				c -= 'a' - 'A'
			}
			b = append(b, c)
		}
		return string(b)
	}
	for _, r := range name {
		if r == '_' {
			continue
		}
		b = utf8.AppendRune(b, foldRune(r))
	}
	return string(b)
}

// sameField reports fieldKey(a) == fieldKey(b) without allocating.
func sameField(a, b string) bool {
	for {
		for len(a) > 0 && a[0] == '_' {
			a = a[1:]
		}
		for len(b) > 0 && b[0] == '_' {
			b = b[1:]
		}
		if a == "" || b == "" {
			return a == b
		}
		ra, na := rune(a[0]), 1
		if ra >= utf8.RuneSelf {
			ra, na = utf8.DecodeRuneInString(a)
		}
		rb, nb := rune(b[0]), 1
		if rb >= utf8.RuneSelf {
			rb, nb = utf8.DecodeRuneInString(b)
		}
		if ra != rb && foldRune(ra) != foldRune(rb) {
			return false
		}
		a, b = a[na:], b[nb:]
	}
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

// str decodes a JSON string value.
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
