package regocheck

import (
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/format"

	"github.com/capgate/capgate/policy/diag"
)

// Format reports which of mods (file name → source) `opa fmt` would change,
// sorted, like `opa fmt -l`. A module that does not parse is an error.
func Format(mods map[string]string) (changed []string, err error) {
	var problems diag.Set
	for _, file := range slices.Sorted(maps.Keys(mods)) {
		out, err := format.SourceWithOpts(file, []byte(mods[file]), formatOpts())
		if err != nil {
			addASTErrors(&problems, file, err)
			continue
		}
		if string(out) != mods[file] {
			changed = append(changed, file)
		}
	}
	if err := problems.ErrOrNil(); err != nil {
		return nil, err
	}
	return changed, nil
}

// formatOpts format as `opa fmt` does for Rego v1 sources.
func formatOpts() format.Opts {
	return format.Opts{RegoVersion: ast.RegoV1, ParserOptions: &ast.ParserOptions{RegoVersion: ast.RegoV1}}
}
