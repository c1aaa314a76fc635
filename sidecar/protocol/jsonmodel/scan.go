package jsonmodel

// scanner walks the members or elements of one JSON object or array of a body that checkJSON has
// validated, so it only finds where values end: it neither checks the grammar again nor
// decodes. It jumps over the objects and arrays whose spans checkJSON recorded and scans the
// others. On input checkJSON did not accept it returns nonsense, but stays within b.
type scanner struct {
	b    []byte  // the object or array, '{' or '[' included
	i    int     // read position in b
	ps   *parser // for spans; nil when b is not a slice of ps.body
	base int     // offset of b in ps.body
}

// scan starts a scanner after the opening '{' or '[' of raw.
func (ps *parser) scan(raw []byte) scanner {
	s := scanner{b: raw, i: 1}
	if base, ok := offsetIn(ps.body, raw); ok {
		s.ps, s.base = ps, base
	}
	return s
}

// offsetIn returns the offset of sub in body when sub is a slice of body (which, sliced as
// body[i:j], has i fewer bytes of capacity than body).
func offsetIn(body, sub []byte) (int, bool) {
	off := cap(body) - cap(sub)
	if len(sub) == 0 || off < 0 || off+len(sub) > len(body) || &body[off] != &sub[0] {
		return 0, false
	}
	return off, true
}

// more moves to the next member or element and reports whether there is one.
func (s *scanner) more() bool {
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == ',' {
		s.i++
		s.skipSpace()
	}
	return s.i < len(s.b) && s.b[s.i] != '}' && s.b[s.i] != ']'
}

// colon moves past the colon after an object member's name (or, on input checkJSON did not
// accept, past whatever byte is there, and never past the end).
func (s *scanner) colon() {
	s.skipSpace()
	if s.i < len(s.b) {
		s.i++
	}
	s.skipSpace()
}

// value returns the value (or object name) at the read position and moves past it.
func (s *scanner) value() []byte {
	start := s.i
	s.i = s.valueEnd(s.i)
	return s.b[start:s.i]
}

func (s *scanner) skipSpace() {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

// valueEnd returns the end of the value that starts at b[i].
func (s *scanner) valueEnd(i int) int {
	if i >= len(s.b) {
		return len(s.b)
	}
	switch s.b[i] {
	case '"':
		return stringEnd(s.b, i)
	case '{', '[':
		if s.ps != nil {
			if end, ok := s.ps.spanEnd(s.base + i); ok && end-s.base <= len(s.b) {
				return end - s.base
			}
		}
		return containerEnd(s.b, i)
	default: // number, true, false, null
		for i < len(s.b) && !isSpace(s.b[i]) && s.b[i] != ',' && s.b[i] != '}' && s.b[i] != ']' {
			i++
		}
		return i
	}
}

// containerEnd returns the end of the object or array that starts at b[i].
func containerEnd(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i = stringEnd(b, i)
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return len(b)
}

// stringEnd returns the end of the string whose opening quote is b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte, which may be a quote
		case '"':
			return i + 1
		}
	}
	return len(b)
}
