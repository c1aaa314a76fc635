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

import rego.v1

default caps := {}

caps := data.capgate.capabilities

default_settings := {"preview_scope": "", "preview_tenants": [], "anonymous_public": false}

default settings := {"preview_scope": "", "preview_tenants": [], "anonymous_public": false}

settings := object.union(default_settings, data.capgate.settings)

default_caller := {"authenticated": false, "subject": "", "tenant": "", "scopes": [], "preview": false}

caller := object.union(default_caller, object.get(input, "caller", {}))

caller_scopes := {s | some s in caller.scopes}

# Preview opt-in: only authenticated callers, by explicit flag, by holding
# the deployment's preview scope, or by belonging to a preview tenant.
opted_in if {
	caller.authenticated == true
	caller.preview == true
}

opted_in if {
	caller.authenticated == true
	settings.preview_scope != ""
	settings.preview_scope in caller_scopes
}

opted_in if {
	caller.authenticated == true
	caller.tenant != ""
	caller.tenant in settings.preview_tenants
}

# --- reasons -----------------------------------------------------------------
# Every reason is {"rule", "effect": "grant"|"refuse"} plus an optional
# "detail". A capability is visible (entitled) when its reasons hold at least
# one grant and no refusal; every reason function below is total, so a gap in
# the rules can only refuse, never allow.

grant(rule) := {"rule": rule, "effect": "grant"}

grant_detail(rule, detail) := {"rule": rule, "effect": "grant", "detail": detail}

refuse(rule) := {"rule": rule, "effect": "refuse"}

refuse_detail(rule, detail) := {"rule": rule, "effect": "refuse", "detail": detail}

known_states := {"preview", "ga", "deprecated", "removed"}

state_reasons(cap) := {refuse_detail("state.removed", object.get(cap, "replaced_by", ""))} if cap.state == "removed"

state_reasons(cap) := {grant("state.ga")} if cap.state == "ga"

state_reasons(cap) := {grant_detail("state.deprecated", object.get(cap, "replaced_by", ""))} if cap.state == "deprecated"

state_reasons(cap) := {grant("state.preview_opted_in")} if {
	cap.state == "preview"
	opted_in
}

state_reasons(cap) := {refuse("state.preview_not_opted_in")} if {
	cap.state == "preview"
	not opted_in
}

state_reasons(cap) := {refuse_detail("state.unknown", sprintf("%v", [object.get(cap, "state", null)]))} if {
	not object.get(cap, "state", null) in known_states
}

# requires_scopes may be absent or null (no scopes); anything but a list is
# refused rather than read as "no scopes".
declared_scopes(cap) := object.get(cap, "requires_scopes", null)

scopes_valid(cap) if declared_scopes(cap) == null

scopes_valid(cap) if is_array(declared_scopes(cap))

required_scopes(cap) := {s | some s in object.get(cap, "requires_scopes", [])} if scopes_valid(cap)

missing_scopes(cap) := required_scopes(cap) - caller_scopes

scope_reasons(cap) := {grant("scope.none_required")} if count(required_scopes(cap)) == 0

scope_reasons(cap) := {grant_detail("scope.held", concat(" ", sort(required_scopes(cap))))} if {
	count(required_scopes(cap)) > 0
	count(missing_scopes(cap)) == 0
}

scope_reasons(cap) := {refuse_detail("scope.missing", s) | some s in missing_scopes(cap)} if {
	count(missing_scopes(cap)) > 0
}

scope_reasons(cap) := {refuse("scope.invalid")} if not scopes_valid(cap)

tenant_reasons(cap) := {grant("tenant.any")} if cap.tenants == "*"

tenant_reasons(cap) := {grant_detail("tenant.listed", caller.tenant)} if {
	is_array(cap.tenants)
	caller.tenant != ""
	caller.tenant in cap.tenants
}

tenant_reasons(cap) := {refuse_detail("tenant.not_listed", caller.tenant)} if {
	is_array(cap.tenants)
	not tenant_listed(cap)
}

# object.get, not cap.tenants: a missing field must refuse, not leave the
# reasons (and so the report) undefined.
tenant_reasons(cap) := {refuse("tenant.invalid")} if {
	tenants := object.get(cap, "tenants", null)
	tenants != "*"
	not is_array(tenants)
}

tenant_listed(cap) if {
	caller.tenant != ""
	caller.tenant in cap.tenants
}

authenticated_reasons := {grant("auth.authenticated")} if caller.authenticated == true

authenticated_reasons := {refuse("auth.required")} if not caller.authenticated == true

# Deny rules from security teams' modules: package capgate.deny.<name>,
# `deny contains {"capability": <id or "*">, "reason": <text>}`.
denials[id] contains r if {
	some name
	some d in data.capgate.deny[name].deny
	id := d.capability
	r := refuse_detail(concat(".", ["deny", name]), object.get(d, "reason", ""))
}

deny_reasons(id) := object.get(denials, id, set()) | object.get(denials, "*", set())

# --- visibility ----------------------------------------------------------------

visibility_reasons(cap) := {grant("visibility.public")} if cap.visibility == "public"

visibility_reasons(cap) := {refuse("visibility.internal")} if cap.visibility == "internal"

visibility_reasons(cap) := ({grant("visibility.extended")} | authenticated_reasons) | (scope_reasons(cap) | tenant_reasons(cap)) if {
	cap.visibility == "extended"
}

visibility_reasons(cap) := unknown_visibility_reasons(cap) if not known_visibility(cap)

known_visibilities := {"public", "extended", "internal"}

known_visibility(cap) if object.get(cap, "visibility", null) in known_visibilities

# Empty for a known visibility: entitlement does not depend on it, but an
# unknown one refuses both projections (fail closed).
default unknown_visibility_reasons(_) := set()

unknown_visibility_reasons(cap) := {refuse_detail("visibility.unknown", sprintf("%v", [object.get(cap, "visibility", null)]))} if {
	not known_visibility(cap)
}

profile_visible_reasons(p) := state_reasons(p) | visibility_reasons(p)

visible_reasons(id, cap) := profile_visible_reasons(cap) | deny_reasons(id)

# --- entitlement ---------------------------------------------------------------

anonymous_allowed(cap) if {
	settings.anonymous_public == true
	cap.visibility == "public"
	count(required_scopes(cap)) == 0
}

entitled_auth_reasons(_) := {grant("auth.authenticated")} if caller.authenticated == true

entitled_auth_reasons(cap) := {grant("auth.anonymous_public")} if {
	not caller.authenticated == true
	anonymous_allowed(cap)
}

entitled_auth_reasons(cap) := {refuse("auth.required")} if {
	not caller.authenticated == true
	not anonymous_allowed(cap)
}

profile_entitled_reasons(p) := ((state_reasons(p) | entitled_auth_reasons(p)) | (scope_reasons(p) | tenant_reasons(p))) | unknown_visibility_reasons(p)

entitled_reasons(id, cap) := profile_entitled_reasons(cap) | deny_reasons(id)

# --- profiles ------------------------------------------------------------------
# Capabilities that share state, visibility, requires_scopes and tenants get
# the same decision except for deny rules. The compiler groups them under
# data.capgate.profiles and tags each capability with its profile key, so the
# sets below evaluate the reason rules once per profile, not once per
# capability. The reasons are the very same functions; only deny rules, which
# are per capability, are applied per id. A capability without a profile key
# (hand-written data, tests) is decided on its own; a key that names no
# profile decides nothing (fail closed).

default profiles := {}

profiles := data.capgate.profiles

visible_profiles contains key if {
	some key, p in profiles
	granted(profile_visible_reasons(p))
}

entitled_profiles contains key if {
	some key, p in profiles
	granted(profile_entitled_reasons(p))
}

# profile_key is the capability's profile, null when it has none.
profile_key(cap) := object.get(cap, "profile", null)

denied_ids := {id | some id, _ in denials}

deny_free(id) if {
	not id in denied_ids
	not "*" in denied_ids
}

# --- decisions -----------------------------------------------------------------

refused(reasons) if {
	some r in reasons
	r.effect == "refuse"
}

default granted(_) := false

granted(reasons) if {
	count(reasons) > 0
	not refused(reasons)
}

# METADATA
# title: visible
# description: Ids of the capabilities the caller may see in a card.
# entrypoint: true
visible contains id if {
	some id, cap in caps
	is_string(profile_key(cap))
	profile_key(cap) in visible_profiles
	deny_free(id)
}

visible contains id if {
	some id, cap in caps
	not is_string(profile_key(cap))
	granted(visible_reasons(id, cap))
}

# METADATA
# title: entitled
# description: Ids of the capabilities the caller may run now.
# entrypoint: true
entitled contains id if {
	some id, cap in caps
	is_string(profile_key(cap))
	profile_key(cap) in entitled_profiles
	deny_free(id)
}

entitled contains id if {
	some id, cap in caps
	not is_string(profile_key(cap))
	granted(entitled_reasons(id, cap))
}

report(id, cap) := {
	"capability": id,
	"exists": true,
	"state": object.get(cap, "state", null),
	"visibility": object.get(cap, "visibility", null),
	"visible": granted(vr),
	"entitled": granted(er),
	"allow": granted(er),
	"reasons": {"visible": sort_reasons(vr), "entitled": sort_reasons(er)},
	"limits": limits(cap),
} if {
	vr := visible_reasons(id, cap)
	er := entitled_reasons(id, cap)
}

sort_reasons(rs) := [r |
	some key in sort([k | some x in rs; k := reason_key(x)])
	some r in rs
	reason_key(r) == key
]

reason_key(r) := concat("\u0000", [r.rule, object.get(r, "detail", "")])

# The capability's limits (manifest `limits`, {} when none): part of every
# decision, so they travel with it to ext_authz, the router and, inside the
# handler token, to the handler. Deny modules read them as
# data.capgate.capabilities[id].limits.
limits(cap) := l if {
	l := object.get(cap, "limits", {})
	is_object(l)
}

limits(cap) := {} if not is_object(object.get(cap, "limits", {}))

# METADATA
# title: decision
# description: >-
#   For input.capability: exists, visible, entitled, allow (= entitled),
#   the reasons for each and the capability's limits. An unknown id is
#   refused.
# entrypoint: true
decision := report(input.capability, caps[input.capability])

decision := {
	"capability": input.capability,
	"exists": false,
	"visible": false,
	"entitled": false,
	"allow": false,
	"reasons": {
		"visible": [refuse("capability.unknown")],
		"entitled": [refuse("capability.unknown")],
	},
	"limits": {},
} if {
	not caps[input.capability]
}

# METADATA
# title: explain
# description: The decision for every capability, keyed by id.
# entrypoint: true
explain[id] := report(id, cap) if {
	some id, cap in caps
}
