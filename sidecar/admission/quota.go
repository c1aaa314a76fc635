package admission

import (
	"context"

	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/quota"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/metering"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tasks"
)

// Option configures an Admitter.
type Option func(*Admitter)

// WithQuotas counts admitted calls against their quotas (nil: quotas are not
// enforced by this admitter).
func WithQuotas(e *metering.Enforcer) Option { return func(a *Admitter) { a.quotas = e } }

// ChargedHere says which calls admission charges against their quotas: those whose capability
// is known before routing — a message continuing a task bound to one, a method an extension
// adds, and (quotas.charge) a cancellation or a read of the caller's own task. A new message is
// charged by the gateway once routed (dispatch); the one rule both use.
func ChargedHere(rev *revision.State, r *protocol.Request, task *tasks.Binding) (capability string, ok bool) {
	if r.Operation == protocol.ExtensionMethod && r.Extension != nil {
		return r.Extension.Capability, true
	}
	capability, ok = boundCapability(r, task)
	if !ok {
		return "", false // no capability known before routing
	}
	charge := rev.Config().Quotas.Charge
	switch {
	case r.Operation.Message():
		return capability, true
	case r.Operation == protocol.CancelTask:
		return capability, charge.Cancel
	case r.Operation.TargetsTask():
		return capability, charge.Reads
	}
	return "", false
}

// boundCapability is the capability of the task r targets, known before routing from the
// task's binding (task: the owned binding of r's first task): none for a call naming no task,
// a task another call is still creating, or one bound to no capability.
func boundCapability(r *protocol.Request, task *tasks.Binding) (string, bool) {
	if task == nil || task.Pending || task.TaskID != r.TaskID || task.Capability == "" {
		return "", false
	}
	return task.Capability, true
}

// MessageID is the messageId a call is charged once by ("" for a call that is not a message).
func MessageID(r *protocol.Request) string {
	if r.Operation.Message() && r.Message != nil {
		return r.Message.MessageID
	}
	return ""
}

// charge counts a call whose capability admission knows against the quotas the policy decided
// (decided: an extension method's, from the decision that admitted it; else decided here). It
// returns the budgets left, for the answer's RateLimit headers and the decision log, and the
// quotas charged (ext_authz hands them to Envoy's rate limits). With quotas.counter "envoy"
// nothing is counted here: the quotas only go to Envoy's rate-limit service.
func (a *Admitter) charge(ctx context.Context, rev *revision.State, r *protocol.Request, p identity.Principal,
	task *tasks.Binding, decided []quota.Applied, decisionID string,
) ([]quota.State, []quota.Applied, *protocol.Error) {
	if a.quotas == nil {
		return nil, nil, nil
	}
	capID, ok := ChargedHere(rev, r, task)
	if !ok {
		return nil, nil, nil
	}
	qs := decided
	if r.Operation != protocol.ExtensionMethod {
		dec, err := rev.Engine.Decide(ctx, p.Caller(), capID)
		if err != nil {
			a.log.Error("policy evaluation failed", zap.Error(err))
			return nil, nil, protocol.Wrap(protocol.Internal, err, "the policy could not be evaluated")
		}
		if !dec.Entitled {
			return nil, nil, nil // the gateway's re-check refuses it; nothing to count
		}
		qs = dec.Quotas
	}
	if rev.Config().Quotas.Counter == quota.CounterEnvoy {
		return nil, qs, nil // Envoy's rate-limit service counts them, from ext_authz's metadata
	}
	left, perr := a.quotas.Charge(ctx, metering.Call{Issuer: p.Issuer, Subject: p.Subject, Capability: capID,
		MessageID: MessageID(r), Quotas: qs, DecisionID: decisionID})
	return left, qs, perr
}
