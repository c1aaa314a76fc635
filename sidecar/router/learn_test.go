package router

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/protocol"
)

// TestLearnedExamplesCannotWiden (issue 36, item 4): learned examples change
// scores only. Each live capability of the fixture in turn is given, as
// accepted routing examples, every other skill's examples and names (a
// poisoned examples file); every such text, sent by every caller (each
// subset of the capabilities entitled), is then routed in every mode of that
// capability. Whatever the examples: the router never chooses a confirm or
// explicit capability by itself (a confirmation or a clarification, never a
// pick), and never offers or chooses a capability the caller is not
// entitled to.
func TestLearnedExamplesCannotWiden(t *testing.T) {
	base := fixture().All()
	var live []string
	var texts []string
	for _, c := range base {
		if c.Routable() {
			live = append(live, c.ID)
		}
		texts = append(texts, c.Skill.Name)
		texts = append(texts, c.Skill.Examples...)
	}
	require.GreaterOrEqual(t, len(live), 3)
	checked, autoPicked, confirmed := 0, 0, 0
	for _, target := range live {
		for _, mode := range []manifest.RoutingMode{manifest.RoutingAuto, manifest.RoutingConfirm, manifest.RoutingExplicit} {
			caps := slices.Clone(base)
			for i := range caps {
				if caps[i].ID == target {
					caps[i].Routing = manifest.Routing{Mode: mode}
					caps[i].RoutingExamples = append(slices.Clone(texts), strings.Repeat(caps[i].Skill.Name+" ", 3))
				}
			}
			ix := NewIndex(manifest.NewRegistry(caps), 0.6)
			for mask := 0; mask < 1<<len(live); mask++ {
				caller := rights{entitled: map[string]bool{}}
				for i, id := range live {
					if mask&(1<<i) != 0 {
						caller.entitled[id] = true
					}
				}
				for _, s := range texts {
					d, perr := ix.Route(&protocol.MessageInfo{Parts: []protocol.PartInfo{text(s)}}, caller)
					if perr != nil {
						continue // no candidate takes text: nothing is reachable
					}
					checked++
					if !caller.entitled[target] {
						require.NotEqual(t, target, d.Capability, "%s (%s) reached by a caller not entitled to it: %q", target, mode, s)
						for _, c := range d.Candidates {
							require.NotEqual(t, target, c.ID, "%s offered to a caller not entitled to it: %q", target, s)
						}
					}
					autoPicked += btoi(d.Capability == target && mode == manifest.RoutingAuto && d.Layer == LayerClassifier)
					confirmed += btoi(d.Layer == LayerConfirm && mode == manifest.RoutingConfirm && d.Candidates[0].ID == target)
					if d.Capability == target && mode != manifest.RoutingAuto {
						require.Failf(t, "chosen by the router alone", "%s is %s but was routed (layer %s) for %q", target, mode, d.Layer, s)
					}
					if d.Capability != "" {
						require.True(t, caller.entitled[d.Capability], "routed to %s, not entitled", d.Capability)
					}
				}
			}
		}
	}
	require.Greater(t, checked, 500)
	// The poisoned examples do move the classifier: the same texts reach the
	// capability when it is auto, and are put to the caller when it is confirm.
	require.Positive(t, autoPicked)
	require.Positive(t, confirmed)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLearnedExamplesRoute: an accepted example moves the classifier (the
// text now routes to its capability), and the card's examples are untouched.
func TestLearnedExamplesRoute(t *testing.T) {
	partner := rights{entitled: set("lookup-invoice", "reconcile-invoice", "extract-invoice-fields")}
	msg := protocol.MessageInfo{Parts: []protocol.PartInfo{text("where does my supplier bill stand")}}
	d, perr := NewIndex(fixture(), 0.6).Route(&msg, partner)
	require.Nil(t, perr)
	require.Equal(t, LayerClarify, d.Layer)
	caps := fixture().All()
	for i := range caps {
		if caps[i].ID == "lookup-invoice" {
			caps[i].RoutingExamples = []string{"where does my supplier bill stand", "status of the bill from <id> for <number>"}
		}
	}
	reg := manifest.NewRegistry(caps)
	d, perr = NewIndex(reg, 0.6).Route(&msg, partner)
	require.Nil(t, perr)
	require.Equal(t, "lookup-invoice", d.Capability)
	m, _ := reg.Get("lookup-invoice")
	require.Equal(t, []string{"What is the status of invoice INV-1001?", "Look up invoice 4711"}, m.Skill.Examples)
	require.Equal(t, []string{"What is the status of invoice INV-1001?", "Look up invoice 4711", "where does my supplier bill stand", "status of the bill from for"},
		examplesOf(m)[len(examplesOf(m))-4:], "placeholders are not indexed")
}
