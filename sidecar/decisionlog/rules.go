package decisionlog

// Rules outside Rego: the dotted names a denial's event gives in result.rule when a check
// other than the policy refused (docs/observability.md lists them). Each is set where the
// refusal is made, with protocol.Error.Decided.
const (
	// RuleCredential: the operation needs a credential and none was sent.
	RuleCredential = "admission.credential"
	// RuleTenant: the request names a tenant that is not the caller's.
	RuleTenant = "admission.tenant"
	// RuleTaskOwner: the task named is not the caller's (or does not exist).
	RuleTaskOwner = "admission.task_owner"
	// RuleContextOwner: the context named is not the caller's (or does not exist), or is not
	// the context of the task the message continues.
	RuleContextOwner = "admission.context_owner"
	// RuleExtensionMethod: an extension's method the caller did not activate or may not use.
	RuleExtensionMethod = "admission.extension_method"
	// RuleRemoved: the capability named (by a hint, a bound task or a choice) is removed.
	RuleRemoved = "lifecycle.removed"
	// RuleNoCandidate: no capability is available to the caller (or none of those offered).
	RuleNoCandidate = "routing.no_candidate"
	// RuleContentType: no capability available to the caller takes the message's media types.
	RuleContentType = "routing.content_type"
)

// NonRegoRules lists the rules above, for docs and tests.
var NonRegoRules = []string{RuleCredential, RuleTenant, RuleTaskOwner, RuleContextOwner, RuleExtensionMethod,
	RuleRemoved, RuleNoCandidate, RuleContentType}
