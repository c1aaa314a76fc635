package dispatch

import (
	"context"

	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/metering"
	"github.com/capgate/capgate/sidecar/protocol"
)

// charge counts a routed message against the quotas the policy decided for it, before its
// handler is called: a message whose capability admission knew was charged there
// (admission.ChargedHere) and is not charged again. The decision is the re-check's, from the
// engine's cache. What is left goes to the decision log and the answer's RateLimit headers.
func (d *Dispatcher) charge(ctx context.Context, call *exchange.Call, capID string) *protocol.Error {
	if d.quotas == nil {
		return nil
	}
	if _, charged := admission.ChargedHere(call.Rev, call.Request, call.Task); charged {
		return nil
	}
	dec, err := call.Rev.Engine.Decide(ctx, call.Principal.Caller(), capID)
	if err != nil {
		return protocol.Wrap(protocol.Internal, err, "the policy could not be evaluated")
	}
	states, perr := d.quotas.Charge(ctx, metering.Call{Issuer: call.Principal.Issuer, Subject: call.Principal.Subject,
		Capability: capID, MessageID: admission.MessageID(call.Request), Quotas: dec.Quotas, DecisionID: call.DecisionID})
	if perr != nil {
		return perr
	}
	if call.Log != nil && states != nil {
		call.Log.Quotas = states
	}
	return nil
}
