// Package router decides which capability a message goes to, cheapest layer
// first: an entitled skill hint, a single candidate, the one candidate whose
// data schemas a data part of the message validates against, then a
// classifier over the message text restricted to the candidates, and, when
// configured, a model-based router (model.go); below the confidence
// threshold it asks the caller to choose instead of guessing, and a
// capability marked confirm is confirmed with the caller before it runs.
// Continuing tasks are resolved before the router is asked (they are bound).
package router

import (
	"bytes"
	"context"
	"fmt"
	"mime"
	"slices"
	"sort"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/attribute"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/router/classifier"
	"github.com/capgate/capgate/sidecar/router/learn"
	"github.com/capgate/capgate/sidecar/tracing"
)

// Layer names the layer that decided.
type Layer string

// Layers, cheapest first.
const (
	LayerTask       Layer = "task"
	LayerSingle     Layer = "single"
	LayerHint       Layer = "hint"
	LayerStructured Layer = "structured"
	LayerClassifier Layer = "classifier"
	LayerModel      Layer = "model"
	LayerClarify    Layer = "clarify"
	// LayerConfirm asks the caller to confirm the one capability the router
	// picked for a capability whose routing mode is confirm.
	LayerConfirm Layer = "confirm"
	// LayerDeclined is a caller's "no" to a confirmation: nothing runs.
	LayerDeclined Layer = "declined"
)

// MaxClarifyCandidates bounds the choices offered in a clarification.
const MaxClarifyCandidates = 5

// Index is the router's view of one registry revision. Immutable.
type Index struct {
	reg       *manifest.Registry
	cls       *classifier.Index
	threshold float64
	in, out   [][]string // accepted media types per capability (registry order)
}

// NewIndex builds the router index (and its classifier) for a registry.
// Removed capabilities stay in it as tombstones.
func NewIndex(reg *manifest.Registry, threshold float64) *Index {
	all := reg.All()
	docs := make([]classifier.Doc, len(all))
	ix := &Index{reg: reg, threshold: threshold, in: make([][]string, len(all)), out: make([][]string, len(all))}
	for i := range all {
		c := &all[i]
		docs[i] = classifier.Doc{ID: c.ID, Name: c.Skill.Name, Description: c.Skill.Description, Tags: c.Skill.Tags, Examples: examplesOf(c)}
		ix.in[i] = normalizeModes(c.Skill.InputModes, card.DefaultInputModes())
		ix.out[i] = normalizeModes(c.Skill.OutputModes, card.DefaultOutputModes())
	}
	ix.cls = classifier.New(docs)
	return ix
}

// examplesOf is what the classifier learns a capability from: the card's
// skill.examples, then the reviewed server-side examples of
// routing.examples_file without their redaction placeholders. Learned
// examples change scores only: entitlement still chooses the candidates and
// the routing mode still decides whether the router may pick the skill.
func examplesOf(c *manifest.Capability) []string {
	if len(c.RoutingExamples) == 0 {
		return c.Skill.Examples
	}
	out := slices.Clip(slices.Clone(c.Skill.Examples))
	for _, e := range c.RoutingExamples {
		if p := learn.Plain(e); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Threshold is the confidence below which the router asks for clarification.
func (ix *Index) Threshold() float64 { return ix.threshold }

// Classifier exposes the classifier (for `capgate route eval`).
func (ix *Index) Classifier() *classifier.Index { return ix.cls }

// Caller is what the router needs to know about the caller's rights.
type Caller interface {
	// Entitled reports whether the caller may run the capability now.
	Entitled(id string) bool
	// WouldBeEntitled reports whether the caller would be entitled to a
	// removed capability had it not been removed (tombstones are matched
	// only for such callers).
	WouldBeEntitled(id string) bool
}

// IndexedCaller is a Caller that answers Entitled by a capability's position in a registry's
// All() (Rights: the view's bitset), sparing a lookup of its id per capability and message;
// ok is false when it cannot (another registry), and the router asks Entitled.
type IndexedCaller interface {
	EntitledAt(reg *manifest.Registry, i int) (entitled, ok bool)
}

// Candidate is a capability in the running.
type Candidate struct {
	ID    string  `json:"id"`
	Name  string  `json:"name"`
	Score float64 `json:"score,omitempty"`
}

// Decision is the router's answer.
type Decision struct {
	Layer      Layer
	Capability string  // chosen capability ("" when clarifying)
	Confidence float64 // classifier confidence (classifier and clarify layers)
	// Candidates are the capabilities considered, best first: the
	// classifier's ranked few, then others with no score until
	// MaxClarifyCandidates live ones are listed (Considered counts them
	// all); for a clarification, the ones offered to the caller.
	Candidates []Candidate
	// IgnoredHint is a skill hint that was not honoured (not entitled, or
	// not a candidate); logged, never reported to the caller.
	IgnoredHint string
	// Considered is the number of candidates the decision was made among
	// (every layer; 0 when refused before candidates were known).
	Considered int
}

// Route picks a capability for a message with no bound task.
func (ix *Index) Route(msg *protocol.MessageInfo, c Caller) (d Decision, perr *protocol.Error) {
	if cc, ok := c.(interface{ Context() context.Context }); ok {
		// A routing span under the request's, when it is traced: the layer
		// and confidence, never the text.
		if _, span := tracing.Child(cc.Context(), "capgate.route"); span.IsRecording() {
			defer func() {
				span.SetAttributes(attribute.String("capgate.routing.layer", string(d.Layer)),
					attribute.Float64("capgate.routing.confidence", d.Confidence),
					attribute.Int("capgate.routing.candidates", d.Considered),
					attribute.String("capgate.capability", d.Capability))
				if perr != nil {
					span.SetAttributes(attribute.String("capgate.code", string(perr.Code)))
				}
				span.End()
			}()
		}
	}
	return ix.route(msg, c)
}

func (ix *Index) route(msg *protocol.MessageInfo, c Caller) (Decision, *protocol.Error) {
	live, tomb, err := ix.candidates(msg, c)
	if err != nil {
		return Decision{}, err
	}
	all := append(live, tomb...) // live has room for every capability: no copy
	d := Decision{Considered: len(all)}
	if msg.SkillHint != "" {
		if i := ix.reg.Index(msg.SkillHint); i >= 0 && contains(all, i) {
			d.Layer, d.Capability, d.Confidence = LayerHint, msg.SkillHint, 1
			return d, ix.tombstoneCheck(d)
		}
		d.IgnoredHint = msg.SkillHint
	}
	if len(all) == 1 && len(tomb) == 1 {
		// The one capability the message could go to is removed: say so.
		d.Layer, d.Capability, d.Confidence = LayerSingle, ix.reg.All()[all[0]].ID, 1
		return d, ix.tombstoneCheck(d)
	}
	if id, ok := ix.structured(msg, all); ok {
		d.Layer, d.Capability, d.Confidence = LayerStructured, id, 1
		if perr := ix.tombstoneCheck(d); perr != nil {
			return d, perr
		}
		return ix.Policy(d), nil
	}
	// One candidate is not a decision: the message is scored against it
	// (and against every other skill of the registry) like any other.
	res := ix.cls.Classify(MessageText(msg), all)
	d.Confidence = res.Confidence
	d.Candidates = ix.ranked(res, all)
	if res.Best != "" && res.Confidence >= ix.ThresholdFor(res.Best) {
		d.Layer, d.Capability = LayerClassifier, res.Best
		if len(all) == 1 {
			d.Layer = LayerSingle
		}
		if perr := ix.tombstoneCheck(d); perr != nil {
			return d, perr
		}
		return ix.Policy(d), nil
	}
	return ix.clarification(d), nil
}

// clarification turns d into a question offering its live candidates.
func (ix *Index) clarification(d Decision) Decision {
	d.Layer, d.Capability = LayerClarify, ""
	// Offer live capabilities only: a tombstone is never a choice.
	offered := d.Candidates[:0:0]
	for _, cand := range d.Candidates {
		if m, ok := ix.reg.Get(cand.ID); ok && m.State != manifest.StateRemoved {
			offered = append(offered, cand)
		}
	}
	if len(offered) > MaxClarifyCandidates {
		offered = offered[:MaxClarifyCandidates]
	}
	d.Candidates = offered
	return d
}

// ThresholdFor is the confidence the classifier needs to choose capability
// id: its routing.min_confidence when given, else router.threshold.
func (ix *Index) ThresholdFor(id string) float64 {
	if m, ok := ix.reg.Get(id); ok && m.Routing.MinConfidence > 0 {
		return m.Routing.MinConfidence
	}
	return ix.threshold
}

// Mode is the routing mode of capability id (auto when unknown).
func (ix *Index) Mode(id string) manifest.RoutingMode {
	if m, ok := ix.reg.Get(id); ok {
		return m.Routing.EffectiveMode()
	}
	return manifest.RoutingAuto
}

// Policy applies the chosen capability's routing mode to a pick the router
// made by itself (the single, structured, classifier or model layer): auto
// keeps it; confirm turns it into a question naming the capability
// (LayerConfirm, the capability the one candidate); explicit turns it into
// a clarification: the router never chooses it alone. Hints, bound tasks and
// the caller's own choices do not come here.
func (ix *Index) Policy(d Decision) Decision {
	switch ix.Mode(d.Capability) {
	case manifest.RoutingConfirm:
		m, _ := ix.reg.Get(d.Capability)
		d.Candidates = []Candidate{{ID: m.ID, Name: m.Skill.Name, Score: scoreOf(d.Candidates, m.ID)}}
		d.Layer, d.Capability = LayerConfirm, ""
		return d
	case manifest.RoutingExplicit:
		if len(d.Candidates) == 0 {
			m, _ := ix.reg.Get(d.Capability)
			d.Candidates = []Candidate{{ID: m.ID, Name: m.Skill.Name}}
		}
		return ix.clarification(d)
	}
	return d
}

func scoreOf(cands []Candidate, id string) float64 {
	for _, c := range cands {
		if c.ID == id {
			return c.Score
		}
	}
	return 0
}

// structured is the structural layer: the one capability of pool whose
// skill.data_schemas a data part of msg validates against. No data part, no
// match, or a shape that several candidates accept decides nothing (the
// classifier decides then).
func (ix *Index) structured(msg *protocol.MessageInfo, pool []int) (string, bool) {
	all := ix.reg.All()
	if !slices.ContainsFunc(pool, func(i int) bool { return len(all[i].Skill.DataSchemas) > 0 }) {
		return "", false
	}
	var values []any
	for _, p := range msg.Parts {
		if p.Kind != protocol.PartData || p.Data == nil {
			continue
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(p.Data))
		if err != nil {
			continue // the parser validated it; a part that cannot be read matches nothing
		}
		values = append(values, v)
	}
	if len(values) == 0 {
		return "", false
	}
	match := -1
	for _, i := range pool {
		if !accepts(all[i].Skill.DataSchemas, values) {
			continue
		}
		if match >= 0 {
			return "", false // a shape two candidates share
		}
		match = i
	}
	if match < 0 {
		return "", false
	}
	return all[match].ID, true
}

// Structured is the structured layer over every live capability, for a
// message of the given data parts (`capgate route eval`): the one
// capability whose data schemas one of them validates against.
func (ix *Index) Structured(data []jsontext.Value) (string, bool) {
	msg := &protocol.MessageInfo{}
	for _, d := range data {
		msg.Parts = append(msg.Parts, protocol.PartInfo{Kind: protocol.PartData, MediaType: "application/json", Data: d})
	}
	var live []int
	for i := range ix.reg.All() {
		if ix.reg.All()[i].State != manifest.StateRemoved {
			live = append(live, i)
		}
	}
	return ix.structured(msg, live)
}

// accepts reports whether some value validates against some schema.
func accepts(schemas []manifest.DataSchema, values []any) bool {
	for _, s := range schemas {
		for _, v := range values {
			if s.Matches(v) {
				return true
			}
		}
	}
	return false
}

// Resolve interprets a caller's reply to a clarification: a capability id,
// a name, a list number, or more text to classify among the offered ids.
func (ix *Index) Resolve(msg *protocol.MessageInfo, offered []string, c Caller) (Decision, *protocol.Error) {
	var live []int
	for _, id := range offered {
		if i := ix.reg.Index(id); i >= 0 && c.Entitled(id) {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return Decision{}, protocol.Errorf(protocol.Unauthorized, "none of the offered capabilities is available to the caller any more").
			Decided(decisionlog.RuleNoCandidate, "")
	}
	text := strings.TrimSpace(MessageText(msg))
	norm := strings.ToLower(strings.Trim(text, " .!,\"'"))
	// Numbers are positions in the list as it was offered: a choice the
	// caller has lost since does not renumber the others.
	for n, id := range offered {
		i := ix.reg.Index(id)
		if i < 0 || !c.Entitled(id) {
			continue
		}
		m := &ix.reg.All()[i]
		if norm == m.ID || norm == strings.ToLower(m.Skill.Name) || norm == fmt.Sprint(n+1) {
			return Decision{Layer: LayerClarify, Capability: m.ID, Confidence: 1}, nil
		}
	}
	if len(live) == 1 {
		// One choice offered (a confirmation, or the one capability the
		// caller has): yes takes it, no drops the question.
		switch {
		case yesWords[norm]:
			return Decision{Layer: LayerClarify, Capability: ix.reg.All()[live[0]].ID, Confidence: 1, Considered: 1}, nil
		case noWords[norm]:
			return Decision{Layer: LayerDeclined, Considered: 1}, nil
		}
	}
	res := ix.cls.Classify(text, live)
	d := Decision{Confidence: res.Confidence, Candidates: ix.ranked(res, live), Considered: len(live)}
	if res.Best != "" && res.Confidence >= ix.ThresholdFor(res.Best) {
		d.Layer, d.Capability = LayerClassifier, res.Best
		return ix.Policy(d), nil
	}
	return ix.clarification(d), nil
}

// yesWords and noWords answer a question offering one capability.
var (
	yesWords = map[string]bool{"yes": true, "y": true, "yeah": true, "yep": true, "ok": true, "okay": true,
		"sure": true, "go ahead": true, "yes please": true, "confirm": true, "do it": true}
	noWords = map[string]bool{"no": true, "n": true, "nope": true, "no thanks": true, "cancel": true,
		"stop": true, "don't": true, "do not": true}
)

// Tombstone reports the error for a bound task or choice that resolves to
// a removed capability, or nil.
func (ix *Index) Tombstone(id string) *protocol.Error {
	return ix.tombstoneCheck(Decision{Capability: id})
}

func (ix *Index) tombstoneCheck(d Decision) *protocol.Error {
	m, ok := ix.reg.Get(d.Capability)
	if !ok || m.State != manifest.StateRemoved {
		return nil
	}
	msg := fmt.Sprintf("capability %s has been removed", m.ID)
	if m.ReplacedBy != "" {
		msg += "; use " + m.ReplacedBy + " instead"
	}
	return protocol.Errorf(protocol.UnsupportedOperation, "%s", msg).
		WithMetadata("capabilityId", m.ID).
		WithMetadata("replacedBy", m.ReplacedBy).
		Decided(decisionlog.RuleRemoved, m.ID)
}

// candidates returns the live capabilities the caller is entitled to whose
// media types fit the message, and the tombstones the caller would have been
// entitled to that fit too.
func (ix *Index) candidates(msg *protocol.MessageInfo, c Caller) (live, tomb []int, err *protocol.Error) {
	sent := sentTypes(msg)
	acceptable := normalizeAll(msg.AcceptedOutputModes)
	all := ix.reg.All()
	ic, _ := c.(IndexedCaller)
	entitled := func(i int) bool {
		if ic != nil {
			if e, ok := ic.EntitledAt(ix.reg, i); ok {
				return e
			}
		}
		return c.Entitled(all[i].ID)
	}
	live = make([]int, 0, len(all)) // once, not grown capability by capability
	anyEntitled := false
	for i := range all {
		m := &all[i]
		removed := m.State == manifest.StateRemoved
		switch {
		case !removed && entitled(i):
			anyEntitled = true
		case removed && c.WouldBeEntitled(m.ID):
		default:
			continue
		}
		if !covers(ix.in[i], sent) || !meets(ix.out[i], acceptable) {
			continue
		}
		if removed {
			tomb = append(tomb, i)
		} else {
			live = append(live, i)
		}
	}
	if !anyEntitled {
		return nil, nil, protocol.Errorf(protocol.Unauthorized, "no capability of this agent is available to the caller").Decided(decisionlog.RuleNoCandidate, "")
	}
	if len(live) == 0 && len(tomb) == 0 {
		// The input types the caller's capabilities accept, for the error.
		accepted := map[string]bool{}
		for i := range all {
			if all[i].State != manifest.StateRemoved && entitled(i) {
				for _, t := range ix.in[i] {
					accepted[t] = true
				}
			}
		}
		return nil, nil, contentTypeError(sent, msg.AcceptedOutputModes, accepted)
	}
	return live, tomb, nil
}

func contentTypeError(sent, acceptedOut []string, accepted map[string]bool) *protocol.Error {
	acc := make([]string, 0, len(accepted))
	for t := range accepted {
		acc = append(acc, t)
	}
	sort.Strings(acc)
	msg := fmt.Sprintf("no capability available to you accepts %s; accepted input types: %s", strings.Join(sent, ", "), strings.Join(acc, ", "))
	if len(acceptedOut) > 0 {
		msg += fmt.Sprintf(" (and the output types you accept, %s, must be produced)", strings.Join(acceptedOut, ", "))
	}
	return protocol.Errorf(protocol.ContentTypeNotSupported, "%s", msg).
		WithMetadata("sent", strings.Join(sent, ",")).
		WithMetadata("accepted", strings.Join(acc, ",")).
		Decided(decisionlog.RuleContentType, "")
}

// ranked lists the candidates a decision names, best first: the
// classifier's ranked few (classifier.RankedLen), then the rest of pool in
// its order with no score, but only until MaxClarifyCandidates live ones are
// listed: a clarification offers no more, and nothing else reads further
// (building the whole pool was ~2 % of a routed message's CPU and 6 kB of
// its allocations at 150 skills). TestRankedIsThePlainListsPrefix holds it
// to the whole list's prefix and the clarification it gives.
func (ix *Index) ranked(res classifier.Result, pool []int) []Candidate {
	out := make([]Candidate, 0, len(res.Ranked)+MaxClarifyCandidates)
	live := 0
	add := func(m *manifest.Capability, score float64) {
		out = append(out, Candidate{ID: m.ID, Name: m.Skill.Name, Score: score})
		if m.State != manifest.StateRemoved {
			live++
		}
	}
	for _, s := range res.Ranked {
		if m, ok := ix.reg.Get(s.ID); ok {
			add(m, s.Score)
		}
	}
	for _, i := range pool {
		if live >= MaxClarifyCandidates {
			break
		}
		if m := &ix.reg.All()[i]; !slices.ContainsFunc(res.Ranked, func(s classifier.Score) bool { return s.ID == m.ID }) {
			add(m, 0)
		}
	}
	return out
}

// MessageText joins the text parts of a message.
func MessageText(msg *protocol.MessageInfo) string {
	var b strings.Builder
	for _, p := range msg.Parts {
		if p.Kind == "text" && p.Text != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// sentTypes lists the distinct media types of a message's parts.
func sentTypes(msg *protocol.MessageInfo) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range msg.Parts {
		t := normalizeType(p.MediaType)
		if t == "" {
			t = "application/octet-stream"
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

func normalizeModes(modes, def []string) []string {
	if len(modes) == 0 {
		modes = def
	}
	out := make([]string, 0, len(modes))
	for _, m := range modes {
		if t := normalizeType(m); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func normalizeType(t string) string {
	mt, _, err := mime.ParseMediaType(t)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(t))
	}
	return mt
}

// covers reports whether every sent type is accepted (type/* and */* match).
func covers(accepted, sent []string) bool {
	for _, s := range sent {
		if !matchAny(accepted, s) {
			return false
		}
	}
	return true
}

// meets reports whether the capability produces one of the types the client
// accepts (normalised; no preference given: anything).
func meets(produced, acceptable []string) bool {
	if len(acceptable) == 0 {
		return true
	}
	for _, a := range acceptable {
		for _, p := range produced {
			if match(a, p) || match(p, a) {
				return true
			}
		}
	}
	return false
}

// normalizeAll normalises each media type (normalizeType), keeping every
// entry: once per message, not once per capability.
func normalizeAll(types []string) []string {
	if len(types) == 0 {
		return nil
	}
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = normalizeType(t)
	}
	return out
}

func matchAny(patterns []string, t string) bool {
	for _, p := range patterns {
		if match(p, t) {
			return true
		}
	}
	return false
}

// match is protocol.MediaTypeMatches.
func match(p, t string) bool { return protocol.MediaTypeMatches(p, t) }

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
