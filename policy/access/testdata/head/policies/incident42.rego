# METADATA
# schemas:
#   - input: schema.input
package capgate.deny.sec

# Incident 42: reconciliation is off until the fix ships, except for break-glass.
deny contains {"capability": "reconcile-invoice", "reason": "incident 42"} if {
	not input.caller.subject in exempt
}

exempt := {"break-glass"}
