package compile

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/capgate/capgate/policy/manifest"
)

// Store returns a new in-memory store holding Data under data.capgate.
// The data is converted to AST values once, so evaluation reads it without
// per-query conversion.
//
// The capabilities are converted straight from the registry, not through
// Data's maps: over a large registry those are megabytes of garbage that die
// just after the store is built, and the store's objects, allocated in
// between, would be left scattered over half-empty heap spans for the life
// of the revision. The result equals Data's conversion (tested).
func (s *Snapshot) Store() (storage.Store, error) {
	in := newInterner()
	caps := make([][2]*ast.Term, 0, s.Registry.Len())
	profiles, err := s.eachFacts(func(c *manifest.Capability, fs []fact) error {
		f, err := in.facts(fs)
		if err != nil {
			return fmt.Errorf("store policy data: capability %q: %w", c.ID, err)
		}
		caps = append(caps, ast.Item(in.str(c.ID), f))
		return nil
	})
	if err != nil {
		return nil, err
	}
	rest, err := plainJSON(map[string]any{keyProfiles: profiles, keySettings: s.Settings})
	if err != nil {
		return nil, fmt.Errorf("store policy data: %w", err)
	}
	doc, err := in.value(rest)
	if err != nil {
		return nil, fmt.Errorf("store policy data: %w", err)
	}
	obj, ok := doc.Value.(ast.Object)
	if !ok {
		return nil, errors.New("store policy data: not an object")
	}
	obj.Insert(in.str(keyCapabilities), ast.NewTerm(ast.NewObject(caps...)))
	return inmem.NewFromASTObject(ast.NewObject(ast.Item(in.str(Root), doc))), nil
}

// interner converts plain JSON values to OPA AST terms as
// ast.InterfaceToValue does, but shares one term among equal strings,
// numbers and arrays of them. A registry repeats the same few states,
// visibilities, handlers, tag and scope lists thousands of times; AST
// values are immutable, so sharing them is safe and keeps a 10,000
// capability store at a fraction of its naive size. Objects are rebuilt,
// not shared (each capability's differs by its id).
//
// It allocates little besides the terms it returns (keys are looked up
// before anything is built, object items are built in reused scratch
// space), so that the store's objects lie close together on the heap.
type interner struct {
	strings map[string]*ast.Term
	shared  map[string]*ast.Term // arrays of scalars by scalarKey, numbers by "#" + text
	keys    []string             // scratch: object keys being sorted, a stack
	kvs     [][2]*ast.Term       // scratch: object items being built, a stack
	buf     []byte               // scratch: the key of an array
}

func newInterner() *interner {
	return &interner{strings: map[string]*ast.Term{}, shared: map[string]*ast.Term{}}
}

func (in *interner) value(x any) (*ast.Term, error) {
	switch x := x.(type) {
	case string:
		return in.str(x), nil
	case []any:
		shareable := in.scalarKey(x)
		if shareable {
			if t, ok := in.shared[string(in.buf)]; ok {
				return t, nil
			}
		}
		var key string
		if shareable {
			key = string(in.buf)
		}
		elems := make([]*ast.Term, len(x))
		for i, e := range x {
			t, err := in.value(e)
			if err != nil {
				return nil, err
			}
			elems[i] = t
		}
		arr := ast.NewTerm(ast.NewArray(elems...))
		if shareable {
			in.shared[key] = arr
		}
		return arr, nil
	case map[string]any:
		mark := len(in.keys)
		for k := range x {
			in.keys = append(in.keys, k)
		}
		keys := in.keys[mark:]
		slices.Sort(keys)
		kvsMark := len(in.kvs)
		for _, k := range keys {
			v, err := in.value(x[k])
			if err != nil {
				return nil, err
			}
			in.kvs = append(in.kvs, ast.Item(in.str(k), v))
		}
		t := ast.NewTerm(ast.NewObject(in.kvs[kvsMark:]...))
		in.keys, in.kvs = in.keys[:mark], in.kvs[:kvsMark]
		return t, nil
	case json.Number:
		key := "#" + string(x) // no scalarKey starts with "#"
		if t, ok := in.shared[key]; ok {
			return t, nil
		}
		v, err := ast.InterfaceToValue(x)
		if err != nil {
			return nil, err
		}
		t := ast.NewTerm(v)
		in.shared[key] = t
		return t, nil
	default: // bool, null, and anything else ast converts itself
		v, err := ast.InterfaceToValue(x)
		if err != nil {
			return nil, err
		}
		return ast.NewTerm(v), nil
	}
}

// facts converts one capability's facts (see appendFacts) to an object.
func (in *interner) facts(fs []fact) (*ast.Term, error) {
	mark := len(in.kvs)
	defer func() { in.kvs = in.kvs[:mark] }()
	for _, f := range fs {
		var v *ast.Term
		switch x := f.val.(type) {
		case string:
			v = in.str(x)
		case []string:
			v = in.stringList(x)
		case [][]string: // requires_any_of
			elems := make([]*ast.Term, len(x))
			for i, l := range x {
				elems[i] = in.stringList(l)
			}
			v = ast.NewTerm(ast.NewArray(elems...))
		case map[string]any: // limits: small, and only where a manifest sets them
			plain, err := plainJSON(x)
			if err != nil {
				return nil, fmt.Errorf("fact %s: %w", f.key, err)
			}
			if v, err = in.value(plain); err != nil {
				return nil, fmt.Errorf("fact %s: %w", f.key, err)
			}
		default:
			return nil, fmt.Errorf("fact %s: unsupported type %T", f.key, f.val)
		}
		in.kvs = append(in.kvs, ast.Item(in.str(f.key), v))
	}
	return ast.NewTerm(ast.NewObject(in.kvs[mark:]...)), nil
}

// stringList is value([]any of l's strings), without building the []any.
func (in *interner) stringList(l []string) *ast.Term {
	b := append(in.buf[:0], 'a')
	for _, s := range l {
		b = appendStringKey(b, s)
	}
	in.buf = b
	if t, ok := in.shared[string(b)]; ok {
		return t
	}
	key := string(b)
	elems := make([]*ast.Term, len(l))
	for i, s := range l {
		elems[i] = in.str(s)
	}
	t := ast.NewTerm(ast.NewArray(elems...))
	in.shared[key] = t
	return t
}

// scalarKey writes an unambiguous key of the array x to in.buf and reports
// whether x holds only scalars (strings, numbers, booleans, null): the
// arrays the interner shares.
func (in *interner) scalarKey(x []any) bool {
	b := append(in.buf[:0], 'a')
	defer func() { in.buf = b }()
	for _, e := range x {
		switch e := e.(type) {
		case string:
			b = appendStringKey(b, e)
		case json.Number:
			b = append(append(append(b, 'n'), e...), ';')
		case bool:
			b = strconv.AppendBool(append(b, 'b'), e)
		case nil:
			b = append(b, 'z')
		default:
			return false
		}
	}
	return true
}

// appendStringKey appends s to an array key, length-prefixed.
func appendStringKey(b []byte, s string) []byte {
	b = strconv.AppendInt(append(b, 's'), int64(len(s)), 10)
	return append(append(b, ':'), s...)
}

func (in *interner) str(s string) *ast.Term {
	if t, ok := in.strings[s]; ok {
		return t
	}
	t := ast.StringTerm(s)
	in.strings[s] = t
	return t
}
