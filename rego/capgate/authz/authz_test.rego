package capgate.authz_test

import data.capgate.authz

# --- fixtures ------------------------------------------------------------------
# The finance agent of the design plus one capability per remaining state and
# visibility.

capabilities := {
	"lookup-invoice": {
		"id": "lookup-invoice", "state": "ga", "visibility": "public",
		"requires_scopes": [], "tenants": "*", "handler": "invoices.lookup", "tags": ["finance"],
	},
	"reconcile-invoice": {
		"id": "reconcile-invoice", "state": "deprecated", "visibility": "extended",
		"requires_scopes": ["recon.run"], "tenants": ["acme", "beta"], "replaced_by": "reconcile-invoice-v2",
		"handler": "recon.v3.reconcile", "tags": ["finance"],
	},
	"reconcile-invoice-v2": {
		"id": "reconcile-invoice-v2", "state": "ga", "visibility": "extended",
		"requires_scopes": ["recon.run", "recon.pdf"], "tenants": "*", "handler": "recon.v4.reconcile", "tags": ["finance"],
	},
	"audit-trail": {
		"id": "audit-trail", "state": "ga", "visibility": "internal",
		"requires_scopes": ["audit.read"], "tenants": "*", "handler": "audit.trail", "tags": ["audit"],
	},
	"forecast": {
		"id": "forecast", "state": "preview", "visibility": "extended",
		"requires_scopes": ["forecast.run"], "tenants": "*", "handler": "forecast.v1", "tags": ["finance"],
	},
	"old-export": {
		"id": "old-export", "state": "removed", "visibility": "public",
		"requires_scopes": [], "tenants": "*", "replaced_by": "export-v2", "handler": "export.v1", "tags": [],
	},
}

settings := {"preview_scope": "preview.opt", "preview_tenants": ["beta"], "anonymous_public": false}

anonymous := {"authenticated": false, "subject": "", "tenant": "", "scopes": []}

partner := {"authenticated": true, "subject": "orchestrator", "tenant": "acme", "scopes": ["recon.run"]}

grant(rule) := {"rule": rule, "effect": "grant"}

grant_detail(rule, detail) := {"rule": rule, "effect": "grant", "detail": detail}

refuse(rule) := {"rule": rule, "effect": "refuse"}

refuse_detail(rule, detail) := {"rule": rule, "effect": "refuse", "detail": detail}

refusals(reasons) := [r | some r in reasons; r.effect == "refuse"]

# decision_for evaluates authz.decision for one capability of the fixtures.
decision_for(id, caller) := d if {
	d := authz.decision with input as {"caller": caller, "capability": id}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
}

# decision_of evaluates authz.decision for a single, ad-hoc capability "x".
decision_of(cap, caller) := d if {
	d := authz.decision with input as {"caller": caller, "capability": "x"}
		with data.capgate.capabilities as {"x": cap}
		with data.capgate.settings as settings
}

# no_diff holds when d is empty; otherwise it prints d (shown for failing tests).
no_diff(_, d) if count(d) == 0

no_diff(what, d) := false if {
	count(d) > 0
	print(what, d)
}

# --- projections of the reference example -------------------------------------

test_visible_public_card_anonymous if {
	authz.visible == {"lookup-invoice"} with input as {"caller": anonymous}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
}

test_visible_no_caller_is_anonymous if {
	authz.visible == {"lookup-invoice"} with input as {}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
	count(authz.entitled) == 0 with input as {}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
}

test_visible_extended_card_partner if {
	authz.visible == {"lookup-invoice", "reconcile-invoice"} with input as {"caller": partner}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
}

test_visible_no_capabilities if {
	count(authz.visible) == 0 with input as {"caller": partner}
	count(authz.entitled) == 0 with input as {"caller": partner}
	count(authz.explain) == 0 with input as {"caller": partner}
}

test_entitled_partner if {
	authz.entitled == {"lookup-invoice", "reconcile-invoice"} with input as {"caller": partner}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
}

test_entitled_anonymous_refused_by_default if {
	count(authz.entitled) == 0 with input as {"caller": anonymous}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
}

test_entitled_anonymous_public_setting if {
	authz.entitled == {"lookup-invoice"} with input as {"caller": anonymous}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as {"anonymous_public": true}
}

test_entitled_settings_default_when_absent if {
	count(authz.entitled) == 0 with input as {"caller": anonymous}
		with data.capgate.capabilities as capabilities
}

test_entitled_internal_capability if {
	caller := object.union(partner, {"scopes": ["audit.read"]})
	authz.entitled == {"lookup-invoice", "audit-trail"} with input as {"caller": caller}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
	authz.visible == {"lookup-invoice"} with input as {"caller": caller}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
}

# --- preview opt-in -------------------------------------------------------------

forecaster := object.union(partner, {"scopes": ["forecast.run"]})

test_opted_in_by_scope if {
	decision_for("forecast", object.union(forecaster, {"scopes": ["forecast.run", "preview.opt"]})).allow
}

test_opted_in_by_tenant if {
	decision_for("forecast", object.union(forecaster, {"tenant": "beta"})).allow
}

test_opted_in_not_opted_in if {
	d := decision_for("forecast", forecaster)
	not d.visible
	not d.allow
	refusals(d.reasons.visible) == [refuse("state.preview_not_opted_in")]
	refusals(d.reasons.entitled) == [refuse("state.preview_not_opted_in")]
}

test_opted_in_anonymous_never if {
	# Every opt-in route at once, but unauthenticated.
	caller := {"authenticated": false, "tenant": "beta", "scopes": ["forecast.run", "preview.opt"]}
	d := decision_for("forecast", caller)
	not d.visible
	not d.allow
	refuse("state.preview_not_opted_in") in d.reasons.entitled
}

test_opted_in_empty_preview_scope_never_matches if {
	caller := object.union(forecaster, {"scopes": ["forecast.run", ""]})
	d := authz.decision with input as {"caller": caller, "capability": "forecast"}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as {"preview_scope": "", "preview_tenants": [""]}
	not d.allow
}

test_opted_in_empty_tenant_never_matches if {
	caller := object.union(forecaster, {"tenant": ""})
	d := authz.decision with input as {"caller": caller, "capability": "forecast"}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as {"preview_tenants": [""]}
	not d.allow
}

# --- decisions and their reasons -----------------------------------------------

test_decision_partner_deprecated_all_reasons if {
	decision_for("reconcile-invoice", partner) == {
		"capability": "reconcile-invoice",
		"exists": true,
		"state": "deprecated",
		"visibility": "extended",
		"visible": true,
		"entitled": true,
		"allow": true,
		"reasons": {
			"visible": [
				grant("auth.authenticated"),
				grant_detail("scope.held", "recon.run"),
				grant_detail("state.deprecated", "reconcile-invoice-v2"),
				grant_detail("tenant.listed", "acme"),
				grant("visibility.extended"),
			],
			"entitled": [
				grant("auth.authenticated"),
				grant_detail("scope.held", "recon.run"),
				grant_detail("state.deprecated", "reconcile-invoice-v2"),
				grant_detail("tenant.listed", "acme"),
			],
		},
		"limits": {},
		"quotas": [],
	}
}

test_decision_public_anonymous_reasons if {
	d := decision_for("lookup-invoice", anonymous)
	d.visible
	not d.allow
	d.reasons.visible == [grant("state.ga"), grant("visibility.public")]
	d.reasons.entitled == [
		refuse("auth.required"),
		grant("scope.none_required"),
		grant("state.ga"),
		grant("tenant.any"),
	]
}

test_decision_anonymous_public_grant_reason if {
	d := authz.decision with input as {"caller": anonymous, "capability": "lookup-invoice"}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as {"anonymous_public": true}
	d.allow
	grant("auth.anonymous_public") in d.reasons.entitled
}

test_decision_scope_missing_per_scope if {
	d := decision_for("reconcile-invoice-v2", object.union(partner, {"scopes": ["other"]}))
	not d.visible
	not d.allow
	want := [refuse_detail("scope.missing", "recon.pdf"), refuse_detail("scope.missing", "recon.run")]
	refusals(d.reasons.visible) == want
	refusals(d.reasons.entitled) == want
}

test_decision_scope_held_lists_all if {
	d := decision_for("reconcile-invoice-v2", object.union(partner, {"scopes": ["recon.pdf", "x", "recon.run"]}))
	d.allow
	grant_detail("scope.held", "recon.pdf recon.run") in d.reasons.entitled
}

test_decision_tenant_not_listed if {
	d := decision_for("reconcile-invoice", object.union(partner, {"tenant": "zeta"}))
	not d.visible
	not d.allow
	refusals(d.reasons.entitled) == [refuse_detail("tenant.not_listed", "zeta")]
}

test_decision_tenant_not_listed_without_tenant if {
	d := decision_for("reconcile-invoice", object.union(partner, {"tenant": ""}))
	refusals(d.reasons.entitled) == [refuse_detail("tenant.not_listed", "")]
}

test_decision_state_removed_names_replacement if {
	d := decision_for("old-export", partner)
	not d.visible
	not d.allow
	refusals(d.reasons.visible) == [refuse_detail("state.removed", "export-v2")]
	refusals(d.reasons.entitled) == [refuse_detail("state.removed", "export-v2")]
}

test_decision_auth_required if {
	d := decision_for("reconcile-invoice", anonymous)
	want := [
		refuse("auth.required"),
		refuse_detail("scope.missing", "recon.run"),
		refuse_detail("tenant.not_listed", ""),
	]
	refusals(d.reasons.visible) == want
	refusals(d.reasons.entitled) == want
}

test_decision_visibility_internal if {
	d := decision_for("audit-trail", object.union(partner, {"scopes": ["audit.read"]}))
	not d.visible
	d.allow
	d.reasons.visible == [grant("state.ga"), refuse("visibility.internal")]
}

test_decision_capability_unknown if {
	decision_for("ghost", partner) == {
		"capability": "ghost",
		"exists": false,
		"visible": false,
		"entitled": false,
		"allow": false,
		"reasons": {
			"visible": [refuse("capability.unknown")],
			"entitled": [refuse("capability.unknown")],
		},
		"limits": {},
		"quotas": [],
	}
}

test_decision_limits_from_the_manifest if {
	caps := object.union(capabilities, {"lookup-invoice": object.union(capabilities["lookup-invoice"], {"limits": {"max_parts": 4, "cost_class": "high"}})})
	d := authz.decision with input as {"caller": partner, "capability": "lookup-invoice"}
		with data.capgate.capabilities as caps
		with data.capgate.settings as settings
	d.allow
	d.limits == {"max_parts": 4, "cost_class": "high"}
}

test_decision_limits_empty_when_none if {
	decision_for("lookup-invoice", partner).limits == {}
}

test_decision_limits_refused_capability_still_reports_them if {
	caps := object.union(capabilities, {"reconcile-invoice": object.union(capabilities["reconcile-invoice"], {"limits": {"max_parts": 2}})})
	d := authz.decision with input as {"caller": anonymous, "capability": "reconcile-invoice"}
		with data.capgate.capabilities as caps
		with data.capgate.settings as settings
	not d.allow
	d.limits == {"max_parts": 2}
}

test_decision_limits_malformed_read_as_none if {
	d := decision_of(object.union(valid_cap, {"limits": ["max_parts", 2]}), partner)
	d.limits == {}
}

test_decision_undefined_without_capability if {
	not authz.decision with input as {"caller": partner}
		with data.capgate.capabilities as capabilities
}

test_explain_every_capability if {
	e := authz.explain with input as {"caller": partner}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
	object.keys(e) == object.keys(capabilities)
	every id, report in e {
		report == decision_for(id, partner)
	}
}

# --- malformed records fail closed -----------------------------------------------

valid_cap := {"state": "ga", "visibility": "public", "requires_scopes": [], "tenants": "*"}

test_decision_state_unknown if {
	d := decision_of(object.union(valid_cap, {"state": "beta"}), partner)
	not d.visible
	not d.allow
	refusals(d.reasons.visible) == [refuse_detail("state.unknown", "beta")]
	refusals(d.reasons.entitled) == [refuse_detail("state.unknown", "beta")]
}

test_decision_state_missing if {
	d := decision_of(object.remove(valid_cap, {"state"}), partner)
	d.exists
	d.state == null
	not d.visible
	not d.allow
	refusals(d.reasons.entitled) == [refuse_detail("state.unknown", "null")]
}

test_decision_visibility_unknown if {
	d := decision_of(object.union(valid_cap, {"visibility": "secret"}), partner)
	not d.visible
	not d.allow
	refusals(d.reasons.visible) == [refuse_detail("visibility.unknown", "secret")]
	refusals(d.reasons.entitled) == [refuse_detail("visibility.unknown", "secret")]
}

test_decision_visibility_missing if {
	d := decision_of(object.remove(valid_cap, {"visibility"}), partner)
	d.visibility == null
	not d.visible
	not d.allow
}

test_decision_tenant_invalid if {
	d := decision_of(object.union(valid_cap, {"tenants": "acme"}), partner)
	not d.allow
	refusals(d.reasons.entitled) == [refuse("tenant.invalid")]
}

test_decision_tenant_missing if {
	d := decision_of(object.remove(valid_cap, {"tenants"}), partner)
	not d.allow
	refusals(d.reasons.entitled) == [refuse("tenant.invalid")]
}

test_decision_scope_invalid if {
	d := decision_of(object.union(valid_cap, {"requires_scopes": "recon.run"}), partner)
	not d.allow
	refusals(d.reasons.entitled) == [refuse("scope.invalid")]
	d2 := authz.decision with input as {"caller": anonymous, "capability": "x"}
		with data.capgate.capabilities as {"x": object.union(valid_cap, {"requires_scopes": "recon.run"})}
		with data.capgate.settings as {"anonymous_public": true}
	not d2.allow
}

test_decision_scope_null_means_none if {
	d := decision_of(object.union(valid_cap, {"requires_scopes": null}), partner)
	d.allow
	grant("scope.none_required") in d.reasons.entitled
}

# --- deny modules -----------------------------------------------------------------

test_deny_one_capability if {
	denials := {{"capability": "reconcile-invoice", "reason": "incident 42"}}
	authz.visible == {"lookup-invoice"} with input as {"caller": partner}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
		with data.capgate.deny.sec.deny as denials
	authz.entitled == {"lookup-invoice"} with input as {"caller": partner}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
		with data.capgate.deny.sec.deny as denials
	d := authz.decision with input as {"caller": partner, "capability": "reconcile-invoice"}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
		with data.capgate.deny.sec.deny as denials
	not d.allow
	refusals(d.reasons.visible) == [refuse_detail("deny.sec", "incident 42")]
	refusals(d.reasons.entitled) == [refuse_detail("deny.sec", "incident 42")]
}

test_deny_everything if {
	denials := {{"capability": "*", "reason": "kill switch"}}
	count(authz.visible) == 0 with input as {"caller": partner}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
		with data.capgate.deny.sec.deny as denials
	count(authz.entitled) == 0 with input as {"caller": partner}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
		with data.capgate.deny.sec.deny as denials
}

test_deny_several_modules_reasons if {
	d := authz.decision with input as {"caller": partner, "capability": "lookup-invoice"}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
		with data.capgate.deny as {
			"sec": {"deny": {{"capability": "lookup-invoice"}}},
			"ops": {"deny": [{"capability": "*", "reason": "maintenance"}]},
		}
	not d.visible
	not d.allow
	refusals(d.reasons.entitled) == [refuse_detail("deny.ops", "maintenance"), refuse_detail("deny.sec", "")]
}

test_deny_never_widens if {
	# A deny module naming capabilities the manifests refuse, an unknown id and
	# an entry dressed up as a grant: nothing becomes visible or entitled.
	denials := {
		{"capability": "audit-trail", "effect": "grant"},
		{"capability": "ghost", "reason": "grant"},
		{"capability": "forecast", "reason": "allow"},
	}
	authz.visible == {"lookup-invoice"} with input as {"caller": anonymous}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
		with data.capgate.deny.sec.deny as denials
	count(authz.entitled) == 0 with input as {"caller": anonymous}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
		with data.capgate.deny.sec.deny as denials
	object.keys(authz.explain) == object.keys(capabilities) with input as {"caller": anonymous}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
		with data.capgate.deny.sec.deny as denials
	d := authz.decision with input as {"caller": anonymous, "capability": "ghost"}
		with data.capgate.capabilities as capabilities
		with data.capgate.deny.sec.deny as denials
	not d.exists
	not d.allow
}

test_deny_unrelated_capability_untouched if {
	authz.entitled == {"lookup-invoice", "reconcile-invoice"} with input as {"caller": partner}
		with data.capgate.capabilities as capabilities
		with data.capgate.settings as settings
		with data.capgate.deny.sec.deny as {{"capability": "audit-trail", "reason": "x"}}
}

# --- truth table: explicit cases -------------------------------------------------
# Each case is one capability "x" and one caller; want is [visible, entitled].

base := {"state": "ga", "visibility": "extended", "requires_scopes": ["a", "b"], "tenants": ["acme"]}

member := {"authenticated": true, "subject": "s", "tenant": "acme", "scopes": ["a", "b"]}

cases := [
	{"note": "ga extended exact scopes listed tenant", "cap": {}, "caller": {}, "settings": {}, "want": [true, true]},
	{"note": "ga extended extra scopes", "cap": {}, "caller": {"scopes": ["a", "b", "c"]}, "settings": {}, "want": [true, true]},
	{"note": "ga extended missing one scope", "cap": {}, "caller": {"scopes": ["a"]}, "settings": {}, "want": [false, false]},
	{"note": "ga extended no scopes", "cap": {}, "caller": {"scopes": []}, "settings": {}, "want": [false, false]},
	{"note": "ga extended tenant not listed", "cap": {}, "caller": {"tenant": "zeta"}, "settings": {}, "want": [false, false]},
	{"note": "ga extended caller without tenant", "cap": {}, "caller": {"tenant": ""}, "settings": {}, "want": [false, false]},
	{"note": "ga extended any tenant without tenant", "cap": {"tenants": "*"}, "caller": {"tenant": ""}, "settings": {}, "want": [true, true]},
	{"note": "ga extended anonymous", "cap": {}, "caller": {"authenticated": false}, "settings": {}, "want": [false, false]},
	{"note": "ga extended anonymous public on", "cap": {}, "caller": {"authenticated": false}, "settings": {"anonymous_public": true}, "want": [false, false]},
	{"note": "deprecated extended member", "cap": {"state": "deprecated"}, "caller": {}, "settings": {}, "want": [true, true]},
	{"note": "removed extended member", "cap": {"state": "removed"}, "caller": {}, "settings": {}, "want": [false, false]},
	{"note": "removed public anonymous public on", "cap": {"state": "removed", "visibility": "public", "requires_scopes": [], "tenants": "*"}, "caller": {"authenticated": false, "tenant": ""}, "settings": {"anonymous_public": true}, "want": [false, false]},
	{"note": "preview extended not opted in", "cap": {"state": "preview"}, "caller": {}, "settings": {}, "want": [false, false]},
	{"note": "preview extended preview scope", "cap": {"state": "preview"}, "caller": {"scopes": ["a", "b", "early"]}, "settings": {"preview_scope": "early"}, "want": [true, true]},
	{"note": "preview extended preview tenant", "cap": {"state": "preview"}, "caller": {}, "settings": {"preview_tenants": ["acme"]}, "want": [true, true]},
	{"note": "preview extended opted in missing scope", "cap": {"state": "preview"}, "caller": {"scopes": ["a"]}, "settings": {"preview_tenants": ["acme"]}, "want": [false, false]},
	{"note": "preview public anonymous in a preview tenant", "cap": {"state": "preview", "visibility": "public", "requires_scopes": [], "tenants": "*"}, "caller": {"authenticated": false}, "settings": {"anonymous_public": true, "preview_tenants": ["acme"]}, "want": [false, false]},
	{"note": "preview public opted in without scopes", "cap": {"state": "preview", "visibility": "public"}, "caller": {"scopes": []}, "settings": {"preview_tenants": ["acme"]}, "want": [true, false]},
	{"note": "ga public anonymous", "cap": {"visibility": "public", "requires_scopes": [], "tenants": "*"}, "caller": {"authenticated": false, "tenant": ""}, "settings": {}, "want": [true, false]},
	{"note": "ga public no scopes anonymous public on", "cap": {"visibility": "public", "requires_scopes": [], "tenants": "*"}, "caller": {"authenticated": false, "tenant": ""}, "settings": {"anonymous_public": true}, "want": [true, true]},
	{"note": "ga public with scopes anonymous public on", "cap": {"visibility": "public", "tenants": "*"}, "caller": {"authenticated": false, "tenant": "", "scopes": ["a", "b"]}, "settings": {"anonymous_public": true}, "want": [true, false]},
	{"note": "ga public listed tenants anonymous public on", "cap": {"visibility": "public", "requires_scopes": []}, "caller": {"authenticated": false, "tenant": ""}, "settings": {"anonymous_public": true}, "want": [true, false]},
	{"note": "ga public missing scope authenticated", "cap": {"visibility": "public"}, "caller": {"scopes": ["a"]}, "settings": {}, "want": [true, false]},
	{"note": "ga public tenant not listed", "cap": {"visibility": "public"}, "caller": {"tenant": "zeta"}, "settings": {}, "want": [true, false]},
	{"note": "deprecated public anonymous", "cap": {"state": "deprecated", "visibility": "public", "requires_scopes": [], "tenants": "*"}, "caller": {"authenticated": false}, "settings": {"anonymous_public": true}, "want": [true, true]},
	{"note": "ga internal member", "cap": {"visibility": "internal"}, "caller": {}, "settings": {}, "want": [false, true]},
	{"note": "ga internal missing scope", "cap": {"visibility": "internal"}, "caller": {"scopes": ["b"]}, "settings": {}, "want": [false, false]},
	{"note": "ga internal anonymous public on", "cap": {"visibility": "internal", "requires_scopes": [], "tenants": "*"}, "caller": {"authenticated": false}, "settings": {"anonymous_public": true}, "want": [false, false]},
	{"note": "preview internal opted in", "cap": {"state": "preview", "visibility": "internal"}, "caller": {}, "settings": {"preview_tenants": ["acme"]}, "want": [false, true]},
	{"note": "removed internal member", "cap": {"state": "removed", "visibility": "internal"}, "caller": {}, "settings": {}, "want": [false, false]},
	{"note": "unknown state member", "cap": {"state": "beta"}, "caller": {}, "settings": {}, "want": [false, false]},
	{"note": "unknown visibility member", "cap": {"visibility": "partner"}, "caller": {}, "settings": {}, "want": [false, false]},
]

test_truth_table_cases[note] if {
	some c in cases
	note := c.note
	cap := object.union(base, c.cap)
	caller := object.union(member, c.caller)
	visible := authz.visible with input as {"caller": caller}
		with data.capgate.capabilities as {"x": cap}
		with data.capgate.settings as c.settings
	entitled := authz.entitled with input as {"caller": caller}
		with data.capgate.capabilities as {"x": cap}
		with data.capgate.settings as c.settings
	got := ["x" in visible, "x" in entitled]
	no_diff("[visible, entitled] got vs want", {[got, c.want] | got != c.want})
}

# --- truth table: every combination against the design ---------------------------
# 48 capabilities (state x visibility x required scopes x tenants) are decided
# for 108 callers (authenticated x scopes held x tenant x preview opt-in x
# anonymous_public) and compared with the rules of docs/policy.md, restated
# below without reasons.

sweep_caps[id] := cap if {
	some state in ["preview", "ga", "deprecated", "removed"]
	some visibility in ["public", "extended", "internal"]
	some scope_name, scopes in {"no-scopes": [], "scopes-ab": ["a", "b"]}
	some tenant_name, tenants in {"any-tenant": "*", "tenants-acme-beta": ["acme", "beta"]}
	id := concat("/", [state, visibility, scope_name, tenant_name])
	cap := {"id": id, "state": state, "visibility": visibility, "requires_scopes": scopes, "tenants": tenants, "handler": "h", "tags": []}
}

# Scopes held, against capabilities requiring none or ["a", "b"]: missing one,
# exactly those, and more.
held_scopes := {"holds-a": ["a"], "holds-ab": ["a", "b"], "holds-abx": ["a", "b", "x"]}

opt_in_scopes := {"none": [], "scope": ["preview.opt"], "tenant": []}

opt_in_tenants := {"none": ["other"], "scope": ["other"], "tenant": ["acme", "zeta", ""]}

sweep_contexts contains ctx if {
	some authenticated in [true, false]
	some held_name, held in held_scopes
	some tenant in ["acme", "zeta", ""]
	some opt_in, extra in opt_in_scopes
	some anonymous_public in [true, false]
	ctx := {
		"note": sprintf("authenticated=%v %s tenant=%q opt-in=%s anonymous_public=%v", [authenticated, held_name, tenant, opt_in, anonymous_public]),
		"caller": {
			"authenticated": authenticated, "subject": "s", "tenant": tenant,
			"scopes": array.concat(held, extra),
		},
		"settings": {"preview_scope": "preview.opt", "preview_tenants": opt_in_tenants[opt_in], "anonymous_public": anonymous_public},
	}
}

spec_opted_in(caller, s) if {
	caller.authenticated
	s.preview_scope in caller.scopes
}

spec_opted_in(caller, s) if {
	caller.authenticated
	caller.tenant != ""
	caller.tenant in s.preview_tenants
}

spec_routable(cap, _, _) if cap.state in {"ga", "deprecated"}

spec_routable(cap, caller, s) if {
	cap.state == "preview"
	spec_opted_in(caller, s)
}

spec_scopes_held(cap, caller) if {
	every scope in cap.requires_scopes {
		scope in caller.scopes
	}
}

spec_tenant_ok(cap, _) if cap.tenants == "*"

spec_tenant_ok(cap, caller) if {
	caller.tenant != ""
	caller.tenant in cap.tenants
}

spec_visible(cap, caller, s) if {
	spec_routable(cap, caller, s)
	cap.visibility == "public"
}

spec_visible(cap, caller, s) if {
	spec_routable(cap, caller, s)
	cap.visibility == "extended"
	caller.authenticated
	spec_scopes_held(cap, caller)
	spec_tenant_ok(cap, caller)
}

spec_entitled(cap, caller, s) if {
	spec_routable(cap, caller, s)
	spec_scopes_held(cap, caller)
	spec_tenant_ok(cap, caller)
	spec_may_call(cap, caller, s)
}

spec_may_call(_, caller, _) if caller.authenticated

spec_may_call(cap, _, s) if {
	s.anonymous_public
	cap.visibility == "public"
	count(cap.requires_scopes) == 0
}

# design_failures lists, for the capabilities of one state, every caller
# context where the policy and the spec disagree, with the differences. One
# test per state keeps each test small; the failures are printed.
design_failures(state) := {[ctx.note, diff] |
	caps := {id: cap | some id, cap in sweep_caps; cap.state == state}
	some ctx in sweep_contexts
	want_visible := {id | some id, cap in caps; spec_visible(cap, ctx.caller, ctx.settings)}
	want_entitled := {id | some id, cap in caps; spec_entitled(cap, ctx.caller, ctx.settings)}
	got_visible := authz.visible with input as {"caller": ctx.caller}
		with data.capgate.capabilities as caps
		with data.capgate.settings as ctx.settings
	got_entitled := authz.entitled with input as {"caller": ctx.caller}
		with data.capgate.capabilities as caps
		with data.capgate.settings as ctx.settings
	[want_visible, want_entitled] != [got_visible, got_entitled]
	diff := {
		"visible_missing": want_visible - got_visible, "visible_extra": got_visible - want_visible,
		"entitled_missing": want_entitled - got_entitled, "entitled_extra": got_entitled - want_entitled,
	}
}

test_truth_table_design_preview if no_diff("preview: [caller, diff]", design_failures("preview"))

test_truth_table_design_ga if no_diff("ga: [caller, diff]", design_failures("ga"))

test_truth_table_design_deprecated if no_diff("deprecated: [caller, diff]", design_failures("deprecated"))

test_truth_table_design_removed if no_diff("removed: [caller, diff]", design_failures("removed"))

test_truth_table_design_size if {
	count(sweep_caps) == 48
	count(sweep_contexts) == 108
}

# --- profiles ------------------------------------------------------------------
# The compiler groups capabilities with equal facts under data.capgate.profiles;
# the sets are then computed per profile. These tests run the same sweep in
# profile mode, with a twin per capability sharing its profile, and must find
# exactly what the per-capability rules and the spec find.

profile_facts(cap) := {
	"state": cap.state,
	"visibility": cap.visibility,
	"requires_scopes": cap.requires_scopes,
	"tenants": cap.tenants,
}

profile_key_of(cap) := json.marshal(profile_facts(cap))

profiled(caps) := {pid: object.union(cap, {"id": pid, "profile": profile_key_of(cap)}) |
	some id, cap in caps
	some pid in [id, concat("", [id, "-twin"])]
}

profiles_of(caps) := {profile_key_of(cap): profile_facts(cap) | some cap in caps}

twins(ids) := ids | {concat("", [id, "-twin"]) | some id in ids}

profiled_failures(state) := {[ctx.note, diff] |
	caps := {id: cap | some id, cap in sweep_caps; cap.state == state}
	pcaps := profiled(caps)
	pprofiles := profiles_of(caps)
	some ctx in sweep_contexts
	want_visible := twins({id | some id, cap in caps; spec_visible(cap, ctx.caller, ctx.settings)})
	want_entitled := twins({id | some id, cap in caps; spec_entitled(cap, ctx.caller, ctx.settings)})
	got_visible := authz.visible with input as {"caller": ctx.caller}
		with data.capgate.capabilities as pcaps
		with data.capgate.profiles as pprofiles
		with data.capgate.settings as ctx.settings
	got_entitled := authz.entitled with input as {"caller": ctx.caller}
		with data.capgate.capabilities as pcaps
		with data.capgate.profiles as pprofiles
		with data.capgate.settings as ctx.settings
	[want_visible, want_entitled] != [got_visible, got_entitled]
	diff := {
		"visible_missing": want_visible - got_visible, "visible_extra": got_visible - want_visible,
		"entitled_missing": want_entitled - got_entitled, "entitled_extra": got_entitled - want_entitled,
	}
}

test_profiles_design_preview if no_diff("preview (profiles): [caller, diff]", profiled_failures("preview"))

test_profiles_design_ga if no_diff("ga (profiles): [caller, diff]", profiled_failures("ga"))

test_profiles_design_deprecated if no_diff("deprecated (profiles): [caller, diff]", profiled_failures("deprecated"))

test_profiles_design_removed if no_diff("removed (profiles): [caller, diff]", profiled_failures("removed"))

profile_fixture := {"public-ga": {
	"id": "public-ga", "state": "ga", "visibility": "public",
	"requires_scopes": [], "tenants": "*",
}}

test_profiles_dangling_key_decides_nothing if {
	caps := {"public-ga": object.union(profile_fixture["public-ga"], {"profile": "no-such-profile"})}
	count(authz.visible) == 0 with input as {"caller": {"authenticated": true, "subject": "p"}}
		with data.capgate.capabilities as caps
		with data.capgate.profiles as {}
	count(authz.entitled) == 0 with input as {"caller": {"authenticated": true, "subject": "p"}}
		with data.capgate.capabilities as caps
		with data.capgate.profiles as {}
}

test_profiles_deny_is_per_capability if {
	caps := profiled(profile_fixture)
	caller := {"authenticated": true, "subject": "mallory"}
	deny := {"sec": {"deny": {{"capability": "public-ga", "reason": "maintenance"}}}}
	authz.visible == {"public-ga-twin"} with input as {"caller": caller}
		with data.capgate.capabilities as caps
		with data.capgate.profiles as profiles_of(profile_fixture)
		with data.capgate.deny as deny
	authz.entitled == {"public-ga-twin"} with input as {"caller": caller}
		with data.capgate.capabilities as caps
		with data.capgate.profiles as profiles_of(profile_fixture)
		with data.capgate.deny as deny
}

test_profiles_deny_all if {
	caps := profiled(profile_fixture)
	deny := {"sec": {"deny": {{"capability": "*", "reason": "lockdown"}}}}
	count(authz.visible) == 0 with input as {"caller": {"authenticated": true, "subject": "p"}}
		with data.capgate.capabilities as caps
		with data.capgate.profiles as profiles_of(profile_fixture)
		with data.capgate.deny as deny
	count(authz.entitled) == 0 with input as {"caller": {"authenticated": true, "subject": "p"}}
		with data.capgate.capabilities as caps
		with data.capgate.profiles as profiles_of(profile_fixture)
		with data.capgate.deny as deny
}

# --- any-of entitlements (requires_any_of) ----------------------------------------
# Admins or shift leads may decommission: besides requires_scopes, the caller
# needs every scope of one alternative.

decommission := {
	"state": "ga", "visibility": "extended", "requires_scopes": [], "tenants": "*",
	"requires_any_of": [["fleet.admin"], ["fleet.dispatch", "fleet.shift_lead"]],
}

fleet_caller(scopes) := {"authenticated": true, "subject": "s", "tenant": "acme", "scopes": scopes}

test_any_of_admin_entitled if {
	d := decision_of(decommission, fleet_caller(["fleet.admin"]))
	d.visible
	d.allow
	grant_detail("scope.any_of_held", "fleet.admin") in d.reasons.entitled
	grant_detail("scope.any_of_held", "fleet.admin") in d.reasons.visible
	not grant("scope.none_required") in d.reasons.entitled
}

test_any_of_shift_lead_entitled if {
	d := decision_of(decommission, fleet_caller(["fleet.shift_lead", "fleet.dispatch"]))
	d.allow
	[r | some r in d.reasons.entitled; startswith(r.rule, "scope.")] == [grant_detail("scope.any_of_held", "fleet.dispatch fleet.shift_lead")]
}

test_any_of_both_alternatives_named if {
	d := decision_of(decommission, fleet_caller(["fleet.admin", "fleet.dispatch", "fleet.shift_lead"]))
	d.allow
	[r | some r in d.reasons.entitled; startswith(r.rule, "scope.")] == [
		grant_detail("scope.any_of_held", "fleet.admin"),
		grant_detail("scope.any_of_held", "fleet.dispatch fleet.shift_lead"),
	]
}

test_any_of_partial_alternative_refused if {
	d := decision_of(decommission, fleet_caller(["fleet.dispatch"]))
	not d.visible
	not d.allow
	refusals(d.reasons.entitled) == [
		refuse_detail("scope.any_of_missing", "fleet.admin of [fleet.admin]"),
		refuse_detail("scope.any_of_missing", "fleet.shift_lead of [fleet.dispatch fleet.shift_lead]"),
	]
}

test_any_of_with_required_scopes if {
	cap := object.union(decommission, {"requires_scopes": ["fleet.read"]})
	d := decision_of(cap, fleet_caller(["fleet.admin"]))
	not d.allow
	refusals(d.reasons.entitled) == [refuse_detail("scope.missing", "fleet.read")]
	d2 := decision_of(cap, fleet_caller(["fleet.admin", "fleet.read"]))
	d2.allow
	grant_detail("scope.held", "fleet.read") in d2.reasons.entitled
	grant_detail("scope.any_of_held", "fleet.admin") in d2.reasons.entitled
}

test_any_of_not_anonymous_public if {
	cap := object.union(decommission, {"visibility": "public"})
	d := authz.decision with input as {"caller": anonymous, "capability": "x"}
		with data.capgate.capabilities as {"x": cap}
		with data.capgate.settings as {"anonymous_public": true}
	d.visible
	not d.allow
	refuse("auth.required") in d.reasons.entitled
}

test_any_of_absent_null_or_empty_is_none if {
	every alts in [null, []] {
		d := decision_of(object.union(valid_cap, {"requires_any_of": alts}), partner)
		d.allow
		grant("scope.none_required") in d.reasons.entitled
	}
}

test_any_of_invalid if {
	every alts in ["fleet.admin", ["fleet.admin"], [["fleet.admin", 1]], {"a": ["b"]}] {
		d := decision_of(object.union(valid_cap, {"requires_any_of": alts}), fleet_caller(["fleet.admin"]))
		not d.allow
		refusals(d.reasons.entitled) == [refuse("scope.any_of_invalid")]
	}
}

# A sweep against the rule restated: the any-of shapes x requires_scopes x
# visibility, for callers holding each combination of the scopes, decided
# per capability and per profile.

any_of_caps[id] := cap if {
	some alts_name, alts in {"no-alts": null, "alts": [["a"], ["b", "c"]], "alts-overlap": [["a", "b"], ["b", "c"]]}
	some scopes_name, scopes in {"no-scopes": [], "scopes-r": ["r"]}
	some visibility in ["public", "extended"]
	id := concat("/", [alts_name, scopes_name, visibility])
	cap := {"id": id, "state": "ga", "visibility": visibility, "requires_scopes": scopes, "requires_any_of": alts, "tenants": "*"}
}

any_of_contexts contains ctx if {
	some held in [[], ["a"], ["b"], ["c"], ["b", "c"], ["a", "b"], ["r"], ["a", "r"], ["b", "c", "r"], ["a", "b", "c", "r"]]
	some authenticated in [true, false]
	ctx := {
		"note": sprintf("authenticated=%v scopes=%v", [authenticated, held]),
		"caller": {"authenticated": authenticated, "subject": "s", "tenant": "", "scopes": held},
		"settings": {"anonymous_public": true},
	}
}

spec_any_of_held(cap, _) if cap.requires_any_of == null

spec_any_of_held(cap, caller) if {
	some alt in cap.requires_any_of
	every s in alt {
		s in caller.scopes
	}
}

spec_any_of_entitled(cap, caller) if {
	spec_scopes_held(cap, caller)
	spec_any_of_held(cap, caller)
	caller.authenticated
}

spec_any_of_entitled(cap, caller) if {
	not caller.authenticated
	cap.visibility == "public"
	count(cap.requires_scopes) == 0
	cap.requires_any_of == null
}

spec_any_of_visible(cap, _) if cap.visibility == "public"

spec_any_of_visible(cap, caller) if {
	caller.authenticated
	spec_scopes_held(cap, caller)
	spec_any_of_held(cap, caller)
}

any_of_profile_facts(cap) := object.union(profile_facts(cap), {"requires_any_of": cap.requires_any_of})

any_of_profiled := {pid: object.union(cap, {"id": pid, "profile": json.marshal(any_of_profile_facts(cap))}) |
	some id, cap in any_of_caps
	some pid in [id, concat("", [id, "-twin"])]
}

any_of_profiles := {json.marshal(any_of_profile_facts(cap)): any_of_profile_facts(cap) | some cap in any_of_caps}

any_of_failures(profiles) := {[ctx.note, profiles, diff] |
	caps := {false: any_of_caps, true: any_of_profiled}[profiles]
	some ctx in any_of_contexts
	want_visible := {id | some id, cap in caps; spec_any_of_visible(cap, ctx.caller)}
	want_entitled := {id | some id, cap in caps; spec_any_of_entitled(cap, ctx.caller)}
	got_visible := authz.visible with input as {"caller": ctx.caller}
		with data.capgate.capabilities as caps
		with data.capgate.profiles as {false: {}, true: any_of_profiles}[profiles]
		with data.capgate.settings as ctx.settings
	got_entitled := authz.entitled with input as {"caller": ctx.caller}
		with data.capgate.capabilities as caps
		with data.capgate.profiles as {false: {}, true: any_of_profiles}[profiles]
		with data.capgate.settings as ctx.settings
	[want_visible, want_entitled] != [got_visible, got_entitled]
	diff := {
		"visible_missing": want_visible - got_visible, "visible_extra": got_visible - want_visible,
		"entitled_missing": want_entitled - got_entitled, "entitled_extra": got_entitled - want_entitled,
	}
}

test_any_of_design if no_diff("any-of: [caller, profiles, diff]", any_of_failures(false))

test_any_of_design_profiles if no_diff("any-of (profiles): [caller, profiles, diff]", any_of_failures(true))

test_any_of_design_size if {
	count(any_of_caps) == 12
	count(any_of_contexts) == 20
	count({id | some id, _ in any_of_caps; id in authz.entitled with input as {"caller": fleet_caller(["b", "c"])} with data.capgate.capabilities as any_of_caps}) > 0
}

# --- quotas --------------------------------------------------------------------

quota_caps := {
	"cheap": {
		"id": "cheap", "state": "ga", "visibility": "public",
		"requires_scopes": [], "tenants": "*", "handler": "h", "tags": [],
		"limits": {"cost_class": "low"},
	},
	"costly": {
		"id": "costly", "state": "ga", "visibility": "extended",
		"requires_scopes": ["recon.run"], "tenants": "*", "handler": "h", "tags": [],
		"limits": {"cost_class": "high"},
		"quota": {"rate": {"calls": 10, "window_seconds": 60, "on_store_error": "open"}},
	},
	"priced": {
		"id": "priced", "state": "ga", "visibility": "extended",
		"requires_scopes": ["recon.run"], "tenants": "*", "handler": "h", "tags": [],
		"limits": {"cost_class": "high"}, "quota": {"units": 7},
	},
	"free": {
		"id": "free", "state": "ga", "visibility": "public",
		"requires_scopes": [], "tenants": "*", "handler": "h", "tags": [],
	},
}

plan(id, grant_, unit, limit, key, extra) := object.union(
	{
		"id": id, "grant": object.union({"scopes": [], "tenants": [], "issuers": [], "authenticated": false}, grant_),
		"unit": unit, "limit": limit, "window_seconds": 3600, "capabilities": [], "cost_classes": [],
		"key": key, "on_store_error": "closed",
	},
	extra,
)

quota_settings := object.union(settings, {"quotas": {
	"cost_classes": {"low": 1, "high": 20},
	"plans": [
		plan("free-high", {"scopes": ["partner.free"]}, "calls", 100, ["caller"], {"cost_classes": ["high"], "on_store_error": "open"}),
		plan("acme-daily", {"tenants": ["acme"]}, "units", 10000, ["tenant"], {}),
		plan("issuer-a", {"issuers": ["https://a.example"], "authenticated": true}, "calls", 5, ["caller", "capability"], {"capabilities": ["cheap"]}),
	],
}})

quotas_for(id, caller) := d.quotas if {
	d := authz.decision with input as {"caller": caller, "capability": id}
		with data.capgate.capabilities as quota_caps
		with data.capgate.settings as quota_settings
}

quota_ids(qs) := {q.id | some q in qs}

test_quotas_plan_by_scope_on_cost_class if {
	qs := quotas_for("costly", {"authenticated": true, "subject": "s", "tenant": "", "scopes": ["recon.run", "partner.free"]})
	quota_ids(qs) == {"plan.free-high", "rate.costly"}
	some q in qs
	q.id == "plan.free-high"
	q == {
		"id": "plan.free-high", "plan": "free-high", "unit": "calls", "limit": 100, "window_seconds": 3600,
		"cost": 1, "key": [{"name": "caller", "value": ""}], "on_store_error": "open",
	}
}

test_quotas_plan_by_tenant_counts_units if {
	qs := quotas_for("costly", {"authenticated": true, "subject": "s", "tenant": "acme", "scopes": ["recon.run"]})
	some q in qs
	q.id == "plan.acme-daily"
	q.cost == 20
	q.key == [{"name": "tenant", "value": "acme"}]
	q.on_store_error == "closed"
}

test_quotas_manifest_units_override_cost_class if {
	qs := quotas_for("priced", {"authenticated": true, "subject": "s", "tenant": "acme", "scopes": ["recon.run"]})
	[q.cost | some q in qs; q.id == "plan.acme-daily"] == [7]
}

test_quotas_unit_budget_skips_costless if {
	qs := quotas_for("free", {"authenticated": true, "subject": "s", "tenant": "acme", "scopes": []})
	qs == []
}

test_quotas_plan_by_issuer_and_capability if {
	qs := quotas_for("cheap", {"authenticated": true, "issuer": "https://a.example", "subject": "s", "tenant": "", "scopes": []})
	quota_ids(qs) == {"plan.issuer-a"}
	qs[0].key == [{"name": "caller", "value": ""}, {"name": "capability", "value": "cheap"}]
	other := quotas_for("cheap", {"authenticated": true, "issuer": "https://b.example", "subject": "s", "tenant": "", "scopes": []})
	other == []
}

test_quotas_none_when_not_entitled if {
	qs := quotas_for("costly", {"authenticated": true, "subject": "s", "tenant": "acme", "scopes": ["partner.free"]})
	qs == []
}

test_quotas_unknown_capability_none if {
	quotas_for("nope", partner) == []
}

test_quotas_deny_module_tightens if {
	d := authz.decision with input as {"caller": {"authenticated": true, "subject": "x", "tenant": "", "scopes": []}, "capability": "cheap"}
		with data.capgate.capabilities as quota_caps
		with data.capgate.settings as quota_settings
		with data.capgate.deny.ops.quota as [{"capability": "*", "id": "burst", "unit": "calls", "limit": 2, "window_seconds": 1, "key": ["caller"]}]
	d.entitled
	d.quotas == [{
		"id": "deny.ops.burst", "unit": "calls", "limit": 2, "window_seconds": 1, "cost": 1,
		"key": [{"name": "caller", "value": ""}], "on_store_error": "open",
	}]
}

test_quotas_deny_module_malformed_is_reported_not_dropped if {
	d := authz.decision with input as {"caller": {"authenticated": true, "subject": "x", "tenant": "", "scopes": []}, "capability": "cheap"}
		with data.capgate.capabilities as quota_caps
		with data.capgate.settings as quota_settings
		with data.capgate.deny.ops.quota as [{"capability": "cheap", "id": "burst", "unit": "tokens", "limit": 2, "key": ["who"]}]
	count(d.quotas) == 1
	d.quotas[0].cost == null
	d.quotas[0].window_seconds == null
}
