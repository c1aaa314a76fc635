package regocheck_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/regocheck"
)

func TestFormat(t *testing.T) {
	changed, err := regocheck.Format(map[string]string{
		"good.rego": "package capgate.deny.sec\n\ndeny contains {\"capability\": \"*\"} if input.caller.tenant == \"blocked\"\n",
		"bad.rego":  "package capgate.deny.sec\ndeny contains {\"capability\":\"*\"} if {input.caller.tenant==\"blocked\"}\n",
	})
	require.NoError(t, err)
	require.Equal(t, []string{"bad.rego"}, changed)

	_, err = regocheck.Format(map[string]string{"broken.rego": "package capgate.deny.sec\n\ndeny contains {\n"})
	require.ErrorContains(t, err, "broken.rego:")
}

func TestCompile(t *testing.T) {
	const annotated = "# METADATA\n# schemas:\n#   - input: schema.input\npackage capgate.deny.sec\n\n"
	for _, tc := range []struct {
		name   string
		src    string
		strict bool
		want   string
	}{
		{"valid", annotated + "deny contains {\"capability\": \"*\"} if input.caller.tenant == \"blocked\"\n", true, ""},
		{"input field outside the schema", annotated + "deny contains {\"capability\": \"*\"} if input.caller.tenant_id == \"blocked\"\n", false, "x.rego:6: rego_type_error: undefined ref: input.caller.tenant_id"},
		{"wrong input type", annotated + "deny contains {\"capability\": \"*\"} if input.caller.authenticated == \"yes\"\n", false, "x.rego:6: rego_type_error"},
		{"strict: unused variable", "package capgate.deny.sec\n\ndeny contains {\"capability\": \"*\"} if {\n\tx := 1\n\tinput.caller.tenant == \"blocked\"\n}\n", true, "x.rego:4: rego_compile_error: assigned var x unused"},
		{"not strict: unused variable", "package capgate.deny.sec\n\ndeny contains {\"capability\": \"*\"} if {\n\tx := 1\n\tinput.caller.tenant == \"blocked\"\n}\n", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := regocheck.Compile(map[string]string{"x.rego": tc.src}, tc.strict)
			if tc.want == "" {
				require.NoError(t, err)
				require.NotNil(t, c)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSchemas(t *testing.T) {
	ss, err := regocheck.Schemas()
	require.NoError(t, err)
	require.NotNil(t, ss.Get(ast.MustParseRef(regocheck.InputSchemaRef)))
}

func TestResultPass(t *testing.T) {
	one := []regocheck.TestResult{{Name: "test_x", Pass: true}}
	for _, tc := range []struct {
		name string
		res  regocheck.Result
		want bool
	}{
		{"all pass", regocheck.Result{Tests: one, Passed: 1}, true},
		{"no tests", regocheck.Result{}, false},
		{"failure", regocheck.Result{Tests: one, Failed: 1}, false},
		{"error", regocheck.Result{Tests: one, Errored: 1}, false},
		{"coverage met", regocheck.Result{Tests: one, Passed: 1, CoverageEnabled: true, Coverage: 95, Threshold: 95}, true},
		{"coverage below", regocheck.Result{Tests: one, Passed: 1, CoverageEnabled: true, Coverage: 94.9, Threshold: 95}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.res.Pass())
		})
	}
}

func TestFormatSource(t *testing.T) {
	out, err := regocheck.FormatSource("x.rego", "package capgate.deny.sec\ndeny contains {\"capability\":\"*\"} if {input.caller.tenant==\"blocked\"}\n")
	require.NoError(t, err)
	require.Equal(t, "package capgate.deny.sec\n\ndeny contains {\"capability\": \"*\"} if input.caller.tenant == \"blocked\"\n", string(out))
}

func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sec"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sec", "deny.rego"), []byte("package capgate.deny.sec\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("not rego"), 0o644))
	mods, err := regocheck.ReadDir(dir)
	require.NoError(t, err)
	require.Equal(t, map[string]string{filepath.Join(dir, "sec", "deny.rego"): "package capgate.deny.sec\n"}, mods)

	_, err = regocheck.ReadDir(filepath.Join(dir, "missing"))
	require.Error(t, err)
}
