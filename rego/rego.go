// Package rego embeds capgate's policy: the capgate.authz Rego modules, their
// unit tests and the JSON schema of the policy input. A file that evaluates
// Rego with OPA's rego package reads these through another file (see
// policy/compile's smoke.go), so neither import needs an alias.
package rego

import (
	"embed"
	"io/fs"
	"strings"
)

// FS holds the policy tree: capgate/authz/*.rego (modules and _test.rego
// tests) and schemas/input.json.
//
//go:embed capgate schemas
var FS embed.FS

// Module paths and names used across the code base.
const (
	// Package is the Rego package of the built-in policy.
	Package = "capgate.authz"
	// DenyPackagePrefix is the only package prefix extra modules from
	// policy_dirs may use; they can add refusals, never grants.
	DenyPackagePrefix = "capgate.deny."
	// InputSchema is the path of the input schema inside FS.
	InputSchema = "schemas/input.json"
)

// Modules returns the policy modules (not tests), keyed by path in FS.
func Modules() (map[string]string, error) { return collect(false) }

// Tests returns the Rego unit tests, keyed by path in FS.
func Tests() (map[string]string, error) { return collect(true) }

func collect(tests bool) (map[string]string, error) {
	out := map[string]string{}
	err := fs.WalkDir(FS, "capgate", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".rego") {
			return err
		}
		if strings.HasSuffix(p, "_test.rego") != tests {
			return nil
		}
		b, err := FS.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = string(b)
		return nil
	})
	return out, err
}
