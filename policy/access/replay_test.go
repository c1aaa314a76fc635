package access_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/access"
	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
)

// replayCallers are anonymous, and tenants × scope sets.
func replayCallers() []access.Caller {
	out := []access.Caller{{Scopes: []string{}}}
	for _, tenant := range []string{"acme", "globex", "initech"} {
		for _, scopes := range [][]string{{}, {"recon.run"}, {"audit.read", "recon.run"}, {"export.run", "finance.read"}} {
			out = append(out, access.Caller{Issuer: "https://idp.example.com", Authenticated: true, Subject: "s-" + tenant, Tenant: tenant, Scopes: scopes})
		}
	}
	return out
}

// record is the traffic of every caller asking every capability twice, an
// hour apart, answered by e (the serving revision).
func record(t *testing.T, e *engine.Engine, start time.Time) []access.Recorded {
	t.Helper()
	var out []access.Recorded
	for round := range 2 {
		for _, c := range replayCallers() {
			for _, m := range e.Snapshot().Registry.All() {
				d, err := e.Decide(context.Background(), engine.Caller{Authenticated: c.Authenticated, Subject: c.Subject, Tenant: c.Tenant, Scopes: c.Scopes}, m.ID)
				require.NoError(t, err)
				out = append(out, access.Recorded{Time: start.Add(time.Duration(round) * time.Hour), Revision: e.Revision(), Caller: c,
					Operation: "SendMessage", Capability: m.ID, Entitled: d.Entitled, Rules: d.EntitledReasons})
			}
		}
	}
	return out
}

func replayAll(t *testing.T, r *access.Replay, qs []access.Recorded) *access.ReplayReport {
	t.Helper()
	for _, q := range qs {
		require.NoError(t, r.Event(context.Background(), q))
	}
	require.NoError(t, r.Event(context.Background())) // an event with no question
	return r.Report()
}

// TestReplayFlipsAreTheModelsDifferences: over every caller × capability,
// the flips are exactly the questions the serving and the head engines
// answer differently, each counted per recorded event, losses first.
func TestReplayFlipsAreTheModelsDifferences(t *testing.T) {
	caps := compiletest.Capabilities()
	head := make([]manifest.Capability, len(caps))
	copy(head, caps)
	for i := range head {
		switch head[i].ID {
		case "reconcile-invoice-v2":
			head[i].Tenants = manifest.Tenants{All: true} // widened: initech gains it
		case "audit-ledger":
			head[i].RequiresScopes = []string{"audit.admin"} // a scope grant removed
		}
	}
	serving, next := benchEngine(t, manifest.NewRegistry(caps)), benchEngine(t, manifest.NewRegistry(head))
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	events := record(t, serving, start)

	want := map[string]int{}
	for _, q := range events {
		d, err := next.Decide(context.Background(), engine.Caller{Authenticated: q.Caller.Authenticated, Subject: q.Caller.Subject, Tenant: q.Caller.Tenant, Scopes: q.Caller.Scopes}, q.Capability)
		require.NoError(t, err)
		if d.Entitled != q.Entitled {
			want[string(map[bool]access.Change{true: access.Loss, false: access.Gain}[q.Entitled])+" "+q.Capability+" "+q.Caller.String()]++
		}
	}
	require.NotEmpty(t, want)

	rep := replayAll(t, access.NewReplay(next, nil, time.Time{}, time.Time{}), events)
	got := map[string]int{}
	losses := true
	for _, f := range rep.Flips {
		got[string(f.Change)+" "+f.Capability+" "+f.Caller.String()] += f.Count
		require.Equal(t, start, f.First)
		require.Equal(t, start.Add(time.Hour), f.Last)
		require.Equal(t, []string{serving.Revision()}, f.Revisions)
		if f.Change == access.Gain {
			losses = false
		} else {
			require.True(t, losses, "losses first")
		}
	}
	require.Equal(t, want, got)
	require.Equal(t, len(events)+1, rep.Events)
	require.Equal(t, 1, rep.Skipped)
	require.Equal(t, len(events)/2, rep.Distinct, "each distinct question once")
	require.Equal(t, len(events), rep.Questions)
	require.Equal(t, rep.Questions, rep.Unchanged+rep.Losses()+rep.Gains())
	tally := 0
	for _, c := range rep.ByCapability {
		tally += c.Losses + c.Gains
		require.Contains(t, []string{"reconcile-invoice-v2", "audit-ledger"}, c.Capability)
	}
	require.Equal(t, rep.Losses()+rep.Gains(), tally)

	t.Run("against itself nothing flips", func(t *testing.T) {
		rep := replayAll(t, access.NewReplay(serving, serving, time.Time{}, time.Time{}), events)
		require.Empty(t, rep.Flips)
		require.Empty(t, rep.Unreproduced)
		require.Equal(t, rep.Questions, rep.Unchanged)
	})
	t.Run("a base that did not serve them", func(t *testing.T) {
		flips := len(rep.Flips)
		rep := replayAll(t, access.NewReplay(serving, next, time.Time{}, time.Time{}), events)
		require.Empty(t, rep.Flips, "what the base does not reproduce is not a flip")
		n := 0
		for _, f := range rep.Unreproduced {
			n += f.Count
		}
		require.Len(t, rep.Unreproduced, flips)
		sum := 0
		for _, v := range want {
			sum += v
		}
		require.Equal(t, sum, n)
	})
	t.Run("time window", func(t *testing.T) {
		rep := replayAll(t, access.NewReplay(next, nil, start.Add(time.Minute), time.Time{}), events)
		require.Equal(t, len(events)/2, rep.OutsideWindow)
		require.Equal(t, len(events)/2, rep.Questions)
		for _, f := range rep.Flips {
			require.Equal(t, start.Add(time.Hour), f.First)
		}
		undated := events[0]
		undated.Time = time.Time{}
		rep = replayAll(t, access.NewReplay(next, nil, time.Time{}, start), []access.Recorded{undated, events[0], events[len(events)-1]})
		require.Equal(t, 2, rep.OutsideWindow, "undated and later events are outside a window")
		require.Equal(t, 1, rep.Questions)
	})
	t.Run("renderings", func(t *testing.T) {
		for _, write := range []func(*bytes.Buffer, *access.ReplayReport) error{
			func(b *bytes.Buffer, r *access.ReplayReport) error { return access.WriteReplayText(b, r) },
			func(b *bytes.Buffer, r *access.ReplayReport) error { return access.WriteReplayMarkdown(b, r) },
			func(b *bytes.Buffer, r *access.ReplayReport) error { return access.WriteReplayJSON(b, r) },
			func(b *bytes.Buffer, r *access.ReplayReport) error { return access.WriteReplayHTML(b, r) },
		} {
			var b bytes.Buffer
			require.NoError(t, write(&b, rep))
			require.Contains(t, b.String(), "audit-ledger")
			require.Contains(t, b.String(), "reconcile-invoice-v2")
			require.NotContains(t, b.String(), "lookup-invoice", "an unchanged capability is not reported")
		}
	})
}
