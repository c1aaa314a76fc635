package rego_test

import (
	"bytes"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/regocheck"
	"github.com/capgate/capgate/rego"
)

// coverageThreshold is the share of the policy's lines the Rego tests must run.
const coverageThreshold = 95.0

func TestRegoUnitTests(t *testing.T) {
	var out bytes.Buffer
	res, err := regocheck.RunTests(t.Context(), &out, true, coverageThreshold)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	require.NotEmpty(t, res.Tests)
	for _, tr := range res.Tests {
		if !tr.Pass {
			t.Errorf("%s.%s (%s) failed: %s%s", tr.Package, tr.Name, tr.Location, tr.Error, tr.Output)
		}
	}
	require.Zero(t, res.Failed+res.Errored)
	require.True(t, res.CoverageEnabled)
	require.GreaterOrEqualf(t, res.Coverage, coverageThreshold, "uncovered lines: %v", res.Uncovered)
	require.True(t, res.Pass())
}

func TestModulesFormatted(t *testing.T) {
	for _, load := range []func() (map[string]string, error){rego.Modules, rego.Tests} {
		mods, err := load()
		require.NoError(t, err)
		require.NotEmpty(t, mods)
		changed, err := regocheck.Format(mods)
		require.NoError(t, err)
		require.Empty(t, changed, "run opa fmt -w on these files")
	}
}

func TestCompileStrict(t *testing.T) {
	mods, err := rego.Modules()
	require.NoError(t, err)
	tests, err := rego.Tests()
	require.NoError(t, err)
	for f, src := range tests {
		mods[f] = src
	}
	c, err := regocheck.Compile(mods, true)
	require.NoError(t, err)
	require.NotNil(t, c.GetRules(ast.MustParseRef("data.capgate.authz.decision")))
}
