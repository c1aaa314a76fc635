package jsonmodel

import (
	"bytes"
	"encoding/base64"
	"math"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// appendCanonical is a shortcut of canonicalParams' protojson round trip for the request shapes
// messages have: it appends to out what protojson.Marshal writes for the message protojson.Unmarshal
// reads from raw — JSON names, fields in declaration order, implicit-presence fields at their zero
// value left out, enum names, standard padded base64, Struct keys sorted, numbers in a Value as
// float64 — and reports whether it could. It gives up (false) on anything else: null members,
// 64-bit and floating-point fields, numbers given as strings or with a fraction or exponent, maps,
// well-known types other than Struct, Value and ListValue, two members of one oneof, a Struct key
// given twice, an unknown enum name. canonicalParams then takes the round trip, which stays the
// definition; TestCanonicalFastMatchesProtojson and FuzzCanonicalFast hold the two equal. The
// round trip cost 70 of the gateway's ~350 allocations a routed message (docs/benchmarks.md).
// raw must be an object knownFields accepted for md.
func (ps *parser) appendCanonical(out []byte, raw jsontext.Value, md protoreflect.MessageDescriptor) ([]byte, bool) {
	if raw.Kind() != '{' {
		return out, false
	}
	obj, err := ps.readObject(raw)
	if err != nil {
		return out, false
	}
	fields := fieldsOf(md)
	fds := md.Fields()
	// byIndex[i] is the member of field i; n is at most the fields' count on this path.
	var buf [16]jsontext.Value
	var byIndex []jsontext.Value
	if fds.Len() > len(buf) {
		byIndex = make([]jsontext.Value, fds.Len())
	} else {
		byIndex = buf[:fds.Len()]
	}
	for _, m := range obj {
		fd := fields[string(m.name)]
		if fd == nil || m.value.Kind() == 'n' || byIndex[fd.Index()] != nil {
			return out, false
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			for i := range od.Fields().Len() {
				if byIndex[od.Fields().Get(i).Index()] != nil {
					return out, false
				}
			}
		}
		byIndex[fd.Index()] = m.value
	}
	out = append(out, '{')
	first := true
	for i, v := range byIndex {
		if v == nil {
			continue
		}
		fd := fds.Get(i)
		mark := len(out)
		if !first {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, fd.JSONName())
		out = append(out, ':')
		var ok, empty bool
		switch {
		case fd.IsMap():
			return out, false
		case fd.IsList():
			out, empty, ok = ps.appendList(out, v, fd)
		default:
			out, empty, ok = ps.appendSingular(out, v, fd)
		}
		if !ok {
			return out, false
		}
		if empty && (!fd.HasPresence() || fd.IsList()) {
			out = out[:mark] // protojson leaves out an implicit-presence field at its zero value
			continue
		}
		first = false
	}
	return append(out, '}'), true
}

// appendList appends the list v of field fd; empty reports a list without elements.
func (ps *parser) appendList(out []byte, v jsontext.Value, fd protoreflect.FieldDescriptor) ([]byte, bool, bool) {
	elems, ok := ps.readArray(v)
	if !ok {
		return out, false, false
	}
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		if e.Kind() == 'n' {
			return out, false, false
		}
		if out, _, ok = ps.appendSingular(out, e, fd); !ok {
			return out, false, false
		}
	}
	return append(out, ']'), len(elems) == 0, true
}

// appendSingular appends one value of field fd's kind; empty reports the kind's zero value.
func (ps *parser) appendSingular(out []byte, v jsontext.Value, fd protoreflect.FieldDescriptor) ([]byte, bool, bool) {
	k := v.Kind()
	switch fd.Kind() {
	case protoreflect.StringKind:
		if k != '"' {
			return out, false, false
		}
		s := unquote(v)
		if s == nil && len(v) != 2 {
			return out, false, false
		}
		out, ok := appendQuoted(out, s)
		return out, len(s) == 0, ok
	case protoreflect.BoolKind:
		switch k {
		case 't':
			return append(out, "true"...), false, true
		case 'f':
			return append(out, "false"...), true, true
		}
		return out, false, false
	case protoreflect.EnumKind:
		if k != '"' {
			return out, false, false
		}
		ev := enumValue(fd.Enum(), unquote(v))
		if ev == nil {
			return out, false, false
		}
		return strconv.AppendQuote(out, string(ev.Name())), ev.Number() == 0, true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return appendInt(out, v, math.MinInt32, math.MaxInt32)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return appendInt(out, v, 0, math.MaxUint32)
	case protoreflect.BytesKind:
		if k != '"' {
			return out, false, false
		}
		b, ok := decodeBase64(unquote(v))
		if !ok {
			return out, false, false
		}
		out = append(out, '"')
		out = base64.StdEncoding.AppendEncode(out, b)
		return append(out, '"'), len(b) == 0, true
	case protoreflect.MessageKind:
		switch fd.Message().FullName() {
		case "google.protobuf.Struct":
			out, ok := ps.appendStruct(out, v)
			return out, false, ok
		case "google.protobuf.Value":
			out, ok := ps.appendValue(out, v)
			return out, false, ok
		case "google.protobuf.ListValue":
			out, ok := ps.appendListValue(out, v)
			return out, false, ok
		}
		if isWellKnown(fd.Message()) {
			return out, false, false
		}
		out, ok := ps.appendCanonical(out, v, fd.Message())
		return out, false, ok // a message field that is set is written, even empty
	}
	return out, false, false
}

// appendInt appends a plain JSON integer within [lo, hi]; anything else gives up.
func appendInt(out []byte, v jsontext.Value, lo, hi int64) ([]byte, bool, bool) {
	if v.Kind() != '0' || slices.ContainsFunc([]byte(v), func(c byte) bool { return c == '.' || c == 'e' || c == 'E' }) {
		return out, false, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < lo || n > hi {
		return out, false, false
	}
	return strconv.AppendInt(out, n, 10), n == 0, true
}

// decodeBase64 reads base64 as protojson does: standard or URL alphabet, padded or not.
func decodeBase64(s []byte) ([]byte, bool) {
	enc := base64.StdEncoding
	if slices.ContainsFunc(s, func(c byte) bool { return c == '-' || c == '_' }) {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	b, err := enc.AppendDecode(nil, s)
	return b, err == nil
}

// appendStruct appends a google.protobuf.Struct: its keys sorted, as protojson writes a map.
func (ps *parser) appendStruct(out []byte, v jsontext.Value) ([]byte, bool) {
	if v.Kind() != '{' {
		return out, false
	}
	obj, err := ps.readObject(v)
	if err != nil {
		return out, false
	}
	// Sorted in place by name, as protojson writes a map (strings compare as bytes).
	slices.SortFunc(obj, func(a, b member) int { return bytes.Compare(a.name, b.name) })
	out = append(out, '{')
	for i, m := range obj {
		if i > 0 {
			if bytes.Equal(obj[i-1].name, m.name) {
				return out, false // protojson refuses a key given twice
			}
			out = append(out, ',')
		}
		var ok bool
		if out, ok = appendQuoted(out, m.name); !ok { // readObject unquoted it
			return out, false
		}
		out = append(out, ':')
		if out, ok = ps.appendValue(out, m.value); !ok {
			return out, false
		}
	}
	return append(out, '}'), true
}

// appendQuoted appends s as a JSON string; false for invalid UTF-8, which protojson refuses.
func appendQuoted(out, s []byte) ([]byte, bool) {
	b, err := jsontext.AppendQuote(out, s)
	return b, err == nil
}

// appendListValue appends a google.protobuf.ListValue.
func (ps *parser) appendListValue(out []byte, v jsontext.Value) ([]byte, bool) {
	elems, ok := ps.readArray(v)
	if !ok {
		return out, false
	}
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		if out, ok = ps.appendValue(out, e); !ok {
			return out, false
		}
	}
	return append(out, ']'), true
}

// appendValue appends a google.protobuf.Value: numbers become float64, written as protojson
// writes a double.
func (ps *parser) appendValue(out []byte, v jsontext.Value) ([]byte, bool) {
	switch v.Kind() {
	case 'n':
		return append(out, "null"...), true
	case 't':
		return append(out, "true"...), true
	case 'f':
		return append(out, "false"...), true
	case '"':
		s := unquote(v)
		if s == nil && len(v) != 2 {
			return out, false
		}
		return appendQuoted(out, s)
	case '0':
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsInf(f, 0) {
			return out, false
		}
		return appendDouble(out, f), true
	case '{':
		return ps.appendStruct(out, v)
	case '[':
		return ps.appendListValue(out, v)
	}
	return out, false
}

// appendDouble writes f as protojson (and encoding/json) write a double: 'f' format, or 'e'
// below 1e-6 or from 1e21, the exponent without a leading zero.
func appendDouble(out []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	out = strconv.AppendFloat(out, f, format, -1, 64)
	if format == 'e' {
		n := len(out)
		if n >= 4 && out[n-4] == 'e' && out[n-3] == '-' && out[n-2] == '0' {
			out[n-2] = out[n-1]
			out = out[:n-1]
		}
	}
	return out
}
