package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func out(op string, start, took float64, kind string, expected, server bool) soakOutcome {
	return soakOutcome{op: op, start: at(start), end: at(start + took), kind: kind, expected: expected, server: server}
}

func TestWindows(t *testing.T) {
	outs := []soakOutcome{
		out("send", 0.1, 0.010, kindOK, true, false),
		out("cancel", 4.9, 0.020, "task-not-cancelable", true, false),
		out("get", 5.0, 0.030, kindUnavailable, false, true), // a window starts at its bound
		out("get", 6.0, 0.040, "task-not-found", false, false),
		out("list", 10.0, 0.001, kindOK, true, false), // at the end: outside
		out("list", -0.1, 0.001, kindOK, true, false), // before the start: outside
	}
	ws := windows(outs, t0, at(10), 5*time.Second)
	require.Len(t, ws, 2)
	require.Equal(t, 2, ws[0].n)
	require.Equal(t, 1, ws[0].ok)
	require.Equal(t, 1, ws[0].refused)
	require.Empty(t, ws[0].unexpected)
	require.Equal(t, 20*time.Millisecond, ws[0].p99())
	require.Equal(t, 2, ws[1].n)
	require.Equal(t, 1, ws[1].unavailable)
	require.Equal(t, 1, ws[1].server)
	require.Equal(t, map[string]int{"get: task-not-found": 1}, ws[1].unexpected)
	require.Equal(t, 40*time.Millisecond, ws[1].p99())
}

func TestP99NearestRank(t *testing.T) {
	w := &window{}
	require.Zero(t, w.p99())
	for i := 100; i >= 1; i-- { // unsorted on purpose
		w.latencies = append(w.latencies, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 99*time.Millisecond, w.p99())
	w.latencies = append(w.latencies, time.Second)
	require.Equal(t, 100*time.Millisecond, w.p99(), "the 100th of 101")
}

func TestGrowth(t *testing.T) {
	var s []sample
	for i := range 30 { // one sample a second: 10 MiB, a spike at 16 s, then 12 MiB from 25 s
		v := 10.0
		if i >= 25 {
			v = 12
		}
		if i == 16 {
			v = 100 // one GC cycle late: the median ignores it
		}
		s = append(s, sample{at(float64(i)), v})
	}
	g, ok := growth(s, at(15), 5*time.Second)
	require.True(t, ok)
	require.Equal(t, 2.0, g)

	_, ok = growth(s[:17], at(15), 5*time.Second)
	require.False(t, ok, "the last span overlaps the first: no growth to measure")
	_, ok = growth(nil, at(15), 5*time.Second)
	require.False(t, ok)
}

func TestVerdicts(t *testing.T) {
	w := outage{down: at(30), up: at(32)}
	const grace = 2 * time.Second
	pass := []soakOutcome{
		out("send", 1, 0.01, kindOK, true, false),
		out("cancel", 2, 0.01, "task-not-cancelable", true, false),
		out("get", 29.9, 0.2, kindUnavailable, false, true), // started before, ended after the kill
		out("send", 33.9, 0.01, kindUnavailable, false, true),
	}
	problems, in := verdicts(pass, w, grace)
	require.Empty(t, problems)
	require.Equal(t, 2, in)

	for name, o := range map[string]soakOutcome{
		"store-unavailable before the kill":   out("get", 29.0, 0.5, kindUnavailable, false, true),
		"store-unavailable after the grace":   out("get", 34.0, 0.01, kindUnavailable, false, true),
		"another 5xx, even in the window":     out("stream", 31, 0.01, "internal-error", false, true),
		"an unexpected refusal":               out("get", 40, 0.01, "task-not-found", false, false),
		"a 5xx with an expected-looking kind": out("cancel", 40, 0.01, "task-not-cancelable", true, true),
	} {
		problems, _ := verdicts(append(pass, o), w, grace)
		require.NotEmpty(t, problems, name)
		require.Contains(t, strings.Join(problems, "; "), o.op, name)
	}
}

// TestSoakPlan: for every allowed length, the bindings acknowledged
// before the restart outlive the read-back after the run, and at least two
// windows are left after the warm-up to measure growth in, the restart
// among them.
func TestSoakPlan(t *testing.T) {
	for d := soakMinDuration; d <= 30*time.Minute; d += 7 * time.Second {
		ttl, warmup := soakPlan(d)
		readBack := d + 2*time.Second // the run, the last quiet point
		require.Greater(t, ttl, readBack+soakCheckMargin, "%v: tasks acknowledged before the restart are still bound at the read-back", d)
		require.GreaterOrEqual(t, d-warmup, 2*soakWindow, "%v: two windows after the warm-up", d)
		require.Less(t, warmup, d/2, "%v: the restart is measured", d)
	}
}
