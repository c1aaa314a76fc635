package dispatch

import (
	"context"

	"github.com/capgate/capgate/policy/quota"
	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/metering"
	"github.com/capgate/capgate/sidecar/protocol"
)

// charge counts a routed message against the quotas the policy decided for it (applied: the
// re-check's decision, recheckDecision), before its handler is called: a message whose
// capability admission knew was charged there (admission.ChargedHere) and is not charged
// again. What is left goes to the decision log and the answer's RateLimit headers.
func (d *Dispatcher) charge(ctx context.Context, call *exchange.Call, capID string, applied []quota.Applied) *protocol.Error {
	if d.quotas == nil {
		return nil
	}
	if _, charged := admission.ChargedHere(call.Rev, call.Request, call.Task); charged {
		return nil
	}
	states, perr := d.quotas.Charge(ctx, metering.Call{Issuer: call.Principal.Issuer, Subject: call.Principal.Subject,
		Capability: capID, MessageID: admission.MessageID(call.Request), Quotas: applied, DecisionID: call.DecisionID})
	if perr != nil {
		return perr
	}
	if call.Log != nil && states != nil {
		call.Log.Quotas = states
	}
	return nil
}
