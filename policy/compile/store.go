package compile

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// Store returns a new in-memory store holding Data under data.capgate.
// The data is converted to AST values once, so evaluation reads it without
// per-query conversion.
func (s *Snapshot) Store() (storage.Store, error) {
	data, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("store policy data: %w", err)
	}
	return storeOf(data)
}

// storeOf returns a new in-memory store holding data under data.capgate.
func storeOf(data map[string]any) (storage.Store, error) {
	v, err := newInterner().value(map[string]any{Root: data})
	if err != nil {
		return nil, fmt.Errorf("store policy data: %w", err)
	}
	obj, ok := v.Value.(ast.Object)
	if !ok {
		return nil, errors.New("store policy data: not an object")
	}
	return inmem.NewFromASTObject(obj), nil
}

// interner converts plain JSON values to OPA AST terms as
// ast.InterfaceToValue does, but shares one term among equal strings,
// numbers and arrays of them. A registry repeats the same few states,
// visibilities, handlers, tag and scope lists thousands of times; AST
// values are immutable, so sharing them is safe and keeps a 10,000
// capability store at a fraction of its naive size. Objects are rebuilt,
// not shared (each capability's differs by its id).
type interner struct {
	strings map[string]*ast.Term
	shared  map[string]*ast.Term // arrays of scalars by their text, numbers by "#" + text
}

func newInterner() *interner {
	return &interner{strings: map[string]*ast.Term{}, shared: map[string]*ast.Term{}}
}

func (in *interner) value(x any) (*ast.Term, error) {
	switch x := x.(type) {
	case string:
		return in.str(x), nil
	case []any:
		elems := make([]*ast.Term, len(x))
		scalar := true
		for i, e := range x {
			t, err := in.value(e)
			if err != nil {
				return nil, err
			}
			elems[i] = t
			_, isObj := t.Value.(ast.Object)
			_, isArr := t.Value.(*ast.Array)
			scalar = scalar && !isObj && !isArr
		}
		arr := ast.NewTerm(ast.NewArray(elems...))
		if !scalar {
			return arr, nil
		}
		key := arr.String()
		if t, ok := in.shared[key]; ok {
			return t, nil
		}
		in.shared[key] = arr
		return arr, nil
	case map[string]any:
		kvs := make([][2]*ast.Term, 0, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			v, err := in.value(x[k])
			if err != nil {
				return nil, err
			}
			kvs = append(kvs, ast.Item(in.str(k), v))
		}
		return ast.NewTerm(ast.NewObject(kvs...)), nil
	case json.Number:
		key := "#" + string(x) // no array text starts with "#"
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

func (in *interner) str(s string) *ast.Term {
	if t, ok := in.strings[s]; ok {
		return t
	}
	t := ast.StringTerm(s)
	in.strings[s] = t
	return t
}
