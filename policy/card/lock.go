package card

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

// Finding kinds reported by Check.
const (
	KindCardChanged      = "card-changed"       // a card field outside skills changed
	KindSkillAdded       = "skill-added"        // a skill id is new
	KindSkillRemoved     = "skill-removed"      // a locked skill id is gone
	KindSkillChanged     = "skill-changed"      // a field of a skill changed (not its modes)
	KindModesChanged     = "modes-changed"      // inputModes/outputModes of an existing id changed
	KindVersionNotBumped = "version-not-bumped" // skills changed, agent.version did not
	KindLeak             = "leak"               // text of a hidden capability is in the public card
)

// Finding is one difference between the locked and the current public card,
// or one leak. Skill is the skill id concerned (for a leak: the hidden
// capability's id); Field names the field (for a leak: where in the public
// card the text appears); Old and New are the values (strings as they are,
// other values as compact JSON; empty when absent).
type Finding struct {
	Kind    string `json:"kind"`
	Skill   string `json:"skill,omitempty"`
	Field   string `json:"field,omitempty"`
	Old     string `json:"old,omitempty"`
	New     string `json:"new,omitempty"`
	Message string `json:"message"`
}

// LeakError is returned by Lock when the public card carries text of a
// hidden capability: a leaking card is fixed, never locked.
type LeakError struct {
	Findings []Finding
}

func (e *LeakError) Error() string {
	ids := make([]string, 0, len(e.Findings))
	for _, f := range e.Findings {
		if !slices.Contains(ids, f.Skill) {
			ids = append(ids, f.Skill)
		}
	}
	return fmt.Sprintf("public card leaks text of hidden capabilities %s (%d findings)", strings.Join(ids, ", "), len(e.Findings))
}

// Hidden selects from all capabilities the ones whose text must never reach
// the public card: not removed, and extended, internal or in preview. It is
// the hidden argument of Lock and Check.
func Hidden(all []manifest.Capability) []manifest.Capability {
	var out []manifest.Capability
	for _, m := range all {
		if m.State == manifest.StateRemoved {
			continue
		}
		if m.Visibility != manifest.VisibilityPublic || m.State == manifest.StatePreview {
			out = append(out, m)
		}
	}
	return out
}

// lockFile is the committed lock: the public card as released and the
// agent.version it was released under.
type lockFile struct {
	BaseVersion *string         `json:"baseVersion"`
	Card        json.RawMessage `json:"card"`
}

// Lock renders the lock file for a release: {"baseVersion": agent.version,
// "card": <public card>}, indented, ending in a newline. It refuses a card
// that fails validation or leaks text of a hidden capability (*LeakError).
// hidden is every capability that must not show in the public card
// (extended, internal or preview).
func Lock(public *a2a.AgentCard, cfg *config.Config, hidden []manifest.Capability) ([]byte, error) {
	cardJSON, doc, err := publicDoc(public)
	if err != nil {
		return nil, err
	}
	if leaks := findLeaks(doc, hidden); len(leaks) > 0 {
		return nil, &LeakError{Findings: leaks}
	}
	base := cfg.Agent.Version
	b, err := encode(lockFile{BaseVersion: &base, Card: cardJSON}, true)
	if err != nil {
		return nil, fmt.Errorf("encode card lock: %w", err)
	}
	return append(b, '\n'), nil
}

// Check compares the current public card with a lock written by Lock and
// scans it for leaks. No findings means the card is exactly the locked one
// and leaks nothing. Every change is a finding, intended or not: the
// workflow is to lock on release and check in CI, re-locking to accept.
// err reports only a lock that cannot be read or a card that is invalid.
func Check(lock []byte, public *a2a.AgentCard, cfg *config.Config, hidden []manifest.Capability) ([]Finding, error) {
	var lf lockFile
	if err := json.Unmarshal(lock, &lf); err != nil {
		return nil, fmt.Errorf("read card lock: %w", err)
	}
	if lf.BaseVersion == nil || len(lf.Card) == 0 {
		return nil, errors.New(`read card lock: "baseVersion" and "card" are required`)
	}
	old, err := decodeJSON(lf.Card)
	if err != nil {
		return nil, fmt.Errorf("read card lock: card: %w", err)
	}
	oldCard, ok := old.(map[string]any)
	if !ok {
		return nil, errors.New("read card lock: card is not a JSON object")
	}
	_, doc, err := publicDoc(public)
	if err != nil {
		return nil, err
	}
	findings, skillsChanged := diffCards(oldCard, doc)
	if skillsChanged && *lf.BaseVersion == cfg.Agent.Version {
		findings = append(findings, Finding{
			Kind: KindVersionNotBumped, Field: "agent.version",
			Message: fmt.Sprintf("the skill list changed but agent.version is still %s; bump it", cfg.Agent.Version),
		})
	}
	return append(findings, findLeaks(doc, hidden)...), nil
}

// publicDoc marshals and validates the public card and decodes it generically.
func publicDoc(public *a2a.AgentCard) ([]byte, map[string]any, error) {
	b, err := Marshal(public)
	if err != nil {
		return nil, nil, err
	}
	if err := ValidateJSON(b); err != nil {
		return nil, nil, fmt.Errorf("public card: %w", err)
	}
	v, err := decodeJSON(b)
	if err != nil {
		return nil, nil, err
	}
	doc, _ := v.(map[string]any)
	return b, doc, nil
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// diffCards reports every difference. The version field is reported only
// when the skills did not change: otherwise its skills hash changed by
// construction and the skill findings explain it.
func diffCards(old, cur map[string]any) (fs []Finding, skillsChanged bool) {
	for _, k := range unionKeys(old, cur) {
		switch k {
		case "skills":
			sf := diffSkills(asList(old[k]), asList(cur[k]))
			skillsChanged = len(sf) > 0
			fs = append(fs, sf...)
		case "version":
		default:
			fs = append(fs, diffValue(k, old[k], cur[k])...)
		}
	}
	if !skillsChanged {
		fs = append(fs, diffValue("version", old["version"], cur["version"])...)
	}
	return fs, skillsChanged
}

// diffValue reports a card-changed finding per differing leaf, descending
// into objects and equally long arrays.
func diffValue(path string, a, b any) []Finding {
	if reflect.DeepEqual(a, b) {
		return nil
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var fs []Finding
		for _, k := range unionKeys(am, bm) {
			fs = append(fs, diffValue(path+"."+k, am[k], bm[k])...)
		}
		return fs
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var fs []Finding
		for i := range al {
			fs = append(fs, diffValue(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i])...)
		}
		return fs
	}
	f := Finding{Kind: KindCardChanged, Field: path, Old: show(a), New: show(b)}
	switch {
	case a == nil:
		f.Message = fmt.Sprintf("card field %s was added", path)
	case b == nil:
		f.Message = fmt.Sprintf("card field %s was removed", path)
	default:
		f.Message = fmt.Sprintf("card field %s changed", path)
	}
	return []Finding{f}
}

// skillFieldRank orders the fields of a changed skill in reports; other
// fields (-1) follow alphabetically.
func skillFieldRank(k string) int {
	return slices.Index([]string{"name", "description", "tags", "examples", "inputModes", "outputModes"}, k)
}

func diffSkills(old, cur []any) []Finding {
	oldByID, oldIDs := indexSkills(old)
	curByID, curIDs := indexSkills(cur)
	var fs []Finding
	ids := slices.Clone(oldIDs)
	for _, id := range curIDs {
		if _, ok := oldByID[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		o, inOld := oldByID[id]
		c, inCur := curByID[id]
		switch {
		case !inOld:
			fs = append(fs, Finding{Kind: KindSkillAdded, Skill: id, New: show(c["name"]),
				Message: fmt.Sprintf("skill %s was added", id)})
		case !inCur:
			fs = append(fs, Finding{Kind: KindSkillRemoved, Skill: id, Old: show(o["name"]),
				Message: fmt.Sprintf("skill %s was removed; callers that key on its id will fail", id)})
		default:
			fs = append(fs, diffSkill(id, o, c)...)
		}
	}
	// The same ids in another order is a change of the card too.
	common := func(ids []string, other map[string]map[string]any) []string {
		var out []string
		for _, id := range ids {
			if _, ok := other[id]; ok {
				out = append(out, id)
			}
		}
		return out
	}
	if oc, cc := common(oldIDs, curByID), common(curIDs, oldByID); !slices.Equal(oc, cc) {
		fs = append(fs, Finding{Kind: KindCardChanged, Field: "skills", Old: strings.Join(oc, ", "), New: strings.Join(cc, ", "),
			Message: "the order of the skills changed"})
	}
	return fs
}

func diffSkill(id string, o, c map[string]any) []Finding {
	keys := unionKeys(o, c)
	slices.SortStableFunc(keys, func(a, b string) int {
		ia, ib := skillFieldRank(a), skillFieldRank(b)
		switch {
		case ia >= 0 && ib >= 0:
			return ia - ib
		case ia >= 0:
			return -1
		case ib >= 0:
			return 1
		}
		return strings.Compare(a, b)
	})
	var fs []Finding
	for _, k := range keys {
		if reflect.DeepEqual(o[k], c[k]) {
			continue
		}
		f := Finding{Kind: KindSkillChanged, Skill: id, Field: k, Old: show(o[k]), New: show(c[k]),
			Message: fmt.Sprintf("the %s of skill %s changed", k, id)}
		if k == "inputModes" || k == "outputModes" {
			f.Kind = KindModesChanged
			f.Message = fmt.Sprintf("the %s of skill %s changed: accepted or produced media types are part of a skill's meaning "+
				"and callers key on ids, so ship the change under a new id and deprecate %s", k, id, id)
		}
		fs = append(fs, f)
	}
	return fs
}

// indexSkills maps skill objects by id and returns the ids in card order.
func indexSkills(skills []any) (map[string]map[string]any, []string) {
	byID := make(map[string]map[string]any, len(skills))
	ids := make([]string, 0, len(skills))
	for _, s := range skills {
		m, _ := s.(map[string]any)
		id, _ := m["id"].(string)
		if _, dup := byID[id]; dup {
			continue
		}
		byID[id] = m
		ids = append(ids, id)
	}
	return byID, ids
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func unionKeys(a, b map[string]any) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// show renders a value for a finding: strings as they are, absent as "",
// anything else as compact JSON.
func show(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	b, err := encode(v, false)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// FormatFindings writes findings for a terminal or CI log: a summary line,
// then one block per finding (kind and subject, the message, the old value
// after "-" and the new after "+"), then what to do. It does not report
// write errors: a caller that must know of them formats into a buffer and
// writes that.
func FormatFindings(w io.Writer, fs []Finding) {
	if len(fs) == 0 {
		_, _ = fmt.Fprintln(w, "card check: the public card matches the lock and leaks nothing")
		return
	}
	leaks := 0
	for _, f := range fs {
		if f.Kind == KindLeak {
			leaks++
		}
	}
	_, _ = fmt.Fprintf(w, "card check: %s, %s\n", plural(len(fs), "finding"), plural(leaks, "leak"))
	for _, f := range fs {
		subject := strings.TrimSpace(f.Skill + " " + f.Field)
		if f.Kind == KindLeak {
			subject = f.Skill + " -> " + f.Field
		}
		_, _ = fmt.Fprintf(w, "\n%s: %s\n  %s\n", f.Kind, subject, f.Message)
		if f.Old != "" {
			_, _ = fmt.Fprintf(w, "  - %s\n", f.Old)
		}
		if f.New != "" {
			_, _ = fmt.Fprintf(w, "  + %s\n", f.New)
		}
	}
	_, _ = fmt.Fprintln(w)
	if leaks > 0 {
		_, _ = fmt.Fprintln(w, "Fix every leak: reword the public text or change the capability's visibility. A leaking card cannot be locked.")
	}
	if leaks < len(fs) {
		_, _ = fmt.Fprintln(w, "Review every change; if it is intended, re-lock with `capgate card lock` and commit the lock file.")
	}
}
