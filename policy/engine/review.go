package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/rego"
)

// reviewQuery asks the policy for one caller's reasons per profile (the
// very reason functions the decisions use) and for the deny modules'
// refusals by capability id ("*": every capability).
const reviewQuery = `profiles := {key: r |
	some key, p in data.capgate.authz.profiles
	r := {
		"visible": data.capgate.authz.sort_reasons(data.capgate.authz.profile_visible_reasons(p)),
		"entitled": data.capgate.authz.sort_reasons(data.capgate.authz.profile_entitled_reasons(p)),
	}
}
denials := data.capgate.authz.denials`

// Review returns the caller's decision for every capability, in id order,
// with the same reasons Explain gives. It evaluates the reason rules once
// per profile (capabilities with equal state, visibility, requires_scopes
// and tenants) and adds the deny modules' refusals per id, as the visible
// and entitled sets do, instead of building every capability's report: an
// access review of many caller classes over thousands of capabilities
// costs one small evaluation per class.
//
// A profile has no replaced_by, so the state.removed and state.deprecated
// reasons it yields name none; Review fills in the capability's. That is
// the only per-capability fact the reasons read (TestReviewAgreesWithExplain
// holds Review to Explain for every caller and capability).
//
// The query is prepared on first use, not by New: serving never needs it.
func (e *Engine) Review(ctx context.Context, c Caller) ([]Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("review policy: %w", err)
	}
	e.reviewOnce.Do(func() {
		e.reviewQ, e.reviewErr = e.prepare(ctx, reviewQuery)
		e.profileKeys = e.snap.ProfileKeys()
	})
	if e.reviewErr != nil {
		return nil, fmt.Errorf("review policy: %w", e.reviewErr)
	}
	rs, err := e.reviewQ.Eval(ctx, rego.EvalParsedInput(input(c)))
	if err != nil {
		return nil, fmt.Errorf("review policy: %w", err)
	}
	if len(rs) != 1 {
		return nil, errors.New("review policy: profiles are undefined")
	}
	profiles, err := parseProfileReasons(rs[0].Bindings["profiles"])
	if err != nil {
		return nil, fmt.Errorf("review policy: %w", err)
	}
	denials, err := parseDenials(rs[0].Bindings["denials"])
	if err != nil {
		return nil, fmt.Errorf("review policy: %w", err)
	}
	all := e.snap.Registry.All()
	out := make([]Decision, len(all))
	for i := range all {
		capability := &all[i]
		p, ok := profiles[e.profileKeys[i]]
		if !ok {
			return nil, fmt.Errorf("review policy: %s: profile %q was not decided", capability.ID, e.profileKeys[i])
		}
		deny := slices.Concat(denials[capability.ID], denials["*"])
		vr := withCapability(p.visible, deny, capability.ReplacedBy)
		er := withCapability(p.entitled, deny, capability.ReplacedBy)
		out[i] = Decision{
			Capability: capability.ID, Exists: true,
			State: string(capability.State), Visibility: string(capability.Visibility),
			Visible: granted(vr), Entitled: granted(er),
			VisibleReasons: vr, EntitledReasons: er,
		}
	}
	return out, nil
}

type profileReasons struct{ visible, entitled []Reason }

func parseProfileReasons(v any) (map[string]profileReasons, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("profiles: want an object")
	}
	out := make(map[string]profileReasons, len(m))
	for key, x := range m {
		r, _ := x.(map[string]any)
		vr, err := parseReasons(r["visible"])
		if err != nil {
			return nil, fmt.Errorf("profile %s: visible: %w", key, err)
		}
		er, err := parseReasons(r["entitled"])
		if err != nil {
			return nil, fmt.Errorf("profile %s: entitled: %w", key, err)
		}
		out[key] = profileReasons{visible: vr, entitled: er}
	}
	return out, nil
}

func parseDenials(v any) (map[string][]Reason, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("denials: want an object")
	}
	out := make(map[string][]Reason, len(m))
	for id, x := range m {
		rs, err := parseReasons(x)
		if err != nil {
			return nil, fmt.Errorf("denials of %q: %w", id, err)
		}
		out[id] = rs
	}
	return out, nil
}

// withCapability returns a profile's reasons for one capability: the state
// reasons name its replaced_by, and its deny refusals join, sorted by rule
// then detail and without duplicates, as the policy's sets and sort_reasons
// have them. The profile's slice is returned as is when nothing changes.
func withCapability(profile, deny []Reason, replacedBy string) []Reason {
	patch := replacedBy != "" && slices.ContainsFunc(profile, namesReplacement)
	if !patch && len(deny) == 0 {
		return profile
	}
	out := make([]Reason, 0, len(profile)+len(deny))
	for _, r := range profile {
		if namesReplacement(r) {
			r.Detail = replacedBy
		}
		out = append(out, r)
	}
	out = append(out, deny...)
	slices.SortFunc(out, func(a, b Reason) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Detail, b.Detail), cmp.Compare(a.Effect, b.Effect))
	})
	return slices.Compact(out)
}

// namesReplacement reports whether a reason's detail is the capability's
// replaced_by (see the policy's state_reasons).
func namesReplacement(r Reason) bool {
	return r.Rule == "state.removed" || r.Rule == "state.deprecated"
}

// granted is the policy's granted: at least one grant and no refusal.
func granted(rs []Reason) bool {
	if len(rs) == 0 {
		return false
	}
	for _, r := range rs {
		if r.Effect != "grant" {
			return false
		}
	}
	return true
}
