// Package admission decides whether one parsed A2A request may proceed: who the caller is (a
// bearer token or an mTLS peer), which extensions it activates, what the operation requires of
// it (a method an extension adds: that extension and the capability behind it; a message: some
// capability it is entitled to), and whether the caller owns every task and context, matches
// the tenant and may use every push webhook the request names, within the limits of a
// capability already known. The gateway and the ext_authz server both call Admit and keep no
// admission rules of their own, so the two doors cannot disagree; the refusals both doors and
// the dispatcher share (NotEntitled, StoreError) are here too.
package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/quota"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/enforce"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/metering"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tasks"
)

// Input is one request at a door.
type Input struct {
	Request *protocol.Request
	// Header holds the request's headers (credentials, extensions).
	Header protocol.Header
	// Peer is the mTLS peer identity the transport established (the client certificate's URI
	// SAN, e.g. a SPIFFE id), "" when there is none or it cannot be trusted.
	Peer string
	// DecisionID is the request's decision id, for logs (optional).
	DecisionID string
}

// Verdict is admission's answer. Allowed is set only by a decision that admits; every other
// outcome carries Err: a door answers a refusal with Err as it is, and never needs to invent one.
type Verdict struct {
	Allowed bool
	// Err is the refusal, in the protocol's error model: nil exactly when Allowed.
	Err *protocol.Error
	// Principal is the caller (the zero Principal when anonymous or not yet known).
	Principal identity.Principal
	// Extensions are the activated extension URIs, in declared order.
	Extensions []string
	// Task is the binding of the task the request targets (Request.TaskID), when it names one.
	Task *tasks.Binding
	// Quotas are the budgets left after this call was charged, when admission charged it
	// (ChargedHere): for the RateLimit headers and the decision log.
	Quotas []quota.State
	// Applied are the quotas admission charged this call against (with Quotas).
	Applied []quota.Applied
}

// Admitter decides admission. It is safe for concurrent use and holds no per-request state.
type Admitter struct {
	owners tasks.Owners
	log    *zap.Logger
	quotas *metering.Enforcer
}

// New returns an Admitter. owners answers task and context ownership; nil refuses every request
// that names a task or a context (fail closed). log may be nil.
func New(owners tasks.Owners, log *zap.Logger, opts ...Option) *Admitter {
	if log == nil {
		log = zap.NewNop()
	}
	a := &Admitter{owners: owners, log: log.Named("admission")}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Messages of refusals. They name no resource the caller did not send and hint at no other
// tenant's existence.
const (
	msgTaskNotFound = "task not found"
	// msgTenant names the tenant the request carried (validated and bounded by the parser:
	// at most 128 characters of A-Z a-z 0-9 . _ -), never the caller's or another's, so a
	// client that sends a tenant by mistake (@a2a-js/sdk 1.3.0's gRPC transport writes an
	// omitted tenant as "undefined") sees what it sent.
	msgTenant        = "the request names tenant %q, which is not the caller's"
	msgTenantNoneOK  = "the request names tenant %q, but the caller has no tenant: send none"
	msgNoEntitlement = "no capability of this agent is available to the caller"
	msgPushOff       = "push notifications are not supported by this agent"
)

// Admit decides one request at rev. The order is fixed: the binding (a gRPC call when the agent
// does not serve gRPC is refused before anything else), credentials, extension negotiation,
// push availability, what the operation requires of the caller, the request's tenant, an
// extension method's extension and capability, entitlement (messages), ownership of every named
// task, then of every context named at a target position (a message's new one claimed; a filter
// position such as ListTasks' contextId is not refused: it narrows the caller's own results),
// every push webhook URL, the limits of a capability known before routing, the version of a gRPC
// call (see servedVersion), and last its quotas (ChargedHere): a call refused for anything else is
// never counted.
func (a *Admitter) Admit(ctx context.Context, rev *revision.State, in Input) Verdict {
	r := in.Request
	if err := servedBinding(rev, r); err != nil {
		return refuse(Verdict{}, err)
	}
	if r.Operation.Public() {
		if err := servedVersion(r); err != nil {
			return refuse(Verdict{}, err)
		}
		return Verdict{Allowed: true} // the public card: anyone
	}
	var v Verdict
	p, err := authenticate(ctx, rev, in)
	if err != nil {
		return refuse(v, err)
	}
	v.Principal = p
	if v.Extensions, err = protocol.NegotiateExtensions(protocol.RequestedExtensions(r.Version, in.Header), rev.Extensions); err != nil {
		return refuse(v, err)
	}
	if r.Operation.Push() || len(r.Push) > 0 {
		if !rev.Push.Enabled {
			return refuse(v, protocol.Errorf(protocol.PushNotificationNotSupported, msgPushOff))
		}
	}
	if err := requireCaller(rev, r, p); err != nil {
		return refuse(v, err)
	}
	if err := checkTenant(r, p); err != nil {
		return refuse(v, err)
	}
	// decided holds the limits and quotas of an extension method's capability, as the
	// decision that admitted the caller to it carries them.
	var decided engine.Decision
	if r.Operation == protocol.ExtensionMethod {
		if decided, err = a.extensionMethod(ctx, rev, r, p, v.Extensions); err != nil {
			return refuse(v, err)
		}
	}
	if r.Operation.Message() {
		view, verr := rev.Engine.View(ctx, p.Caller())
		if verr != nil {
			a.log.Error("policy evaluation failed", zap.Error(verr))
			return refuse(v, protocol.Wrap(protocol.Internal, verr, "the policy could not be evaluated"))
		}
		if !view.AnyEntitled() {
			return refuse(v, protocol.Errorf(protocol.Unauthorized, msgNoEntitlement).Decided(decisionlog.RuleNoCandidate, ""))
		}
	}
	owner := OwnerOf(rev, p)
	for i, t := range r.Tasks {
		b, err := a.owned(ctx, owner, t.ID)
		if err != nil {
			return refuse(v, err)
		}
		if i == 0 && t.ID == r.TaskID {
			v.Task = &b
		}
	}
	for _, c := range r.Contexts {
		if c.Filter {
			// A filter narrows the caller's own results (the store lists the owner's tasks in
			// that context): another owner's context answers an empty page, exactly as one
			// that does not exist. Refusing it would tell the two apart.
			continue
		}
		if err := a.context(ctx, owner, r, c, v.Task); err != nil {
			return refuse(v, err)
		}
	}
	for _, u := range r.Push {
		if err := rev.Push.CheckURL(u.URL); err != nil {
			return refuse(v, protocol.Wrap(protocol.InvalidParams, err, err.Error()))
		}
	}
	if err := a.limits(ctx, rev, r, p, v.Task, decided.Limits); err != nil {
		return refuse(v, err)
	}
	if err := servedVersion(r); err != nil {
		return refuse(v, err)
	}
	if v.Quotas, v.Applied, err = a.charge(ctx, rev, r, p, v.Task, decided.Quotas, in.DecisionID); err != nil {
		return refuse(v, err)
	}
	v.Allowed = true
	return v
}

// servedBinding refuses a gRPC call when the agent does not serve the gRPC binding (agent.grpc:
// false): the method does not exist here, for any caller.
func servedBinding(rev *revision.State, r *protocol.Request) *protocol.Error {
	if r.Binding == protocol.GRPC && !rev.Config().Agent.ServesGRPC() {
		return protocol.Errorf(protocol.MethodNotFound, "this agent does not serve the gRPC binding")
	}
	return nil
}

// servedVersion refuses a call to the A2A 0.3 gRPC service: only the 1.0 service is served. The
// parser reads a 0.3 gRPC call in full, so it is decided last, after every rule about what it
// names: a caller naming another's task hears TaskNotFound as on every other binding (the
// two-door sweep holds each 0.3 gRPC position to that), and only a request admissible in every
// other respect learns that the service is not served.
func servedVersion(r *protocol.Request) *protocol.Error {
	if r.Binding == protocol.GRPC && r.Version != protocol.V1 {
		return protocol.Errorf(protocol.VersionNotSupported, "the A2A 0.3 gRPC service is not served; use %s", protocol.GRPCService)
	}
	return nil
}

// limits enforces the capability's limits (max_body_bytes, max_parts, max_file_bytes) when the
// request's capability is already known before routing: a message continuing a bound task, or a
// method an extension adds. Then both doors refuse it alike; a new message's capability is the
// router's choice, and the gateway enforces its limits after routing (enforce.Limits, the same
// function). decided are the limits of an extension method's capability, from the decision that
// admitted it (not decided again).
func (a *Admitter) limits(ctx context.Context, rev *revision.State, r *protocol.Request, p identity.Principal, task *tasks.Binding, decided map[string]any) *protocol.Error {
	var capID string
	limits := decided
	switch {
	case r.Operation == protocol.ExtensionMethod && r.Extension != nil:
		capID = r.Extension.Capability
	case r.Operation.Message():
		var ok bool
		if capID, ok = boundCapability(r, task); !ok {
			return nil // a new message: its capability is the router's choice
		}
		m, ok := rev.Registry().Get(capID)
		if !ok || len(m.Limits) == 0 {
			return nil // nothing to enforce here; the gateway's re-check answers for a missing capability
		}
		dec, err := rev.Engine.Decide(ctx, p.Caller(), capID)
		if err != nil {
			a.log.Error("policy evaluation failed", zap.Error(err))
			return protocol.Wrap(protocol.Internal, err, "the policy could not be evaluated")
		}
		limits = dec.Limits
	default:
		return nil
	}
	if len(limits) == 0 {
		return nil
	}
	params, perr := r.ForwardParams()
	if perr != nil {
		return perr
	}
	return enforce.Limits(capID, limits, r.Message, len(params))
}

// refuse is every refusal's way out of Admit. It guarantees the verdict's error: a refusal
// without one (a bug) is Internal, never an admission.
func refuse(v Verdict, err *protocol.Error) Verdict {
	if err == nil {
		err = protocol.Errorf(protocol.Internal, "admission refused without a reason")
	}
	v.Allowed, v.Err = false, err
	return v
}

// authenticate finds the caller: the bearer token when one is sent (it wins over a client
// certificate), else the mTLS peer when the revision maps it, else anonymous.
func authenticate(ctx context.Context, rev *revision.State, in Input) (identity.Principal, *protocol.Error) {
	authz, err := protocol.Credentials(in.Header)
	if err != nil {
		return identity.Principal{}, err
	}
	if authz != "" {
		p, verr := rev.Verifier.Verify(ctx, authz)
		if verr != nil {
			return identity.Principal{}, identity.ProtocolError(verr)
		}
		return p, nil
	}
	if in.Peer != "" {
		if p, ok := rev.Peers[in.Peer]; ok {
			return p, nil
		}
	}
	return identity.Principal{}, nil
}

// requireCaller is what each operation requires of the caller before anything it names is
// looked at. Only an authenticated caller owns tasks and contexts (even with anonymous_public, a
// task or conversation bound to nobody would be every anonymous caller's), so a request naming
// any task or context needs a credential.
func requireCaller(rev *revision.State, r *protocol.Request, p identity.Principal) *protocol.Error {
	if p.Authenticated {
		return nil
	}
	switch {
	case (r.Operation.Message() || r.Operation == protocol.ExtensionMethod) && len(r.Tasks) == 0 && len(r.Contexts) == 0 &&
		rev.Config().Auth.AnonymousPublic:
		return nil
	case r.Operation.Known() && !r.Operation.Public():
		return protocol.MissingCredentials().Decided(decisionlog.RuleCredential, "")
	}
	return protocol.Errorf(protocol.MethodNotFound, "operation %q is not recognised", r.Operation)
}

// checkTenant refuses a request whose tenant (path prefix, params.tenant, or a push config's) is
// not the caller's; a caller with no tenant may name none. Task operations answer as for a task
// that does not exist, so nothing is learnt about other tenants.
func checkTenant(r *protocol.Request, p identity.Principal) *protocol.Error {
	if r.Tenant == "" || r.Tenant == p.Tenant {
		return nil
	}
	if len(r.Tasks) > 0 && !r.Operation.Message() {
		return protocol.Errorf(protocol.TaskNotFound, msgTaskNotFound).Decided(decisionlog.RuleTenant, "")
	}
	if p.Tenant == "" {
		return protocol.Errorf(protocol.Unauthorized, msgTenantNoneOK, r.Tenant).Decided(decisionlog.RuleTenant, "")
	}
	return protocol.Errorf(protocol.Unauthorized, msgTenant, r.Tenant).Decided(decisionlog.RuleTenant, "")
}

// OwnerOf is the task owner a principal is: issuer, subject and tenant. Bindings written before
// issuers were recorded belong to it only when the revision names the one issuer that could
// have written them (revision.State.LegacyIssuer).
func OwnerOf(rev *revision.State, p identity.Principal) tasks.Owner {
	return tasks.Owner{
		Issuer:  p.Issuer,
		Subject: p.Subject,
		Tenant:  p.Tenant,
		Legacy:  rev.LegacyIssuer != "" && p.Issuer == rev.LegacyIssuer,
	}
}

// owned looks up a task the owner must own. Another caller's task and an unknown task get the
// same answer.
func (a *Admitter) owned(ctx context.Context, o tasks.Owner, taskID string) (tasks.Binding, *protocol.Error) {
	if a.owners == nil {
		return tasks.Binding{}, protocol.Errorf(protocol.Internal, "task ownership cannot be checked: no task store is configured")
	}
	b, ok, err := a.owners.Lookup(ctx, taskID)
	if err != nil {
		a.log.Error("task store lookup failed", zap.Error(err))
		return tasks.Binding{}, StoreError(err)
	}
	if !ok || !b.OwnedBy(o) {
		return tasks.Binding{}, protocol.Errorf(protocol.TaskNotFound, msgTaskNotFound).Decided(decisionlog.RuleTaskOwner, "")
	}
	return b, nil
}

// context admits a context the request names. It must be the owner's, or — named by a message
// (a new conversation) — one nobody holds yet, which the owner claims here, atomically: of two
// callers naming the same new id, one holds it and the other is refused. A message continuing a
// task must name the task's context when the handler said which (task.ContextID); naming another
// is InvalidParams, but only once that other context is the caller's own, and it is not claimed.
// Another owner's context and one that does not exist get the same answer as a task that does
// not exist. An extension method's contextId only looks up; ListTasks' filter is not admitted
// here at all (protocol.ContextRef.Filter).
func (a *Admitter) context(ctx context.Context, o tasks.Owner, r *protocol.Request, ref protocol.ContextRef, task *tasks.Binding) *protocol.Error {
	if a.owners == nil {
		return protocol.Errorf(protocol.Internal, "context ownership cannot be checked: no task store is configured")
	}
	if o.Subject == "" {
		return protocol.Errorf(protocol.TaskNotFound, msgTaskNotFound).Decided(decisionlog.RuleContextOwner, "") // owns nothing, claims nothing
	}
	elsewhere := task != nil && task.ContextID != "" && task.ContextID != ref.ID
	var (
		held tasks.Context
		ok   = true
		err  error
	)
	if r.Operation.Needs(protocol.StoreClaim) && !elsewhere {
		held, err = a.owners.ClaimContext(ctx, tasks.Context{ContextID: ref.ID, Issuer: o.Issuer, Subject: o.Subject, Tenant: o.Tenant})
	} else {
		held, ok, err = a.owners.LookupContext(ctx, ref.ID)
	}
	if err != nil {
		a.log.Error("task store context lookup failed", zap.Error(err))
		return StoreError(err)
	}
	if !ok || !held.OwnedBy(o) {
		return protocol.Errorf(protocol.TaskNotFound, msgTaskNotFound).Decided(decisionlog.RuleContextOwner, "")
	}
	if elsewhere {
		return protocol.Errorf(protocol.InvalidParams, "message.contextId is not the context of the task the message continues").
			Decided(decisionlog.RuleContextOwner, "")
	}
	return nil
}

// extensionMethod admits a method an extension adds: only when the caller activated that
// extension (otherwise the method does not exist for it), and only when the caller is entitled
// to the capability that serves it. It returns that decision (its limits and quotas).
func (a *Admitter) extensionMethod(ctx context.Context, rev *revision.State, r *protocol.Request, p identity.Principal, activated []string) (engine.Decision, *protocol.Error) {
	x := r.Extension
	if x == nil {
		return engine.Decision{}, protocol.Errorf(protocol.Internal, "the method's extension is not known")
	}
	if !slices.Contains(activated, x.URI) {
		return engine.Decision{}, protocol.Errorf(protocol.MethodNotFound, "method %q is added by extension %s; activate it in %s", protocol.ForLog(r.Method), x.URI, protocol.ExtensionsHeader).
			Decided(decisionlog.RuleExtensionMethod, x.Capability)
	}
	dec, err := rev.Engine.Decide(ctx, p.Caller(), x.Capability)
	if err != nil {
		a.log.Error("policy evaluation failed", zap.Error(err))
		return engine.Decision{}, protocol.Wrap(protocol.Internal, err, "the policy could not be evaluated")
	}
	if !dec.Entitled {
		e := NotEntitled(p, fmt.Sprintf("method %q", protocol.ForLog(r.Method)))
		if e.Code == protocol.Unauthenticated {
			return engine.Decision{}, e.Decided(decisionlog.RuleCredential, x.Capability)
		}
		return engine.Decision{}, e.Decided(decisionlog.RuleExtensionMethod, x.Capability)
	}
	return dec, nil
}

// NotEntitled is the refusal of a caller p whom the policy does not entitle to what it asked
// for, at admission (a method an extension adds) and at the handler call (the dispatcher's
// re-check): a caller without a credential is asked for one, which may entitle it; an
// authenticated caller is Unauthorized. what names the refused thing as the caller named it or
// may know it ("capability lookup-invoice", `method "finance/explainVariance"`), never a
// capability hidden behind what it named.
func NotEntitled(p identity.Principal, what string) *protocol.Error {
	if !p.Authenticated {
		return protocol.MissingCredentials()
	}
	return protocol.Errorf(protocol.Unauthorized, "the caller is not entitled to %s", what)
}

// StoreError is the answer when the task store fails: a binding conflict is the handler's fault;
// anything else is Unavailable (outcome not_run): the request did nothing, and the caller may
// send it again. The dispatcher answers the same for a store failure before any handler call;
// after one it answers that the outcome is unknown (docs/operations.md, "What an error tells a
// caller").
func StoreError(err error) *protocol.Error {
	if errors.Is(err, tasks.ErrConflict) {
		return protocol.Wrap(protocol.InvalidAgentResponse, err, "the handler returned a task id that is already bound elsewhere")
	}
	return protocol.Wrap(protocol.Unavailable, err, "task bindings are unavailable; try again later").
		WithMetadata(protocol.MetaOutcome, protocol.OutcomeNotRun)
}
