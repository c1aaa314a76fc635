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
	var names nameStack
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
				names.push(depth)
			}
		case '"':
			if kind, n := dec.StackIndex(depth); kind == '{' && n%2 == 1 {
				name := tok.String()
				if !names.add(depth, name) {
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

// nameStack holds the names seen in each open object, reused across objects of one body.
type nameStack struct {
	levels []nameSet
}

type nameSet struct {
	list []string
	set  map[string]struct{}
}

func (s *nameStack) push(depth int) {
	for len(s.levels) < depth {
		s.levels = append(s.levels, nameSet{})
	}
	l := &s.levels[depth-1]
	l.list = l.list[:0]
	l.set = nil
}

// add records name in the object at depth, reporting false when it was already there.
func (s *nameStack) add(depth int, name string) bool {
	l := &s.levels[depth-1]
	if l.set != nil {
		if _, dup := l.set[name]; dup {
			return false
		}
		l.set[name] = struct{}{}
		return true
	}
	for _, n := range l.list {
		if n == name {
			return false
		}
	}
	l.list = append(l.list, name)
	if len(l.list) > 16 {
		l.set = make(map[string]struct{}, 2*len(l.list))
		for _, n := range l.list {
			l.set[n] = struct{}{}
		}
	}
	return true
}

// member is one name/value pair of an object the parser interprets.
type member struct {
	name  string
	key   string // fieldKey(name)
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
		obj = append(obj, member{name: name, key: fieldKey(name), value: jsontext.Value(raw[end-len(v) : end])})
	}
	for i := range obj {
		for j := range i {
			if obj[i].key == obj[j].key {
				return nil, Errorf(ParseError, "duplicate object key %q (same field as %q)",
					clip(obj[i].name), clip(obj[j].name))
			}
		}
	}
	return obj, nil
}

// get returns the value of field (a camelCase name), nil when absent or null.
func (o object) get(field string) jsontext.Value {
	key := fieldKey(field)
	for _, m := range o {
		if m.key == key {
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
