package yamlnode

import (
	"bytes"
	"io"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"gopkg.in/yaml.v3"
)

// JSON documents (manifests are often kept as JSON) are read with jsontext,
// several times faster than yaml.v3, into the very node tree yaml.v3 builds
// for them: same kinds, tags, styles, values, lines and columns, so that
// everything downstream (and every problem it reports) is the same. That is
// only certain for a subset of JSON, which parseJSON accepts; anything else
// (not JSON, or JSON that YAML reads differently or rejects) is left to
// yaml.v3. FuzzParseJSON holds the two trees equal.

// Limits of the documents parseJSON takes.
const (
	// jsonMaxDepth is far below yaml.v3's flow depth limit (10,000) and
	// jsontext's; deeper documents go to yaml.v3.
	jsonMaxDepth = 1000
	// jsonMaxKeySpan bounds the bytes from an object name's opening quote to
	// its ':': YAML wants the ':' of an implicit key within 1,024
	// characters of the key's start.
	jsonMaxKeySpan = 1000
)

// parseJSON returns the root node yaml.v3 would return for data, and
// whether data is a JSON object or array that it is sure of.
func parseJSON(data []byte) (*yaml.Node, bool) {
	first, last, ok := jsonExtent(data)
	if !ok {
		return nil, false
	}
	p := jsonParser{data: data, line: 1, col: 1}
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true))
	var root *yaml.Node
	var stack []*yaml.Node
	for {
		prev := int(dec.InputOffset())
		tok, err := dec.ReadToken()
		if err == io.EOF && root != nil && len(stack) == 0 {
			return root, true
		}
		if err != nil {
			return nil, false
		}
		end := int(dec.InputOffset())
		start := skipSeparators(data, prev)
		if start < first || end > last+1 {
			return nil, false
		}
		kind := tok.Kind()
		if kind == '}' || kind == ']' {
			stack = stack[:len(stack)-1]
			continue
		}
		n := &yaml.Node{}
		n.Line, n.Column = p.position(start)
		switch kind {
		case '{':
			n.Kind, n.Tag, n.Style = yaml.MappingNode, "!!map", yaml.FlowStyle
		case '[':
			n.Kind, n.Tag, n.Style = yaml.SequenceNode, "!!seq", yaml.FlowStyle
		case '"':
			raw := data[start:end]
			if !yamlEscapes(raw) {
				return nil, false
			}
			if len(stack) > 0 {
				if top := stack[len(stack)-1]; top.Kind == yaml.MappingNode && len(top.Content)%2 == 0 && !implicitKey(data, start, end) {
					return nil, false
				}
			}
			n.Kind, n.Tag, n.Style, n.Value = yaml.ScalarNode, "!!str", yaml.DoubleQuotedStyle, tok.String()
		default: // a number, true, false or null: a plain scalar, tagged as yaml.v3 resolves it
			n.Kind, n.Value = yaml.ScalarNode, string(data[start:end])
			n.Tag = n.ShortTag()
		}
		if len(stack) == 0 {
			if root != nil {
				return nil, false
			}
			root = n
		} else {
			top := stack[len(stack)-1]
			top.Content = append(top.Content, n)
		}
		if n.Kind != yaml.ScalarNode {
			if len(stack) == jsonMaxDepth {
				return nil, false
			}
			stack = append(stack, n)
		}
	}
}

// jsonExtent finds the first and last byte of the root value and checks the
// characters of the whole document: the root must be an object or an array
// with only spaces and line breaks around it (YAML takes a tab outside flow
// context for indentation), and every character one YAML reads as JSON does:
// printable, and no line break other than CR and LF, no byte order mark.
func jsonExtent(data []byte) (first, last int, ok bool) {
	first, last = -1, -1
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			switch {
			case c == ' ' || c == '\n' || c == '\r':
			case c == '\t':
				if first < 0 {
					return 0, 0, false
				}
			case c < 0x20 || c == 0x7f:
				return 0, 0, false
			default:
				if first < 0 {
					first = i
				}
				last = i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError || r < 0xa0 || r == 0x2028 || r == 0x2029 || r == 0xfeff || r == 0xfffe || r == 0xffff {
			return 0, 0, false
		}
		if first < 0 {
			first = i
		}
		last = i
		i += size
	}
	if first < 0 || (data[first] != '{' && data[first] != '[') {
		return 0, 0, false
	}
	// A tab after the root (outside flow context) is whitespace YAML may
	// reject: leave such documents to yaml.v3.
	if bytes.IndexByte(data[last:], '\t') >= 0 {
		return 0, 0, false
	}
	return first, last, true
}

// skipSeparators returns the offset of the next token at or after i.
func skipSeparators(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r', ',', ':':
			i++
		default:
			return i
		}
	}
	return i
}

// implicitKey reports whether the object name data[start:end] is followed by
// its ':' on the same line and close enough for YAML to take it as a key.
func implicitKey(data []byte, start, end int) bool {
	for i := end; i < len(data) && i-start <= jsonMaxKeySpan; i++ {
		switch data[i] {
		case ':':
			return true
		case ' ', '\t':
		default:
			return false
		}
	}
	return false
}

// yamlEscapes reports whether YAML decodes the escapes of the JSON string
// raw as JSON does: it has no "\/" and no "\u" escape of a surrogate half.
func yamlEscapes(raw []byte) bool {
	for i := bytes.IndexByte(raw, '\\'); i >= 0; {
		if i+1 >= len(raw) {
			return false
		}
		switch raw[i+1] {
		case '/':
			return false
		case 'u':
			if i+6 > len(raw) {
				return false
			}
			if h := raw[i+2] | 0x20; h == 'd' && (raw[i+3] >= '8' && raw[i+3] <= '9' || raw[i+3]|0x20 >= 'a' && raw[i+3]|0x20 <= 'f') {
				return false
			}
		}
		j := bytes.IndexByte(raw[i+2:], '\\')
		if j < 0 {
			break
		}
		i += 2 + j
	}
	return true
}

// jsonParser turns byte offsets into YAML positions: 1-based lines (CR LF,
// LF and a lone CR each end one) and 1-based columns counted in characters.
// Offsets are asked for in increasing order.
type jsonParser struct {
	data      []byte
	off       int // offset of the position below
	line, col int
}

func (p *jsonParser) position(off int) (line, col int) {
	for ; p.off < off; p.off++ {
		switch c := p.data[p.off]; {
		case c == '\n':
			p.line++
			p.col = 1
		case c == '\r':
			if p.off+1 < len(p.data) && p.data[p.off+1] == '\n' {
				continue
			}
			p.line++
			p.col = 1
		case c&0xc0 != 0x80: // not a UTF-8 continuation byte
			p.col++
		}
	}
	return p.line, p.col
}
