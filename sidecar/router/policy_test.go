package router

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/protocol"
)

// withRouting is the fixture with routing policies set.
func withRouting(policies map[string]manifest.Routing) *manifest.Registry {
	caps := append([]manifest.Capability(nil), fixture().All()...)
	for i := range caps {
		caps[i].Routing = policies[caps[i].ID]
	}
	return manifest.NewRegistry(caps)
}

// TestRoutingModes: every mode against every way a message can reach a
// capability: the router's own pick (single, structured, classifier),
// a hint, and the caller's choice in a clarification.
func TestRoutingModes(t *testing.T) {
	partner := rights{entitled: set("lookup-invoice", "reconcile-invoice", "extract-invoice-fields")}
	onlyReconcile := rights{entitled: set("reconcile-invoice")}
	reconcile := protocol.MessageInfo{Parts: []protocol.PartInfo{pdf(), text("reconcile invoice INV-20931 against its PO")}}
	hinted := reconcile
	hinted.SkillHint = "reconcile-invoice"
	for _, tt := range []struct {
		mode   manifest.RoutingMode
		caller Caller
		layer  Layer // the router's own pick
	}{
		{manifest.RoutingAuto, partner, LayerClassifier},
		{"", partner, LayerClassifier},
		{manifest.RoutingConfirm, partner, LayerConfirm},
		{manifest.RoutingExplicit, partner, LayerClarify},
		{manifest.RoutingAuto, onlyReconcile, LayerSingle},
		{manifest.RoutingConfirm, onlyReconcile, LayerConfirm},
		{manifest.RoutingExplicit, onlyReconcile, LayerClarify},
	} {
		ix := NewIndex(withRouting(map[string]manifest.Routing{"reconcile-invoice": {Mode: tt.mode}}), 0.6)
		d, err := ix.Route(&reconcile, tt.caller)
		require.Nil(t, err)
		require.Equal(t, tt.layer, d.Layer, "mode %q", tt.mode)
		if tt.layer == LayerClassifier || tt.layer == LayerSingle {
			require.Equal(t, "reconcile-invoice", d.Capability)
		} else {
			require.Empty(t, d.Capability, "mode %q: never chosen by the router alone", tt.mode)
			require.Equal(t, "reconcile-invoice", d.Candidates[0].ID, "the question names it")
		}
		if tt.layer == LayerConfirm {
			require.Len(t, d.Candidates, 1)
		}
		// A hint is the caller's own choice: every mode takes it.
		d, err = ix.Route(&hinted, tt.caller)
		require.Nil(t, err)
		require.Equal(t, LayerHint, d.Layer)
		require.Equal(t, "reconcile-invoice", d.Capability)
		// So is a choice in a clarification.
		d, err = ix.Resolve(&protocol.MessageInfo{Parts: []protocol.PartInfo{text("reconcile-invoice")}}, []string{"lookup-invoice", "reconcile-invoice"}, partner)
		require.Nil(t, err)
		require.Equal(t, "reconcile-invoice", d.Capability)
		// More text in answer is the router's pick again.
		d, err = ix.Resolve(&protocol.MessageInfo{Parts: []protocol.PartInfo{text("reconcile invoice INV-20931 against its PO")}},
			[]string{"lookup-invoice", "reconcile-invoice"}, partner)
		require.Nil(t, err)
		if tt.mode == manifest.RoutingConfirm || tt.mode == manifest.RoutingExplicit {
			require.Empty(t, d.Capability, "mode %q", tt.mode)
		}
	}
}

// TestMinConfidence: a capability's own threshold replaces router.threshold
// for it, above or below.
func TestMinConfidence(t *testing.T) {
	partner := rights{entitled: set("lookup-invoice", "reconcile-invoice", "extract-invoice-fields")}
	msg := protocol.MessageInfo{Parts: []protocol.PartInfo{pdf(), text("reconcile invoice INV-20931 against its PO")}}
	d, err := NewIndex(fixture(), 0.6).Route(&msg, partner)
	require.Nil(t, err)
	require.Equal(t, "reconcile-invoice", d.Capability)
	conf := d.Confidence
	require.Less(t, conf, 1.0)

	strict := NewIndex(withRouting(map[string]manifest.Routing{"reconcile-invoice": {MinConfidence: 1}}), 0.6)
	d, err = strict.Route(&msg, partner)
	require.Nil(t, err)
	require.Equal(t, LayerClarify, d.Layer, "%.3f is under its own 1.0", conf)
	require.Equal(t, 1.0, strict.ThresholdFor("reconcile-invoice"))
	require.Equal(t, 0.6, strict.ThresholdFor("lookup-invoice"))

	lax := NewIndex(withRouting(map[string]manifest.Routing{"reconcile-invoice": {MinConfidence: conf}}), 1)
	d, err = lax.Route(&msg, partner)
	require.Nil(t, err)
	require.Equal(t, "reconcile-invoice", d.Capability, "its own threshold admits it under router.threshold 1")
}
