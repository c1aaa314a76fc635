package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/capgate/capgate/policy/manifest"
)

// reviewQuery asks the policy for one caller's reasons per profile (the
// very reason functions the decisions use) and for the deny modules'
// refusals by capability id ("*": every capability). It reads internal
// (_-prefixed) rules of capgate.authz: the engine is part of the policy's
// implementation, and the review tests fail to prepare if one is renamed.
const reviewQuery = `profiles := {key: r |
	some key, p in data.capgate.authz._profiles
	r := {
		"visible": data.capgate.authz._sort_reasons(data.capgate.authz._profile_visible_reasons(p)),
		"entitled": data.capgate.authz._sort_reasons(data.capgate.authz._profile_entitled_reasons(p)),
	}
}
denials := data.capgate.authz._denials`

// Review is one caller's decisions over the whole registry, with the same
// reasons Explain gives, computed the way the visible and entitled sets
// are: the reason rules are evaluated once per profile (capabilities with
// equal state, visibility, requires_scopes, requires_any_of and tenants) and the deny
// modules' refusals are applied per id. A review costs one small
// evaluation, whatever the registry's size; a capability's decision is
// assembled when asked for. It is immutable and safe for concurrent use.
//
// A profile has no replaced_by, so the state.removed and state.deprecated
// reasons it yields name none; Decision fills in the capability's. That is
// the only per-capability fact the reasons read (TestReviewAgreesWithExplain
// holds Review to Explain for every caller and capability).
type Review struct {
	caps     []manifest.Capability
	profile  []int               // per capability: its profile's index in profiles
	profiles []profileReasons    // by index
	denials  map[string][]Reason // by capability id; "*": every capability
}

// Review decides every capability for the caller (see Review). The query
// is prepared on first use, not by New: serving never needs it.
func (e *Engine) Review(ctx context.Context, c Caller) (*Review, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("review policy: %w", err)
	}
	e.reviewOnce.Do(func() {
		e.reviewQ, e.reviewErr = e.prepare(ctx, reviewQuery)
		e.profileKeys, e.profileIndex = indexProfiles(e.snap.ProfileKeys())
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
	r := &Review{caps: e.snap.Registry.All(), profile: e.profileIndex, profiles: make([]profileReasons, len(e.profileKeys))}
	for i, key := range e.profileKeys {
		p, ok := profiles[key]
		if !ok {
			return nil, fmt.Errorf("review policy: profile %q was not decided", key)
		}
		r.profiles[i] = p
	}
	if r.denials, err = parseDenials(rs[0].Bindings["denials"]); err != nil {
		return nil, fmt.Errorf("review policy: %w", err)
	}
	return r, nil
}

// indexProfiles lists the distinct profile keys and gives each capability
// the index of its own.
func indexProfiles(perCapability []string) (keys []string, index []int) {
	seen := map[string]int{}
	index = make([]int, len(perCapability))
	for i, k := range perCapability {
		j, ok := seen[k]
		if !ok {
			j = len(keys)
			seen[k] = j
			keys = append(keys, k)
		}
		index[i] = j
	}
	return keys, index
}

// Len is the number of capabilities, in registry (id) order.
func (r *Review) Len() int { return len(r.caps) }

// Visible reports whether the caller may see capability i.
func (r *Review) Visible(i int) bool {
	if r.denied(i) {
		return false
	}
	return r.profiles[r.profile[i]].visibleGranted
}

// Entitled reports whether the caller may run capability i.
func (r *Review) Entitled(i int) bool {
	if r.denied(i) {
		return false
	}
	return r.profiles[r.profile[i]].entitledGranted
}

// denied reports whether a deny module refuses capability i (its only
// effect is a refusal).
func (r *Review) denied(i int) bool {
	return len(r.denials) > 0 && (len(r.denials[r.caps[i].ID]) > 0 || len(r.denials["*"]) > 0)
}

// Decision returns capability i's decision with its reasons, as Explain
// reports it, without Limits: a review is about who may see and run what,
// and limits do not decide that.
func (r *Review) Decision(i int) Decision {
	c := &r.caps[i]
	p := r.profiles[r.profile[i]]
	deny := slices.Concat(r.denials[c.ID], r.denials["*"])
	vr := withCapability(p.visible, deny, c.ReplacedBy)
	er := withCapability(p.entitled, deny, c.ReplacedBy)
	return Decision{
		Capability: c.ID, Exists: true,
		State: string(c.State), Visibility: string(c.Visibility),
		Visible: granted(vr), Entitled: granted(er),
		VisibleReasons: vr, EntitledReasons: er,
	}
}

type profileReasons struct {
	visible, entitled               []Reason
	visibleGranted, entitledGranted bool
}

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
		out[key] = profileReasons{visible: vr, entitled: er, visibleGranted: granted(vr), entitledGranted: granted(er)}
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
	if len(deny) == 0 {
		return out // only a detail changed: the order by rule holds
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

// RoutingMode is the routing mode of capability i (manifest routing.mode;
// auto when not given).
func (r *Review) RoutingMode(i int) string {
	return string(r.caps[i].Routing.EffectiveMode())
}

// Capability names capability i and the state and visibility it has.
func (r *Review) Capability(i int) (id, state, visibility string) {
	c := &r.caps[i]
	return c.ID, string(c.State), string(c.Visibility)
}
