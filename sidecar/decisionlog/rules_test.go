package decisionlog_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/regocheck"
	"github.com/capgate/capgate/rego"
	"github.com/capgate/capgate/sidecar/decisionlog"
)

// TestRegoRulesExist holds RegoRule to the embedded policy: the rule every
// reason code of the policy's source names must be a rule of it (a rename
// in authz.rego would otherwise point operators at nothing).
func TestRegoRulesExist(t *testing.T) {
	mods, err := rego.Modules()
	require.NoError(t, err)
	c, err := regocheck.Compile(mods, true)
	require.NoError(t, err)
	for _, reason := range append(reasonCodes(t, mods), "deny.sec") {
		rule := decisionlog.RegoRule(reason)
		require.NotEmpty(t, c.GetRules(ast.MustParseRef(rule)), "%s names %s, which the policy does not define", reason, rule)
	}
	for _, reason := range []string{"scope.any_of_held", "scope.any_of_missing", "scope.any_of_invalid"} {
		rule := decisionlog.RegoRule(reason)
		require.Contains(t, ruleSource(t, c, rule), `"`+reason+`"`, "%s names %s, which does not produce it", reason, rule)
	}
}

// reasonCodes are every reason code the policy's source produces
// (_grant("x"), _refuse_detail("x", ...), ...).
func reasonCodes(t *testing.T, mods map[string]string) []string {
	t.Helper()
	re := regexp.MustCompile(`_(?:grant|refuse)(?:_detail)?\("([a-z_]+\.[a-z_]+)"`)
	var out []string
	for path, src := range mods {
		if strings.HasSuffix(path, "_test.rego") {
			continue
		}
		for _, m := range re.FindAllStringSubmatch(src, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	require.Greater(t, len(out), 20, "the policy's reason codes")
	require.Contains(t, out, "scope.any_of_held")
	return out
}

// ruleSource is the source text of every definition of rule.
func ruleSource(t *testing.T, c *ast.Compiler, rule string) string {
	t.Helper()
	var b strings.Builder
	for _, r := range c.GetRules(ast.MustParseRef(rule)) {
		b.WriteString(r.String())
	}
	return b.String()
}
