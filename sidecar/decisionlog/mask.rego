# Decision-log mask policy of capgate (OPA's default mask_decision,
# data.system.log.mask). capgate's event input is an allow-list of decision
# facts and holds no token, header or message text; these rules erase such
# fields should an input ever carry one, so they never reach a sink.
package system.log

mask contains "/input/authorization"

mask contains "/input/headers"

mask contains "/input/token"

mask contains "/input/message"

mask contains "/input/text"

mask contains "/input/parts"
