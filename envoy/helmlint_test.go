package envoy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
)

// TestChartLintStrict is `helm lint --strict` on the chart, through Helm's own linter (the rules
// `helm lint` runs: Chart.yaml, values and their schema, templates rendered and parsed as YAML,
// dependencies): with the finance example's values and with each form docs/deploy.md shows, no
// message at warning level or above. Without values the chart's own fail messages (no agent, no
// manifests) are what the linter reports, as Helm's lint mode turns fail into information.
func TestChartLintStrict(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"finance example":               financeValues(t, nil),
		"finance example, istio":        financeValues(t, map[string]any{"mode": "istio"}),
		"finance example, sidecar form": financeValues(t, map[string]any{"form": "sidecar"}),
	} {
		t.Run(name, func(t *testing.T) {
			l := lint.RunAll(chartDir, vals, chartRelease)
			var problems []string
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					problems = append(problems, m.Error())
				}
			}
			require.Empty(t, problems, "helm lint --strict: %s", strings.Join(problems, "; "))
			require.NotEmpty(t, l.Messages, "the linter ran (it reports at least the missing icon, as information)")
		})
	}
}
