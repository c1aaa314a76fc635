package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/test/routingdata"
)

// curveRow is one point of route eval --learning-curve --json.
type curveRow struct {
	PerSkill int     `json:"examples_per_skill"`
	Top1     float64 `json:"top1_accuracy"`
	Answered float64 `json:"in_scope_accuracy"`
	Misroute float64 `json:"misroute_rate"`
	OOS      float64 `json:"oos_recall"`
}

// TestRouteEvalLearningCurve (issue 36, item 3): on the tuning data split per
// skill into a usage half and an evaluation half (blocks), the classifier
// given ten examples per skill (five of the manifests', five usage texts,
// redacted as captured ones are) does better on the held-out half than with
// five: the figures docs/routing.md records, held here as floors.
func TestRouteEvalLearningCurve(t *testing.T) {
	routingdata.Load(t) // skips without the data (fails under CI)
	dir, err := routingdata.Dir()
	require.NoError(t, err)
	r := run(t, "route", "eval", "--manifests", filepath.Join(dir, "manifests.json"), "--cases", filepath.Join(dir, "dev.jsonl"),
		"--learning-curve", "--curve", "5,10,15", "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var rows []curveRow
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
	require.Len(t, rows, 3)
	five, ten, fifteen := rows[0], rows[1], rows[2]
	require.Equal(t, []int{5, 10, 15}, []int{five.PerSkill, ten.PerSkill, fifteen.PerSkill})
	t.Logf("5: %+v\n10: %+v\n15: %+v", five, ten, fifteen)
	require.Greater(t, ten.Top1, five.Top1+0.05, "ten examples per skill gain over five")
	require.Greater(t, fifteen.Top1, ten.Top1)
	// The goal issue 36 holds the router to: 80 % top-1 and misroutes
	// ≤ 5 % at ten examples per skill. Measured: 80.1 % top-1 (1,202 of
	// 1,500), 59.0 % answered, 3.1 % misroutes (47), 96 % out-of-scope
	// recall (48 of 50); the other floors leave a few cases of room. Before
	// the weights shared by a tag's skills: 79.7 % top-1 and 59.6 %
	// answered; before the word-vector block: 76.9 % and 57.9 %.
	require.GreaterOrEqual(t, ten.Top1, 0.80)
	require.GreaterOrEqual(t, ten.Answered, 0.58)
	require.LessOrEqual(t, ten.Misroute, 0.04)
	require.Less(t, ten.Misroute, five.Misroute)
	require.GreaterOrEqual(t, ten.OOS, 0.94)
}

// TestRouteEvalExamples: route eval --examples adds the examples to the
// skills as accepted ones would be; on held-out cases the figures move.
func TestRouteEvalExamples(t *testing.T) {
	_, cases := routingdata.Load(t)
	dir, err := routingdata.Dir()
	require.NoError(t, err)
	seen := map[string]int{}
	var usage, held strings.Builder
	for _, c := range cases {
		b, err := json.Marshal(c)
		require.NoError(t, err)
		if c.Expect != nil && seen[*c.Expect] < 5 {
			seen[*c.Expect]++
			usage.Write(b)
			usage.WriteByte('\n')
			continue
		}
		held.Write(b)
		held.WriteByte('\n')
	}
	tmp := t.TempDir()
	ex, ev := filepath.Join(tmp, "usage.jsonl"), filepath.Join(tmp, "held.jsonl")
	require.NoError(t, os.WriteFile(ex, []byte(usage.String()), 0o644))
	require.NoError(t, os.WriteFile(ev, []byte(held.String()), 0o644))
	eval := func(extra ...string) curveRow {
		args := append([]string{"route", "eval", "--manifests", filepath.Join(dir, "manifests.json"), "--cases", ev, "--json"}, extra...)
		r := run(t, args...)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		out := r.stdout
		if len(extra) > 0 {
			require.True(t, strings.HasPrefix(out, "extra examples: 750 for 150 skills"), out)
			out = out[strings.IndexByte(out, '\n')+1:]
		}
		var row curveRow
		require.NoError(t, json.Unmarshal([]byte(out), &row))
		return row
	}
	before, after := eval(), eval("--examples", ex)
	t.Logf("before %+v after %+v", before, after)
	require.Greater(t, after.Top1, before.Top1+0.05)
	require.Less(t, after.Misroute, before.Misroute)

	bad := filepath.Join(tmp, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"text": "hello", "expect": null}`+"\n"), 0o644))
	r := run(t, "route", "eval", "--manifests", filepath.Join(dir, "manifests.json"), "--cases", ev, "--examples", bad)
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, `bad.jsonl:1: an example needs "expect"`)
}
