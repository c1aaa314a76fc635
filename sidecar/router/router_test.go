package router

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/router/classifier"
)

func fixture() *manifest.Registry {
	return manifest.NewRegistry([]manifest.Capability{
		{ID: "lookup-invoice", State: manifest.StateGA, Skill: manifest.Skill{
			Name: "Look up an invoice", Description: "Finds an invoice by number and returns its status, amount and due date.",
			Tags: []string{"finance", "invoices"}, Examples: []string{"What is the status of invoice INV-1001?", "Look up invoice 4711"},
			InputModes: []string{"text/plain"}, OutputModes: []string{"application/json"}}},
		{ID: "reconcile-invoice", State: manifest.StateGA, Skill: manifest.Skill{
			Name: "Reconcile an invoice", Description: "Matches an invoice to its purchase order and lists line-level differences.",
			Tags: []string{"finance", "reconciliation"}, Examples: []string{"Reconcile this invoice against the purchase order", "reconcile invoice INV-20931 against its PO"},
			InputModes: []string{"text/plain", "application/pdf"}, OutputModes: []string{"application/json"}}},
		{ID: "extract-invoice-fields", State: manifest.StateGA, Skill: manifest.Skill{
			Name: "Extract invoice fields", Description: "Extracts the header fields (number, date, supplier, total) from an invoice document.",
			Tags: []string{"finance", "documents"}, Examples: []string{"Extract the fields from this invoice PDF", "read the supplier and total from this document"},
			InputModes: []string{"text/plain", "application/pdf"}, OutputModes: []string{"application/json"}}},
		{ID: "reconcile-invoice-v0", State: manifest.StateRemoved, ReplacedBy: "reconcile-invoice", Skill: manifest.Skill{
			Name: "Reconcile an invoice (v0)", Description: "Old reconciliation of invoices against purchase orders.",
			Tags: []string{"finance"}, InputModes: []string{"text/plain", "application/pdf"}}},
	})
}

// rights is a test Caller.
type rights struct{ entitled, would map[string]bool }

func (r rights) Entitled(id string) bool        { return r.entitled[id] }
func (r rights) WouldBeEntitled(id string) bool { return r.would[id] }

func set(ids ...string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func text(s string) protocol.PartInfo {
	return protocol.PartInfo{Kind: "text", MediaType: "text/plain", Text: s}
}
func pdf() protocol.PartInfo { return protocol.PartInfo{Kind: "raw", MediaType: "application/pdf"} }

func TestRoute(t *testing.T) {
	ix := NewIndex(fixture(), 0.6)
	partner := rights{entitled: set("lookup-invoice", "reconcile-invoice", "extract-invoice-fields"), would: set("reconcile-invoice-v0")}
	public := rights{entitled: set("lookup-invoice", "extract-invoice-fields")}
	nobody := rights{}

	tests := []struct {
		name      string
		msg       protocol.MessageInfo
		caller    Caller
		layer     Layer
		capID     string
		code      protocol.Code
		ignored   string
		candidate []string
		accepted  string // the error's accepted input types
	}{
		{name: "reference example: pdf + reconcile text", caller: partner,
			msg:   protocol.MessageInfo{Parts: []protocol.PartInfo{pdf(), text("reconcile this against the PO")}},
			layer: LayerClassifier, capID: "reconcile-invoice"},
		{name: "without recon.run a reconcile request is asked, not sent to the only fitting capability", caller: public,
			msg:   protocol.MessageInfo{Parts: []protocol.PartInfo{pdf(), text("reconcile this against the PO")}},
			layer: LayerClarify, candidate: []string{"extract-invoice-fields"}},
		{name: "the only fitting capability, when the message fits it", caller: public,
			msg:   protocol.MessageInfo{Parts: []protocol.PartInfo{pdf(), text("extract the fields from this invoice pdf")}},
			layer: LayerSingle, capID: "extract-invoice-fields"},
		{name: "entitled hint honoured", caller: partner,
			msg:   protocol.MessageInfo{SkillHint: "extract-invoice-fields", Parts: []protocol.PartInfo{pdf(), text("reconcile this against the PO")}},
			layer: LayerHint, capID: "extract-invoice-fields"},
		{name: "hint for a capability not entitled is ignored", caller: public,
			msg:   protocol.MessageInfo{SkillHint: "reconcile-invoice", Parts: []protocol.PartInfo{text("status of invoice INV-1001")}},
			layer: LayerClassifier, capID: "lookup-invoice", ignored: "reconcile-invoice"},
		{name: "hint for a removed capability the caller would have had names the replacement", caller: partner,
			msg:  protocol.MessageInfo{SkillHint: "reconcile-invoice-v0", Parts: []protocol.PartInfo{text("x")}},
			code: protocol.UnsupportedOperation},
		{name: "hint for a removed capability another caller never had is ignored", caller: public,
			msg:   protocol.MessageInfo{SkillHint: "reconcile-invoice-v0", Parts: []protocol.PartInfo{pdf()}},
			layer: LayerClarify, candidate: []string{"extract-invoice-fields"}, ignored: "reconcile-invoice-v0"},
		{name: "no capability accepts the media type", caller: partner,
			msg:  protocol.MessageInfo{Parts: []protocol.PartInfo{{Kind: "raw", MediaType: "image/png"}}},
			code: protocol.ContentTypeNotSupported, accepted: "application/pdf,text/plain"},
		{name: "accepted output modes that nothing produces", caller: partner,
			msg:  protocol.MessageInfo{AcceptedOutputModes: []string{"image/png"}, Parts: []protocol.PartInfo{text("reconcile")}},
			code: protocol.ContentTypeNotSupported, accepted: "application/pdf,text/plain"},
		{name: "the input types named are the caller's capabilities'", caller: rights{entitled: set("lookup-invoice")},
			msg:  protocol.MessageInfo{Parts: []protocol.PartInfo{pdf()}},
			code: protocol.ContentTypeNotSupported, accepted: "text/plain"},
		{name: "accepted output modes are normalised", caller: public,
			msg: protocol.MessageInfo{AcceptedOutputModes: []string{"IMAGE/PNG", "Application/JSON; charset=utf-8"},
				Parts: []protocol.PartInfo{text("status of invoice INV-1001")}},
			layer: LayerClassifier, capID: "lookup-invoice"},
		{name: "nothing entitled", caller: nobody,
			msg:  protocol.MessageInfo{Parts: []protocol.PartInfo{text("hello")}},
			code: protocol.Unauthorized},
		{name: "vague text asks for clarification among live candidates", caller: partner,
			msg:       protocol.MessageInfo{Parts: []protocol.PartInfo{text("hello there")}},
			layer:     LayerClarify,
			candidate: []string{"extract-invoice-fields", "lookup-invoice", "reconcile-invoice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ix.Route(&tt.msg, tt.caller)
			if tt.code != "" {
				require.NotNil(t, err)
				require.Equal(t, tt.code, err.Code, err.Message)
				if tt.accepted != "" {
					require.Equal(t, tt.accepted, err.Metadata["accepted"])
				}
				return
			}
			require.Nil(t, err)
			require.Equal(t, tt.layer, d.Layer)
			require.Equal(t, tt.capID, d.Capability)
			require.Equal(t, tt.ignored, d.IgnoredHint)
			require.Positive(t, d.Considered, "the candidates are counted on every layer")
			if tt.candidate != nil {
				var ids []string
				for _, c := range d.Candidates {
					ids = append(ids, c.ID)
				}
				require.ElementsMatch(t, tt.candidate, ids)
				require.NotContains(t, ids, "reconcile-invoice-v0", "a tombstone is never offered")
			}
		})
	}
}

func TestTombstoneNamesReplacement(t *testing.T) {
	ix := NewIndex(fixture(), 0.6)
	err := ix.Tombstone("reconcile-invoice-v0")
	require.NotNil(t, err)
	require.Equal(t, protocol.UnsupportedOperation, err.Code)
	require.Contains(t, err.Message, "use reconcile-invoice instead")
	require.Equal(t, "reconcile-invoice-v0", err.Metadata["capabilityId"])
	require.Equal(t, "reconcile-invoice", err.Metadata["replacedBy"])
	require.Nil(t, ix.Tombstone("reconcile-invoice"))
}

func TestResolveClarification(t *testing.T) {
	ix := NewIndex(fixture(), 0.6)
	partner := rights{entitled: set("lookup-invoice", "reconcile-invoice", "extract-invoice-fields")}
	offered := []string{"reconcile-invoice", "lookup-invoice"}
	for _, reply := range []string{"reconcile-invoice", "Reconcile an invoice", "1", " 1. "} {
		d, err := ix.Resolve(&protocol.MessageInfo{Parts: []protocol.PartInfo{text(reply)}}, offered, partner)
		require.Nil(t, err, reply)
		require.Equal(t, "reconcile-invoice", d.Capability, reply)
	}
	d, err := ix.Resolve(&protocol.MessageInfo{Parts: []protocol.PartInfo{text("2")}}, offered, partner)
	require.Nil(t, err)
	require.Equal(t, "lookup-invoice", d.Capability)

	// A choice the caller lost the right to is not offered any more, and
	// naming it does not go to the one left: the caller is asked again
	// (yes takes the one left, no declines).
	onlyLookup := rights{entitled: set("lookup-invoice")}
	d, err = ix.Resolve(&protocol.MessageInfo{Parts: []protocol.PartInfo{text("reconcile-invoice")}}, offered, onlyLookup)
	require.Nil(t, err)
	require.Equal(t, LayerClarify, d.Layer)
	require.Empty(t, d.Capability)
	require.Equal(t, []Candidate{{ID: "lookup-invoice", Name: "Look up an invoice", Score: d.Candidates[0].Score}}, d.Candidates)
	d, err = ix.Resolve(&protocol.MessageInfo{Parts: []protocol.PartInfo{text("Yes.")}}, offered, onlyLookup)
	require.Nil(t, err)
	require.Equal(t, "lookup-invoice", d.Capability)
	d, err = ix.Resolve(&protocol.MessageInfo{Parts: []protocol.PartInfo{text("no")}}, offered, onlyLookup)
	require.Nil(t, err)
	require.Equal(t, LayerDeclined, d.Layer)
	require.Empty(t, d.Capability)
	_, err = ix.Resolve(&protocol.MessageInfo{Parts: []protocol.PartInfo{text("1")}}, offered, rights{})
	require.NotNil(t, err)
	require.Equal(t, protocol.Unauthorized, err.Code)
}

func TestMediaMatching(t *testing.T) {
	require.True(t, covers([]string{"image/*"}, []string{"image/png"}))
	require.True(t, covers([]string{"*/*"}, []string{"application/pdf"}))
	require.False(t, covers([]string{"text/plain"}, []string{"text/plain", "application/pdf"}))
	require.True(t, meets([]string{"application/json"}, nil))
	require.True(t, meets([]string{"application/json"}, []string{"application/*"}))
	require.False(t, meets([]string{"application/json"}, []string{"text/html"}))
	require.Equal(t, "application/pdf", normalizeType("Application/PDF; name=x"))
}

// TestResolveNumbersFollowTheOfferedList: a reply by number means the
// choice shown under that number, even when an earlier choice is no longer
// available to the caller (the list is not renumbered behind their back).
func TestResolveNumbersFollowTheOfferedList(t *testing.T) {
	ix := NewIndex(fixture(), 0.6)
	offered := []string{"extract-invoice-fields", "reconcile-invoice", "lookup-invoice"}
	all := rights{entitled: set(offered...)}
	lostFirst := rights{entitled: set("reconcile-invoice", "lookup-invoice")}
	reply := func(s string) *protocol.MessageInfo {
		return &protocol.MessageInfo{Parts: []protocol.PartInfo{text(s)}}
	}

	tests := []struct {
		name   string
		reply  string
		caller Caller
		want   string
	}{
		{"2 with every choice available", "2", all, "reconcile-invoice"},
		{"3 with every choice available", "3", all, "lookup-invoice"},
		{"2 after losing the first choice", "2", lostFirst, "reconcile-invoice"},
		{"3 after losing the first choice", "3", lostFirst, "lookup-invoice"},
		{"name after losing the first choice", "Look up an invoice", lostFirst, "lookup-invoice"},
		{"id is case-insensitive", "Reconcile-Invoice", all, "reconcile-invoice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ix.Resolve(reply(tt.reply), offered, tt.caller)
			require.Nil(t, err)
			require.Equal(t, tt.want, d.Capability)
			require.Equal(t, LayerClarify, d.Layer)
		})
	}

	t.Run("a number beyond the list is not a choice", func(t *testing.T) {
		d, err := ix.Resolve(reply("4"), offered, all)
		require.Nil(t, err)
		require.Equal(t, LayerClarify, d.Layer)
		require.Empty(t, d.Capability)
	})
	t.Run("the number of a lost choice does not pick another", func(t *testing.T) {
		d, err := ix.Resolve(reply("1"), offered, lostFirst)
		require.Nil(t, err)
		require.NotEqual(t, "reconcile-invoice", d.Capability)
	})
	t.Run("unknown ids offered are skipped", func(t *testing.T) {
		d, err := ix.Resolve(reply("2"), []string{"gone", "lookup-invoice"}, all)
		require.Nil(t, err)
		require.Equal(t, "lookup-invoice", d.Capability)
	})
}

// indexed is a test IndexedCaller: rights answered by position in reg.
type indexed struct {
	rights
	reg *manifest.Registry
}

func (r indexed) EntitledAt(reg *manifest.Registry, i int) (bool, bool) {
	if reg != r.reg {
		return false, false
	}
	return r.entitled[reg.All()[i].ID], true
}

// TestIndexedCallerRoutesAsByID: a caller that answers entitlement by position (Rights, from
// its view's bitset) routes every message as the same caller asked by id does, and one whose
// positions are another registry's is asked by id.
func TestIndexedCallerRoutesAsByID(t *testing.T) {
	ix := NewIndex(fixture(), 0.6)
	callers := []rights{
		{entitled: set("lookup-invoice", "reconcile-invoice", "extract-invoice-fields"), would: set("reconcile-invoice-v0")},
		{entitled: set("lookup-invoice", "extract-invoice-fields")},
		{entitled: set("reconcile-invoice")},
		{},
	}
	var msgs []protocol.MessageInfo
	for _, c := range fixture().All() {
		for _, ex := range c.Skill.Examples {
			msgs = append(msgs, protocol.MessageInfo{Parts: []protocol.PartInfo{text(ex)}},
				protocol.MessageInfo{Parts: []protocol.PartInfo{pdf(), text(ex)}},
				protocol.MessageInfo{SkillHint: c.ID, Parts: []protocol.PartInfo{text(ex)}})
		}
	}
	msgs = append(msgs, protocol.MessageInfo{Parts: []protocol.PartInfo{{Kind: "raw", MediaType: "image/png"}}},
		protocol.MessageInfo{Parts: []protocol.PartInfo{text("show invoice INV-1")}, AcceptedOutputModes: []string{"image/png"}})
	for _, c := range callers {
		for _, reg := range []*manifest.Registry{ix.reg, fixture()} {
			for _, msg := range msgs {
				want, wantErr := ix.Route(&msg, c)
				got, gotErr := ix.Route(&msg, indexed{rights: c, reg: reg})
				require.Equal(t, want, got, "%+v", msg)
				require.Equal(t, wantErr, gotErr, "%+v", msg)
			}
		}
	}
}

// rankedPlain is ranked's definition: every capability of pool, the
// classifier's ranked few first, the rest in pool order.
func rankedPlain(ix *Index, res classifier.Result, pool []int) []Candidate {
	var out []Candidate
	seen := map[string]bool{}
	for _, s := range res.Ranked {
		if m, ok := ix.reg.Get(s.ID); ok {
			out = append(out, Candidate{ID: m.ID, Name: m.Skill.Name, Score: s.Score})
			seen[m.ID] = true
		}
	}
	for _, i := range pool {
		if m := &ix.reg.All()[i]; !seen[m.ID] {
			out = append(out, Candidate{ID: m.ID, Name: m.Skill.Name})
		}
	}
	return out
}

// TestRankedIsThePlainListsPrefix: ranked stops early, so it must be a
// prefix of the whole list that gives the same clarification and the same
// score for the pick, over the dev registry with every fourth capability a
// tombstone, for pools of every size down to one and texts of every skill.
func TestRankedIsThePlainListsPrefix(t *testing.T) {
	reg, cases := loadDev(t)
	caps := slices.Clone(reg.All())
	for i := range caps {
		if i%4 == 1 {
			caps[i].State = manifest.StateRemoved
		}
	}
	ix := NewIndex(manifest.NewRegistry(caps), 0.6)
	rng := rand.New(rand.NewPCG(7, 36))
	n := len(caps)
	for k, c := range cases {
		if k%3 != 0 {
			continue
		}
		pool := rng.Perm(n)[:[]int{n, n / 2, 12, 6, 5, 2, 1}[k%7]]
		slices.Sort(pool)
		res := ix.cls.Classify(c.Text, pool)
		full, got := rankedPlain(ix, res, pool), ix.ranked(res, pool)
		want, live := len(full), 0 // the shortest prefix with the ranked few and MaxClarifyCandidates live ones
		for i, cand := range full {
			if i >= len(res.Ranked) && live >= MaxClarifyCandidates {
				want = i
				break
			}
			if m, _ := ix.reg.Get(cand.ID); m.State != manifest.StateRemoved {
				live++
			}
		}
		require.Equal(t, full[:want], got, "the whole list's shortest prefix that serves: %q", c.Text)
		require.Equal(t, ix.clarification(Decision{Candidates: full}).Candidates,
			ix.clarification(Decision{Candidates: got}).Candidates, "the same clarification: %q", c.Text)
		if res.Best != "" {
			require.Equal(t, scoreOf(full, res.Best), scoreOf(got, res.Best))
		}
	}
}
