// Package regocheck parses, validates, compiles, formats and tests capgate's Rego policy and the deny modules security teams add beside it.
package regocheck

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/rego"
)

// InputSchemaRef is the schema reference the policy's METADATA uses for its
// input (`schemas: - input: schema.input`).
const InputSchemaRef = "schema.input"

// ParserOptions parse every module as Rego v1 with METADATA annotations, so
// that schema annotations reach the type checker.
func ParserOptions() ast.ParserOptions {
	return ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true}
}

// Schemas returns the schema set of the embedded policy:
// rego/schemas/input.json as schema.input (named by the METADATA of
// authz.rego) and as the global input schema, so modules without
// annotations (deny modules) are type-checked against it too.
func Schemas() (*ast.SchemaSet, error) {
	raw, err := rego.FS.ReadFile(rego.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("read input schema: %w", err)
	}
	var schema any
	if err := util.UnmarshalJSON(raw, &schema); err != nil {
		return nil, fmt.Errorf("parse input schema %s: %w", rego.InputSchema, err)
	}
	ss := ast.NewSchemaSet()
	ss.Put(ast.MustParseRef(InputSchemaRef), schema)
	ss.Put(ast.SchemaRootRef, schema)
	return ss, nil
}

// Parse parses modules (file name → source) as Rego v1. Every parse error is
// reported, with its file and line.
func Parse(mods map[string]string) (map[string]*ast.Module, error) {
	var problems diag.Set
	out := make(map[string]*ast.Module, len(mods))
	for _, file := range slices.Sorted(maps.Keys(mods)) {
		m, err := ast.ParseModuleWithOpts(file, mods[file], ParserOptions())
		if err != nil {
			addASTErrors(&problems, file, err)
			continue
		}
		out[file] = m
	}
	if err := problems.ErrOrNil(); err != nil {
		return nil, err
	}
	return out, nil
}

// NewCompiler returns the one compiler setup capgate uses for its policy,
// in `policy check`, `policy test` and the snapshot build alike: Rego v1,
// the policy's schema set ([Schemas]), type checking by annotations. Print
// statements are erased; the test runner turns them on.
func NewCompiler(strict bool) (*ast.Compiler, error) {
	ss, err := Schemas()
	if err != nil {
		return nil, err
	}
	return ast.NewCompiler().
		WithDefaultRegoVersion(ast.RegoV1).
		WithCapabilities(ast.CapabilitiesForThisVersion()).
		WithSchemas(ss).
		WithUseTypeCheckAnnotations(true).
		WithStrict(strict), nil
}

// Compile parses and compiles mods (file name → source; pass the built-in
// modules too, see [Modules]) as Rego v1 with the embedded schema set, as
// `opa check [--strict]` would. Errors carry file and line.
func Compile(mods map[string]string, strict bool) (*ast.Compiler, error) {
	parsed, err := Parse(mods)
	if err != nil {
		return nil, err
	}
	return CompileParsed(parsed, strict)
}

// CompileParsed compiles modules [Parse] returned with [NewCompiler].
// Errors carry file and line.
func CompileParsed(parsed map[string]*ast.Module, strict bool) (*ast.Compiler, error) {
	c, err := NewCompiler(strict)
	if err != nil {
		return nil, err
	}
	if c.Compile(parsed); c.Failed() {
		var problems diag.Set
		addASTErrors(&problems, "", c.Errors)
		return nil, problems.ErrOrNil()
	}
	return c, nil
}

// addASTErrors records OPA errors (ast.Errors or *ast.Error) as problems at
// their location; file is used when an error has none.
func addASTErrors(s *diag.Set, file string, err error) {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		if e := (*ast.Error)(nil); errors.As(err, &e) {
			errs = ast.Errors{e}
		} else {
			s.Add(file, 0, "", "%v", err)
			return
		}
	}
	for _, e := range errs {
		f, line := file, 0
		if e.Location != nil {
			if e.Location.File != "" {
				f = e.Location.File
			}
			line = e.Location.Row
		}
		s.Add(f, line, "", "%s: %s", e.Code, e.Message)
	}
}
