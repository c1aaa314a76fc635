package regocheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/rego"
)

// denyRule is the only rule the built-in policy reads from an extra module:
// data.capgate.deny.<name>.deny.
const denyRule = "deny"

// ValidateExtraModules checks the modules security teams add beside the
// built-in policy (file name → source). Each must parse as Rego v1 and live
// in a package under capgate.deny.<name>: it can then add refusals through
// `deny contains {"capability": id | "*", "reason": text}` and helper rules
// of its own, but never define rules in capgate.authz, under data.capgate or
// anywhere else. A deny rule the policy would not read (a function, or one in
// a deeper package) is refused too, since it would silently deny nothing.
// Every problem is reported, with file and line.
func ValidateExtraModules(mods map[string]string) error {
	var problems diag.Set
	for _, file := range slices.Sorted(maps.Keys(mods)) {
		m, err := ast.ParseModuleWithOpts(file, mods[file], ParserOptions())
		if err != nil {
			addASTErrors(&problems, file, err)
			continue
		}
		CheckExtraModule(&problems, file, m)
	}
	return problems.ErrOrNil()
}

// CheckExtraModule records in problems why the parsed extra module m (from
// file) breaks the rules of [ValidateExtraModules], if it does. The snapshot
// build applies the same rule to the extra modules of a bundle.
func CheckExtraModule(problems *diag.Set, file string, m *ast.Module) {
	prefix := ast.MustParseRef("data." + strings.TrimSuffix(rego.DenyPackagePrefix, "."))
	pkg := m.Package.Path
	if !pkg.HasPrefix(prefix) || len(pkg) <= len(prefix) {
		problems.Add(file, m.Package.Location.Row, "package",
			"package %s is not allowed: extra modules must use a package under %s<name>; they may only add deny rules, never rules of %s or elsewhere",
			packageName(pkg), rego.DenyPackagePrefix, rego.Package)
		return
	}
	for _, r := range m.Rules {
		checkDenyRule(problems, file, prefix, pkg, r)
	}
	checkInternalRefs(problems, file, m)
}

// checkInternalRefs refuses a reference to a rule of the built-in policy
// whose name starts with "_" (or is not known until evaluation): those are
// its internal helpers, free to change, and no deny module may build on
// them. References through imports are resolved first.
func checkInternalRefs(problems *diag.Set, file string, m *ast.Module) {
	authz := ast.MustParseRef("data." + rego.Package)
	ast.WalkRefs(m, func(r ast.Ref) bool {
		full := resolveImport(r, m.Imports)
		if len(full) <= len(authz) || !full.HasPrefix(authz) {
			return false
		}
		if name, ok := full[len(authz)].Value.(ast.String); ok && !strings.HasPrefix(string(name), "_") {
			return false
		}
		line := 0
		if r[0].Location != nil {
			line = r[0].Location.Row
		}
		problems.Add(file, line, "rule", "%s reads an internal rule of %s: deny modules may read input, data.capgate.capabilities and rules of their own",
			ruleName(full[:len(authz)+1]), rego.Package)
		return false
	})
}

// resolveImport expands a reference whose head is an import's name (its
// alias or its last element) to the imported path.
func resolveImport(r ast.Ref, imports []*ast.Import) ast.Ref {
	head, ok := r[0].Value.(ast.Var)
	if !ok || head.Equal(ast.DefaultRootDocument.Value) || head.Equal(ast.InputRootDocument.Value) {
		return r
	}
	for _, imp := range imports {
		path, ok := imp.Path.Value.(ast.Ref)
		if !ok {
			continue
		}
		name := imp.Alias
		if name == "" {
			last, ok := path[len(path)-1].Value.(ast.String)
			if !ok {
				continue
			}
			name = ast.Var(last)
		}
		if name.Equal(head) {
			return path.Concat(r[1:])
		}
	}
	return r
}

// checkDenyRule refuses a rule named deny that the built-in policy would not
// read: it reads data.capgate.deny.<name>.deny as a set of objects only.
func checkDenyRule(problems *diag.Set, file string, prefix, pkg ast.Ref, r *ast.Rule) {
	path := pkg.Extend(r.Head.Ref())
	for i := len(prefix) + 1; i < len(path); i++ {
		if !path[i].Equal(ast.InternedTerm(denyRule)) {
			continue
		}
		switch {
		case i != len(prefix)+1:
			problems.Add(file, r.Location.Row, "rule",
				"%s is never read: deny rules must be defined in package %s<name> itself", ruleName(path[:i+1]), rego.DenyPackagePrefix)
		case len(r.Head.Args) > 0:
			problems.Add(file, r.Location.Row, "rule",
				"%s must be a set of {\"capability\", \"reason\"} objects, not a function", ruleName(path[:i+1]))
		}
		return
	}
}

func packageName(pkg ast.Ref) string {
	return strings.TrimPrefix(pkg.String(), "data.")
}

func ruleName(path ast.Ref) string {
	return strings.TrimPrefix(path.String(), "data.")
}

// Modules returns the built-in policy modules together with extra, after
// validating extra with [ValidateExtraModules]. A file name used by both is
// an error.
func Modules(extra map[string]string) (map[string]string, error) {
	if err := ValidateExtraModules(extra); err != nil {
		return nil, err
	}
	out, err := rego.Modules()
	if err != nil {
		return nil, fmt.Errorf("read built-in policy: %w", err)
	}
	var problems diag.Set
	for _, file := range slices.Sorted(maps.Keys(extra)) {
		if _, ok := out[file]; ok {
			problems.Add(file, 0, "", "file name is used by the built-in policy")
			continue
		}
		out[file] = extra[file]
	}
	if err := problems.ErrOrNil(); err != nil {
		return nil, err
	}
	return out, nil
}
