package decisionlog_test

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/regocheck"
	"github.com/capgate/capgate/rego"
	"github.com/capgate/capgate/sidecar/decisionlog"
)

// TestRegoRulesExist holds RegoRule to the embedded policy: every rule a
// decision-log line names must be a rule of it (a rename in authz.rego
// would otherwise point operators at nothing).
func TestRegoRulesExist(t *testing.T) {
	mods, err := rego.Modules()
	require.NoError(t, err)
	c, err := regocheck.Compile(mods, true)
	require.NoError(t, err)
	for _, reason := range []string{"state.ga", "scope.held", "tenant.any", "auth.required", "visibility.public", "deny.sec", "capability.unknown"} {
		rule := decisionlog.RegoRule(reason)
		require.NotEmpty(t, c.GetRules(ast.MustParseRef(rule)), "%s names %s, which the policy does not define", reason, rule)
	}
}
