# METADATA
# title: capgate authorization
# description: >-
#   One policy for every projection of the capability registry: which
#   capabilities a caller may see (cards) and which it may run (router,
#   ext_authz, handler calls), each with machine-readable reasons.
#   Data lives under data.capgate (capabilities by id, settings);
#   security teams may add deny rules in packages under capgate.deny.
# schemas:
#   - input: schema.input
package capgate.authz

# Rules whose names start with "_" are internal: deny modules may not read
# them (regocheck.CheckExtraModule refuses it), so they can change freely.
# The interface is the four entrypoints below (visible, entitled, decision,
# explain) and the documents under data.capgate.

default _caps := {}

_caps := data.capgate.capabilities

_default_settings := {"preview_scope": "", "preview_tenants": [], "anonymous_public": false}

_settings := object.union(_default_settings, _given_settings)

default _given_settings := {}

_given_settings := data.capgate.settings

_default_caller := {"authenticated": false, "issuer": "", "subject": "", "tenant": "", "scopes": []}

_caller := object.union(_default_caller, object.get(input, "caller", {}))

_caller_scopes := {s | some s in _caller.scopes}

# _authenticated holds for a caller that presented a verified credential;
# only `true` counts (fail closed on any other value).
_authenticated if _caller.authenticated == true

# Preview opt-in: only authenticated callers, by holding the deployment's
# preview scope or by belonging to a preview tenant.
_opted_in if {
	_authenticated
	_settings.preview_scope != ""
	_settings.preview_scope in _caller_scopes
}

_opted_in if {
	_authenticated
	_caller.tenant != ""
	_caller.tenant in _settings.preview_tenants
}

# --- reasons -----------------------------------------------------------------
# Every reason is {"rule", "effect": "grant"|"refuse"} plus an optional
# "detail". A capability is visible (entitled) when its reasons hold at least
# one grant and no refusal; every reason function below is total, so a gap in
# the rules can only refuse, never allow.

_grant(rule) := {"rule": rule, "effect": "grant"}

_grant_detail(rule, detail) := {"rule": rule, "effect": "grant", "detail": detail}

_refuse(rule) := {"rule": rule, "effect": "refuse"}

_refuse_detail(rule, detail) := {"rule": rule, "effect": "refuse", "detail": detail}

_known_states := {"preview", "ga", "deprecated", "removed"}

_state_reasons(cap) := {_refuse_detail("state.removed", object.get(cap, "replaced_by", ""))} if cap.state == "removed"

_state_reasons(cap) := {_grant("state.ga")} if cap.state == "ga"

_state_reasons(cap) := {_grant_detail("state.deprecated", object.get(cap, "replaced_by", ""))} if cap.state == "deprecated"

_state_reasons(cap) := {_grant("state.preview_opted_in")} if {
	cap.state == "preview"
	_opted_in
}

_state_reasons(cap) := {_refuse("state.preview_not_opted_in")} if {
	cap.state == "preview"
	not _opted_in
}

_state_reasons(cap) := {_refuse_detail("state.unknown", sprintf("%v", [object.get(cap, "state", null)]))} if {
	not object.get(cap, "state", null) in _known_states
}

# requires_scopes may be absent or null (no scopes); anything but a list is
# refused rather than read as "no scopes".
_declared_scopes(cap) := object.get(cap, "requires_scopes", null)

_scopes_valid(cap) if _declared_scopes(cap) == null

_scopes_valid(cap) if is_array(_declared_scopes(cap))

_required_scopes(cap) := {s | some s in object.get(cap, "requires_scopes", [])} if _scopes_valid(cap)

_missing_scopes(cap) := _required_scopes(cap) - _caller_scopes

_scope_reasons(cap) := {_grant("scope.none_required")} if {
	count(_required_scopes(cap)) == 0
	_no_alternatives(cap)
}

# With alternatives and no requires_scopes, the alternatives' reasons alone
# say why (scope.any_of_held / scope.any_of_missing).
_scope_reasons(cap) := set() if {
	count(_required_scopes(cap)) == 0
	not _no_alternatives(cap)
}

_scope_reasons(cap) := {_grant_detail("scope.held", concat(" ", sort(_required_scopes(cap))))} if {
	count(_required_scopes(cap)) > 0
	count(_missing_scopes(cap)) == 0
}

_scope_reasons(cap) := {_refuse_detail("scope.missing", s) | some s in _missing_scopes(cap)} if {
	count(_missing_scopes(cap)) > 0
}

_scope_reasons(cap) := {_refuse("scope.invalid")} if not _scopes_valid(cap)

# requires_any_of: alternative scope sets; besides requires_scopes the
# caller must hold every scope of at least one. Absent, null or [] means
# none; anything but a list of lists of strings is refused. Each alternative
# the caller holds is a grant naming its scopes (the one that grants the
# cell); when it holds none, each alternative is a refusal naming the
# scopes it lacks there and the alternative ("fleet.shift_lead of
# [fleet.dispatch fleet.shift_lead]").
_declared_alternatives(cap) := object.get(cap, "requires_any_of", null)

_no_alternatives(cap) if _declared_alternatives(cap) == null

_no_alternatives(cap) if _declared_alternatives(cap) == []

_alternatives_valid(cap) if _no_alternatives(cap)

_alternatives_valid(cap) if {
	alts := _declared_alternatives(cap)
	is_array(alts)
	every alt in alts {
		is_array(alt)
		every s in alt {
			is_string(s)
		}
	}
}

_alternatives(cap) := [{s | some s in alt} | some alt in _declared_alternatives(cap)] if {
	not _no_alternatives(cap)
	_alternatives_valid(cap)
}

_alternative_held(cap) if {
	some alt in _alternatives(cap)
	count(alt - _caller_scopes) == 0
}

_any_of_reasons(cap) := set() if _no_alternatives(cap)

_any_of_reasons(cap) := {_grant_detail("scope.any_of_held", concat(" ", sort(alt))) |
	some alt in _alternatives(cap)
	count(alt - _caller_scopes) == 0
} if _alternative_held(cap)

_any_of_reasons(cap) := {_refuse_detail("scope.any_of_missing", sprintf("%s of [%s]", [concat(" ", sort(alt - _caller_scopes)), concat(" ", sort(alt))])) |
	some alt in _alternatives(cap)
} if {
	count(_alternatives(cap)) > 0
	not _alternative_held(cap)
}

_any_of_reasons(cap) := {_refuse("scope.any_of_invalid")} if not _alternatives_valid(cap)

_tenant_reasons(cap) := {_grant("tenant.any")} if cap.tenants == "*"

_tenant_reasons(cap) := {_grant_detail("tenant.listed", _caller.tenant)} if {
	is_array(cap.tenants)
	_caller.tenant != ""
	_caller.tenant in cap.tenants
}

_tenant_reasons(cap) := {_refuse_detail("tenant.not_listed", _caller.tenant)} if {
	is_array(cap.tenants)
	not _tenant_listed(cap)
}

# object.get, not cap.tenants: a missing field must refuse, not leave the
# reasons (and so the report) undefined.
_tenant_reasons(cap) := {_refuse("tenant.invalid")} if {
	tenants := object.get(cap, "tenants", null)
	tenants != "*"
	not is_array(tenants)
}

_tenant_listed(cap) if {
	_caller.tenant != ""
	_caller.tenant in cap.tenants
}

_authenticated_reasons := {_grant("auth.authenticated")} if _authenticated

_authenticated_reasons := {_refuse("auth.required")} if not _authenticated

# Deny rules from security teams' modules: package capgate.deny.<name>,
# `deny contains {"capability": <id or "*">, "reason": <text>}`.
_denials[id] contains r if {
	some name
	some d in data.capgate.deny[name].deny
	id := d.capability
	r := _refuse_detail(concat(".", ["deny", name]), object.get(d, "reason", ""))
}

_deny_reasons(id) := object.get(_denials, id, set()) | object.get(_denials, "*", set())

# --- visibility ----------------------------------------------------------------

_visibility_reasons(cap) := {_grant("visibility.public")} if cap.visibility == "public"

_visibility_reasons(cap) := {_refuse("visibility.internal")} if cap.visibility == "internal"

_visibility_reasons(cap) := ({_grant("visibility.extended")} | _authenticated_reasons) | ((_scope_reasons(cap) | _any_of_reasons(cap)) | _tenant_reasons(cap)) if {
	cap.visibility == "extended"
}

_visibility_reasons(cap) := _unknown_visibility_reasons(cap) if not _known_visibility(cap)

_known_visibilities := {"public", "extended", "internal"}

_known_visibility(cap) if object.get(cap, "visibility", null) in _known_visibilities

# Empty for a known visibility: entitlement does not depend on it, but an
# unknown one refuses both projections (fail closed).
default _unknown_visibility_reasons(_) := set()

_unknown_visibility_reasons(cap) := {_refuse_detail("visibility.unknown", sprintf("%v", [object.get(cap, "visibility", null)]))} if {
	not _known_visibility(cap)
}

_profile_visible_reasons(p) := _state_reasons(p) | _visibility_reasons(p)

_visible_reasons(id, cap) := _profile_visible_reasons(cap) | _deny_reasons(id)

# --- entitlement ---------------------------------------------------------------

_anonymous_allowed(cap) if {
	_settings.anonymous_public == true
	cap.visibility == "public"
	count(_required_scopes(cap)) == 0
	_no_alternatives(cap)
}

_entitled_auth_reasons(_) := {_grant("auth.authenticated")} if _authenticated

_entitled_auth_reasons(cap) := {_grant("auth.anonymous_public")} if {
	not _authenticated
	_anonymous_allowed(cap)
}

_entitled_auth_reasons(cap) := {_refuse("auth.required")} if {
	not _authenticated
	not _anonymous_allowed(cap)
}

_profile_entitled_reasons(p) := ((_state_reasons(p) | _entitled_auth_reasons(p)) | ((_scope_reasons(p) | _any_of_reasons(p)) | _tenant_reasons(p))) | _unknown_visibility_reasons(p)

_entitled_reasons(id, cap) := _profile_entitled_reasons(cap) | _deny_reasons(id)

# --- profiles ------------------------------------------------------------------
# Capabilities that share state, visibility, requires_scopes, requires_any_of
# and tenants get the same decision except for deny rules. The compiler groups them under
# data.capgate.profiles and tags each capability with its profile key, so the
# sets below evaluate the reason rules once per profile, not once per
# capability. The reasons are the very same functions; only deny rules, which
# are per capability, are applied per id. A capability without a profile key
# (hand-written data, tests) is decided on its own; a key that names no
# profile decides nothing (fail closed).

default _profiles := {}

_profiles := data.capgate.profiles

_visible_profiles contains key if {
	some key, p in _profiles
	_granted(_profile_visible_reasons(p))
}

_entitled_profiles contains key if {
	some key, p in _profiles
	_granted(_profile_entitled_reasons(p))
}

# _profile_key is the capability's profile, null when it has none.
_profile_key(cap) := object.get(cap, "profile", null)

_denied_ids := {id | some id, _ in _denials}

_deny_free(id) if {
	not id in _denied_ids
	not "*" in _denied_ids
}

# --- decisions -----------------------------------------------------------------

_refused(reasons) if {
	some r in reasons
	r.effect == "refuse"
}

default _granted(_) := false

_granted(reasons) if {
	count(reasons) > 0
	not _refused(reasons)
}

# METADATA
# title: visible
# description: >-
#   Ids of the capabilities the caller may see in a card. Two rules: the
#   first is the fast path for a capability tagged with a profile key (the
#   compiler tags every one), decided once per profile in _visible_profiles
#   and then per id by deny rules only; the second decides a capability
#   without a profile key (hand-written data, tests) on its own reasons. The
#   two give the same answer for the same facts (test_profiles_design_*).
# scope: document
# entrypoint: true
visible contains id if {
	some id, cap in _caps
	is_string(_profile_key(cap))
	_profile_key(cap) in _visible_profiles
	_deny_free(id)
}

visible contains id if {
	some id, cap in _caps
	not is_string(_profile_key(cap))
	_granted(_visible_reasons(id, cap))
}

# METADATA
# title: entitled
# description: >-
#   Ids of the capabilities the caller may run now. Two rules, as for
#   visible: the per-profile fast path (_entitled_profiles, then deny rules
#   per id) for a capability with a profile key, and the capability's own
#   reasons for one without.
# scope: document
# entrypoint: true
entitled contains id if {
	some id, cap in _caps
	is_string(_profile_key(cap))
	_profile_key(cap) in _entitled_profiles
	_deny_free(id)
}

entitled contains id if {
	some id, cap in _caps
	not is_string(_profile_key(cap))
	_granted(_entitled_reasons(id, cap))
}

_report(id, cap) := {
	"capability": id,
	"exists": true,
	"state": object.get(cap, "state", null),
	"visibility": object.get(cap, "visibility", null),
	"visible": _granted(vr),
	"entitled": _granted(er),
	"allow": _granted(er),
	"reasons": {"visible": _sort_reasons(vr), "entitled": _sort_reasons(er)},
	"limits": _limits(cap),
	"quotas": _report_quotas(id, cap, er),
} if {
	vr := _visible_reasons(id, cap)
	er := _entitled_reasons(id, cap)
}

_sort_reasons(rs) := [r |
	some key in sort([k | some x in rs; k := _reason_key(x)])
	some r in rs
	_reason_key(r) == key
]

_reason_key(r) := concat("\u0000", [r.rule, object.get(r, "detail", "")])

# The capability's limits (manifest `limits`, {} when none): part of every
# decision, so they travel with it to ext_authz, the router and, inside the
# handler token, to the handler. Deny modules read them as
# data.capgate.capabilities[id].limits.
_limits(cap) := l if {
	l := object.get(cap, "limits", {})
	is_object(l)
}

_limits(cap) := {} if not is_object(object.get(cap, "limits", {}))

# --- quotas --------------------------------------------------------------------
# Which quotas apply to a call of a capability the caller is entitled to
# (none when it is not: a refused call is not counted). capgate counts;
# the policy never sees a counter. Each quota is {id, plan?, unit, limit,
# window_seconds, cost, key: [{name, value}], on_store_error}; the caller
# key part's value is left empty (the caller is bound when counting, so a
# decision stays shared by its entitlement class). Sources:
#   - plans of the config (data.capgate.settings.quotas.plans): granted by
#     scopes, tenants and issuers like entitlement, optionally restricted to
#     capabilities or cost classes; a unit budget counts the capability's
#     units (manifest quota.units, else quotas.cost_classes[cost_class]) and
#     does not apply to a capability that costs nothing;
#   - the capability's own rate (manifest quota.rate), per caller;
#   - deny modules: `quota contains {"capability": <id or "*">, "id", "unit",
#     "limit", "window_seconds", "key": [part names], "on_store_error"?}` in
#     package capgate.deny.<name> adds a quota (deny.<name>.<id>); a quota can
#     only refuse more, so deny modules tighten and never loosen.

default _quota_settings := {}

_quota_settings := _settings.quotas

_plans := object.get(_quota_settings, "plans", [])

_cost_classes := object.get(_quota_settings, "cost_classes", {})

_cost_class(cap) := c if {
	c := object.get(_limits(cap), "cost_class", null)
	is_string(c)
} else := ""

_units(cap) := u if {
	u := object.get(object.get(cap, "quota", {}), "units", 0)
	u > 0
} else := u if {
	u := _cost_classes[_cost_class(cap)]
} else := 0

_in_or_any(list, _) if count(list) == 0

_in_or_any(list, v) if {
	v != ""
	v in list
}

_plan_granted(p) if {
	g := p.grant
	_grant_auth(g)
	every s in g.scopes {
		s in _caller_scopes
	}
	_in_or_any(g.tenants, _caller.tenant)
	_in_or_any(g.issuers, _caller.issuer)
}

_grant_auth(g) if g.authenticated != true

_grant_auth(g) if {
	g.authenticated == true
	_authenticated
}

_plan_covers(p, _, _) if {
	count(p.capabilities) == 0
	count(p.cost_classes) == 0
}

_plan_covers(p, id, _) if id in p.capabilities

_plan_covers(p, _, cap) if {
	_cost_class(cap) != ""
	_cost_class(cap) in p.cost_classes
}

_cost(unit, _) := 1 if unit == "calls"

_cost(unit, cap) := _units(cap) if unit == "units"

_key_part("caller", _, _) := {"name": "caller", "value": ""}

_key_part("tenant", _, _) := {"name": "tenant", "value": _caller.tenant}

_key_part("capability", id, _) := {"name": "capability", "value": id}

_key_part("cost_class", _, cap) := {"name": "cost_class", "value": _cost_class(cap)}

_plan_quotas(id, cap) := {q |
	some p in _plans
	_plan_granted(p)
	_plan_covers(p, id, cap)
	cost := _cost(p.unit, cap)
	cost > 0
	q := {
		"id": concat(".", ["plan", p.id]),
		"plan": p.id,
		"unit": p.unit,
		"limit": p.limit,
		"window_seconds": p.window_seconds,
		"cost": cost,
		"key": [_key_part(k, id, cap) | some k in p.key],
		"on_store_error": p.on_store_error,
	}
}

_rate_quotas(id, cap) := {q |
	r := cap.quota.rate
	q := {
		"id": concat(".", ["rate", id]),
		"unit": "calls",
		"limit": r.calls,
		"window_seconds": r.window_seconds,
		"cost": 1,
		"key": [_key_part("caller", id, cap), _key_part("capability", id, cap)],
		"on_store_error": r.on_store_error,
	}
}

_deny_quotas(id, cap) := {q |
	some name
	some d in data.capgate.deny[name].quota
	object.get(d, "capability", null) in {id, "*"}
	cost := _deny_cost(d, cap)
	cost != 0
	q := {
		"id": concat(".", ["deny", name, sprintf("%v", [object.get(d, "id", null)])]),
		"unit": object.get(d, "unit", null),
		"limit": object.get(d, "limit", null),
		"window_seconds": object.get(d, "window_seconds", null),
		"cost": cost,
		"key": [_deny_key_part(k, id, cap) | some k in object.get(d, "key", [])],
		"on_store_error": object.get(d, "on_store_error", _default_store_error(object.get(d, "unit", null))),
	}
}

# A deny module's malformed quota is reported as it is (null where a member
# is missing or wrong), so that reading the decision fails and the call is
# refused: a tightening rule is never dropped in silence.
_deny_cost(d, cap) := _cost(d.unit, cap) if d.unit in {"calls", "units"}

_deny_cost(d, _) := null if not object.get(d, "unit", null) in {"calls", "units"}

_deny_key_part(k, id, cap) := _key_part(k, id, cap) if k in {"caller", "tenant", "capability", "cost_class"}

_deny_key_part(k, _, _) := {"name": sprintf("%v", [k]), "value": ""} if not k in {"caller", "tenant", "capability", "cost_class"}

_default_store_error(unit) := "closed" if unit == "units"

_default_store_error(unit) := "open" if unit != "units"

_quotas(id, cap) := (_plan_quotas(id, cap) | _rate_quotas(id, cap)) | _deny_quotas(id, cap)

_report_quotas(id, cap, er) := sort([q | some q in _quotas(id, cap)]) if _granted(er)

_report_quotas(_, _, er) := [] if not _granted(er)

# METADATA
# title: decision
# description: >-
#   For input.capability: exists, visible, entitled, allow (= entitled),
#   the reasons for each, the capability's limits and the quotas a call
#   of it by this caller counts against. An unknown id is refused.
# entrypoint: true
decision := _report(input.capability, _caps[input.capability])

decision := {
	"capability": input.capability,
	"exists": false,
	"visible": false,
	"entitled": false,
	"allow": false,
	"reasons": {
		"visible": [_refuse("capability.unknown")],
		"entitled": [_refuse("capability.unknown")],
	},
	"limits": {},
	"quotas": [],
} if {
	not _caps[input.capability]
}

# METADATA
# title: explain
# description: The decision for every capability, keyed by id.
# entrypoint: true
explain[id] := _report(id, cap) if {
	some id, cap in _caps
}
