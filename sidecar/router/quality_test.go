package router

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/test/routingdata"
)

type devCase = routingdata.Case

// loadDev reads the CLINC150 skills and dev cases beside the repository
// (../shared/data/routing), skipping the test when they are absent and
// failing it under CI, where a skip would hide that the figures were not
// checked (see routingdata.Load).
func loadDev(t *testing.T) (*manifest.Registry, []devCase) {
	t.Helper()
	raw, cases := routingdata.Load(t)
	reg, err := manifest.LoadJSONArray("manifests.json", raw, manifest.Options{})
	require.NoError(t, err)
	return reg, cases
}

// quality are the figures of issue 25 over routed decisions.
type quality struct {
	inScope, misrouted, clarified   int // in-scope cases whose skill is a candidate
	excluded, reached, reachedGuard int // cases whose skill the caller may not use
}

func (q *quality) route(t *testing.T, ix *Index, text string, c rights, expect string) {
	d, perr := ix.Route(&protocol.MessageInfo{Parts: []protocol.PartInfo{{Kind: "text", MediaType: "text/plain", Text: text}}}, c)
	require.Nil(t, perr)
	routed := d.Capability != ""
	if c.entitled[expect] {
		q.inScope++
		switch {
		case !routed:
			q.clarified++
		case d.Capability != expect:
			q.misrouted++
		}
		return
	}
	q.excluded++
	if routed {
		q.reached++
		if ix.Mode(d.Capability) != manifest.RoutingAuto {
			q.reachedGuard++
		}
	}
}

func rate(a, b int) float64 { return float64(a) / float64(max(b, 1)) }

// TestRoutingQuality measures, on the dev set through the router itself at
// the default threshold: the misroute rate with every skill a candidate
// (target ≤ 5 %); the rate at which a message meant for a skill the caller
// may not use reaches another skill, with callers entitled to 1, 2, 3, 5
// or 8 random skills and a third of the skills marked confirm or explicit
// (target ≤ 2 %, and 0 for confirm/explicit skills); the clarification
// rate. docs/routing.md reports the figures.
func TestRoutingQuality(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	reg, cases := loadDev(t)
	all := reg.All()
	caps := append([]manifest.Capability(nil), all...)
	rng := rand.New(rand.NewPCG(25, 25))
	for i := range caps {
		switch rng.IntN(6) {
		case 0:
			caps[i].Routing.Mode = manifest.RoutingConfirm
		case 1:
			caps[i].Routing.Mode = manifest.RoutingExplicit
		}
	}
	guarded := manifest.NewRegistry(caps)
	th := config.DefaultRouterThreshold

	// Every skill a candidate (the 150-way figures of the classifier).
	ix := NewIndex(reg, th)
	everyone := rights{entitled: map[string]bool{}}
	for _, c := range all {
		everyone.entitled[c.ID] = true
	}
	var full quality
	oos, oosClarified := 0, 0
	for _, c := range cases {
		if c.Expect == nil {
			oos++
			d, perr := ix.Route(&protocol.MessageInfo{Parts: []protocol.PartInfo{{Kind: "text", MediaType: "text/plain", Text: c.Text}}}, everyone)
			require.Nil(t, perr)
			if d.Capability == "" {
				oosClarified++
			}
			continue
		}
		full.route(t, ix, c.Text, everyone, *c.Expect)
	}
	t.Logf("all %d skills @%.2f: misroutes %.2f%%, in-scope clarification %.2f%%, out-of-scope clarified %.0f%% (n %d/%d)",
		len(all), th, 100*rate(full.misrouted, full.inScope), 100*rate(full.clarified, full.inScope), 100*rate(oosClarified, oos), full.inScope, oos)
	require.LessOrEqual(t, rate(full.misrouted, full.inScope), 0.05, "misroute rate at the default threshold")

	// Callers entitled to a few skills, in the registry as it is (every
	// skill auto) and with a third of the skills confirm or explicit.
	for _, reg := range []struct {
		name string
		ix   *Index
	}{{"all auto", ix}, {"a third confirm/explicit", NewIndex(guarded, th)}} {
		var small quality
		ks := []int{1, 2, 3, 5, 8}
		rng := rand.New(rand.NewPCG(2, 25))
		for n, c := range cases {
			if c.Expect == nil {
				continue
			}
			k := ks[n%len(ks)]
			perm := rng.Perm(len(all))
			with := rights{entitled: map[string]bool{*c.Expect: true}}
			without := rights{entitled: map[string]bool{}}
			for _, p := range perm {
				id := all[p].ID
				if id == *c.Expect {
					continue
				}
				if len(with.entitled) < k {
					with.entitled[id] = true
				}
				if len(without.entitled) < k {
					without.entitled[id] = true
				}
			}
			small.route(t, reg.ix, c.Text, with, *c.Expect)
			small.route(t, reg.ix, c.Text, without, *c.Expect)
		}
		t.Logf("%s, 1-8 candidates @%.2f: meant for a skill the caller may not use, reached another %.2f%% (confirm/explicit %d) of %d; "+
			"own skill a candidate: misroutes %.2f%%, asked %.2f%% of %d",
			reg.name, th, 100*rate(small.reached, small.excluded), small.reachedGuard, small.excluded,
			100*rate(small.misrouted, small.inScope), 100*rate(small.clarified, small.inScope), small.inScope)
		require.Zero(t, small.reachedGuard, "a confirm or explicit skill is never reached by a guess")
		require.LessOrEqual(t, rate(small.reached, small.excluded), 0.02, "messages for a skill the caller may not use")
	}
}
