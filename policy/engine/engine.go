// Package engine evaluates capgate's policy with OPA: queries prepared once per snapshot, per-class cached views, decisions and explanations.
package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/quota"
)

// DefaultCacheSize is how many entitlement classes' views an engine keeps.
const DefaultCacheSize = 4096

// DefaultDecisionCacheSize is how many decisions (entitlement class ×
// capability) an engine keeps.
const DefaultDecisionCacheSize = 4096

// The prepared queries. The view query asks for both sets in one
// evaluation so they share the rule cache.
const (
	viewQuery     = "visible := data.capgate.authz.visible; entitled := data.capgate.authz.entitled"
	decisionQuery = "data.capgate.authz.decision"
	explainQuery  = "data.capgate.authz.explain"
)

// Caller is the principal a decision is made for.
type Caller struct {
	Authenticated bool
	// Issuer is the iss of the caller's token ("" for an mTLS peer or an
	// anonymous caller); quota plans may be granted by issuer.
	Issuer  string
	Subject string
	Tenant  string
	Scopes  []string
}

// Reason is one rule that fired, as the policy reports it.
type Reason struct {
	Rule   string `json:"rule"`
	Effect string `json:"effect"` // "grant" or "refuse"
	Detail string `json:"detail,omitempty"`
}

// Decision is the policy's full answer for one capability and caller.
// Entitled is the execution decision (the policy's allow).
type Decision struct {
	Capability      string   `json:"capability"`
	Exists          bool     `json:"exists"`
	Visible         bool     `json:"visible"`
	Entitled        bool     `json:"entitled"`
	State           string   `json:"state,omitempty"`
	Visibility      string   `json:"visibility,omitempty"`
	VisibleReasons  []Reason `json:"visible_reasons"`
	EntitledReasons []Reason `json:"entitled_reasons"`
	// Limits are the capability's limits as the policy reports them (the
	// manifest's limits; empty when it has none). Whole numbers are int64,
	// others float64. Callers must not modify them.
	Limits map[string]any `json:"limits,omitempty"`
	// Quotas are the quotas the policy decided apply to a call of the
	// capability by this caller, sorted by id (none: no quota applies).
	// See package quota for the contract. Callers must not modify them.
	Quotas []quota.Applied `json:"quotas,omitempty"`
}

// Option tunes an engine.
type Option func(*options)

type options struct {
	log          *zap.Logger
	cacheSize    int
	decisionSize int
	evals        int
}

// WithLogger sets the logger (default: none).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithCacheSize bounds the view cache to n entitlement classes
// (DefaultCacheSize by default; n must be positive).
func WithCacheSize(n int) Option { return func(o *options) { o.cacheSize = n } }

// WithDecisionCacheSize bounds the decision cache to n decisions, one per
// entitlement class and capability (DefaultDecisionCacheSize by default;
// n must be positive).
func WithDecisionCacheSize(n int) Option { return func(o *options) { o.decisionSize = n } }

// WithConcurrentEvaluations bounds how many views are evaluated at once
// (default GOMAXPROCS; n must be positive). A view evaluation is CPU-bound
// and, over a large registry, allocates megabytes while it runs: running
// more at once than there are CPUs only adds to the peak memory when many
// new entitlement classes arrive together (a restart, a reload).
func WithConcurrentEvaluations(n int) Option { return func(o *options) { o.evals = n } }

// Engine evaluates one snapshot. It is immutable and safe for concurrent
// use; a new revision is a new Engine.
type Engine struct {
	snap      *compile.Snapshot
	log       *zap.Logger
	bySubject bool
	views     *lru.Cache[string, *View]
	// decisions holds Decide's answers by class and capability (existing
	// capabilities only: an unknown id is never a key).
	decisions *lru.Cache[string, Decision]
	flight    singleflight.Group
	// evalSlots holds one token per view evaluation that may run now.
	evalSlots chan struct{}

	viewQ, decisionQ, explainQ rego.PreparedEvalQuery

	// The compiled policy and its store, for queries prepared later.
	compiler *ast.Compiler
	store    storage.Store

	// Review's query, the distinct profile keys and each capability's
	// index among them, on first use.
	reviewOnce   sync.Once
	reviewQ      rego.PreparedEvalQuery
	reviewErr    error
	profileKeys  []string
	profileIndex []int
}

// New prepares every query once over the snapshot's compiled modules and
// data store (Snapshot.Policy: for a built snapshot, the ones its policy
// check evaluated); requests only evaluate.
func New(ctx context.Context, s *compile.Snapshot, opts ...Option) (*Engine, error) {
	o := options{cacheSize: DefaultCacheSize, decisionSize: DefaultDecisionCacheSize, evals: runtime.GOMAXPROCS(0)}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if s == nil || s.Registry == nil {
		return nil, errors.New("new policy engine: nil snapshot")
	}
	if o.cacheSize < 1 {
		return nil, fmt.Errorf("new policy engine: cache size %d: must be positive", o.cacheSize)
	}
	if o.decisionSize < 1 {
		return nil, fmt.Errorf("new policy engine: decision cache size %d: must be positive", o.decisionSize)
	}
	if o.evals < 1 {
		return nil, fmt.Errorf("new policy engine: concurrent evaluations %d: must be positive", o.evals)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("new policy engine: %w", err)
	}
	start := time.Now()
	compiler, store, err := s.Policy()
	if err != nil {
		return nil, fmt.Errorf("new policy engine: %w", err)
	}
	views, err := lru.New[string, *View](o.cacheSize)
	if err != nil {
		return nil, fmt.Errorf("new policy engine: %w", err)
	}
	decisions, err := lru.New[string, Decision](o.decisionSize)
	if err != nil {
		return nil, fmt.Errorf("new policy engine: %w", err)
	}
	e := &Engine{
		snap:      s,
		log:       o.log.Named("engine"),
		bySubject: s.SubjectSensitive(),
		views:     views,
		decisions: decisions,
		evalSlots: make(chan struct{}, o.evals),
		compiler:  compiler,
		store:     store,
	}
	for _, q := range []struct {
		query string
		dst   *rego.PreparedEvalQuery
	}{{viewQuery, &e.viewQ}, {decisionQuery, &e.decisionQ}, {explainQuery, &e.explainQ}} {
		if *q.dst, err = e.prepare(ctx, q.query); err != nil {
			return nil, fmt.Errorf("new policy engine: %w", err)
		}
	}
	e.log.Info("policy engine ready",
		zap.String("revision", s.Revision),
		zap.Int("capabilities", s.Registry.Len()),
		zap.Bool("subject_in_class", e.bySubject),
		zap.Int("cache_size", o.cacheSize),
		zap.Duration("prepare", time.Since(start)))
	return e, nil
}

// prepare prepares one query over the engine's compiled policy and store.
func (e *Engine) prepare(ctx context.Context, query string) (rego.PreparedEvalQuery, error) {
	pq, err := rego.New(rego.Query(query), rego.Compiler(e.compiler), rego.Store(e.store)).PrepareForEval(ctx)
	if err != nil {
		return rego.PreparedEvalQuery{}, fmt.Errorf("prepare %s: %w", query, err)
	}
	return pq, nil
}

// Snapshot returns the snapshot the engine evaluates.
func (e *Engine) Snapshot() *compile.Snapshot { return e.snap }

// Revision is the snapshot's revision.
func (e *Engine) Revision() string { return e.snap.Revision }

// CachedViews is how many entitlement classes' views are cached now.
func (e *Engine) CachedViews() int { return e.views.Len() }

// View returns the caller's entitlement class's view, from the cache or by
// one evaluation shared by every concurrent caller of the class. The class
// is (authenticated, tenant, sorted distinct scopes, preview), plus the
// subject when modules beyond the embedded policy are loaded: the embedded
// policy never reads the subject, extra deny modules may. On error no view
// is returned.
func (e *Engine) View(ctx context.Context, c Caller) (v *View, err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("evaluate policy: %w", err)
	}
	if span := child(ctx, "capgate.policy.view", e.Revision()); span != nil {
		defer func() { endPolicySpan(span, err) }()
	}
	c = e.class(c)
	key := classKey(c)
	if v, ok := e.views.Get(key); ok {
		return v, nil
	}
	// The shared evaluation must not fail because the first caller gave
	// up, so it runs detached; each caller still stops waiting at its own
	// deadline.
	detached := context.WithoutCancel(ctx)
	ch := e.flight.DoChan(key, func() (any, error) {
		if v, ok := e.views.Peek(key); ok {
			return v, nil
		}
		e.evalSlots <- struct{}{}
		defer func() { <-e.evalSlots }()
		v, err := e.evalView(detached, c)
		if err != nil {
			return nil, err
		}
		e.views.Add(key, v)
		return v, nil
	})
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("evaluate policy: %w", ctx.Err())
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		v, ok := r.Val.(*View)
		if !ok {
			return nil, errors.New("evaluate policy: no view")
		}
		return v, nil
	}
}

// child starts a policy span under the recording span of ctx, with its
// provider; nil (nothing started) when the request is not traced.
func child(ctx context.Context, name, revision string) trace.Span {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return nil
	}
	_, span := parent.TracerProvider().Tracer("github.com/capgate/capgate").Start(ctx, name,
		trace.WithAttributes(attribute.String("capgate.policy.revision", revision)))
	return span
}

func endPolicySpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "policy evaluation failed")
	}
	span.End()
}

// class normalises a caller to its entitlement class: scopes sorted and
// deduplicated, the subject dropped unless decisions may depend on it.
func (e *Engine) class(c Caller) Caller {
	scopes := slices.Clone(c.Scopes)
	slices.Sort(scopes)
	c.Scopes = slices.Compact(scopes)
	if !e.bySubject {
		c.Subject = ""
	}
	return c
}

// classKey encodes a normalised caller unambiguously (length-prefixed).
func classKey(c Caller) string { return string(appendClassKey(make([]byte, 0, 64), c)) }

// decisionKey encodes a normalised caller and a capability id
// unambiguously: the class key, then the id length-prefixed.
func decisionKey(c Caller, capability string) string {
	return string(appendField(appendClassKey(make([]byte, 0, 96), c), capability))
}

func appendClassKey(b []byte, c Caller) []byte {
	b = strconv.AppendBool(b, c.Authenticated)
	b = appendField(b, c.Issuer)
	b = appendField(b, c.Tenant)
	b = appendField(b, c.Subject)
	b = strconv.AppendInt(b, int64(len(c.Scopes)), 10)
	for _, s := range c.Scopes {
		b = appendField(b, s)
	}
	return b
}

func appendField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

func (e *Engine) evalView(ctx context.Context, c Caller) (*View, error) {
	rs, err := e.viewQ.Eval(ctx, rego.EvalParsedInput(input(c)))
	if err != nil {
		return nil, fmt.Errorf("evaluate policy: %w", err)
	}
	if len(rs) != 1 {
		return nil, errors.New("evaluate policy: view is undefined")
	}
	reg := e.snap.Registry
	v := &View{revision: e.snap.Revision, reg: reg, visible: newBitset(reg.Len()), entitled: newBitset(reg.Len())}
	for _, set := range []struct {
		name string
		bits bitset
	}{{"visible", v.visible}, {"entitled", v.entitled}} {
		ids, ok := rs[0].Bindings[set.name].([]any)
		if !ok {
			return nil, fmt.Errorf("evaluate policy: %s is not a set", set.name)
		}
		for _, x := range ids {
			id, _ := x.(string)
			i := reg.Index(id)
			if i < 0 {
				return nil, fmt.Errorf("evaluate policy: %s holds unknown capability %q", set.name, id)
			}
			set.bits.set(i)
		}
	}
	return v, nil
}

// Decide returns the decision and its reasons for one capability. An
// unknown id is a refusal with reason capability.unknown, not an error.
//
// Decisions are cached like views: by the caller's entitlement class (see
// View) and the capability, for this revision (a new revision is a new
// Engine), and only for capabilities of the registry. The decision's
// slices and map are shared by every caller of the class: read only.
func (e *Engine) Decide(ctx context.Context, c Caller, capability string) (d Decision, err error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, fmt.Errorf("evaluate policy: %w", err)
	}
	if span := child(ctx, "capgate.policy.decide", e.Revision()); span != nil {
		defer func() {
			span.SetAttributes(attribute.String("capgate.capability", capability),
				attribute.Bool("capgate.policy.visible", d.Visible), attribute.Bool("capgate.policy.entitled", d.Entitled))
			endPolicySpan(span, err)
		}()
	}
	c = e.class(c)
	if e.snap.Registry.Index(capability) < 0 {
		return e.decide(ctx, c, capability) // not cached: the id may be anything a client sent
	}
	key := decisionKey(c, capability)
	if d, ok := e.decisions.Get(key); ok {
		return d, nil
	}
	if d, err = e.decide(ctx, c, capability); err != nil {
		return Decision{}, err
	}
	e.decisions.Add(key, d)
	return d, nil
}

// CachedDecisions is how many decisions are cached now.
func (e *Engine) CachedDecisions() int { return e.decisions.Len() }

// decide evaluates the decision query: Decide without the cache.
func (e *Engine) decide(ctx context.Context, c Caller, capability string) (Decision, error) {
	in := input(c)
	in.Insert(ast.StringTerm("capability"), ast.StringTerm(capability))
	rs, err := e.decisionQ.Eval(ctx, rego.EvalParsedInput(in))
	if err != nil {
		return Decision{}, fmt.Errorf("evaluate policy: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return Decision{}, errors.New("evaluate policy: decision is undefined")
	}
	d, err := parseDecision(rs[0].Expressions[0].Value)
	if err != nil {
		return Decision{}, fmt.Errorf("evaluate policy: %w", err)
	}
	if d.Capability != capability {
		return Decision{}, fmt.Errorf("evaluate policy: decision names %q, asked for %q", d.Capability, capability)
	}
	return d, nil
}

// Explain returns the decision for every capability, in id order.
func (e *Engine) Explain(ctx context.Context, c Caller) ([]Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("evaluate policy: %w", err)
	}
	rs, err := e.explainQ.Eval(ctx, rego.EvalParsedInput(input(c)))
	if err != nil {
		return nil, fmt.Errorf("evaluate policy: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, errors.New("evaluate policy: explain is undefined")
	}
	byID, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok || len(byID) != e.snap.Registry.Len() {
		return nil, errors.New("evaluate policy: explain does not cover the registry")
	}
	out := make([]Decision, 0, len(byID))
	for _, capability := range e.snap.Registry.All() {
		d, err := parseDecision(byID[capability.ID])
		if err != nil {
			return nil, fmt.Errorf("evaluate policy: %s: %w", capability.ID, err)
		}
		if d.Capability != capability.ID {
			return nil, fmt.Errorf("evaluate policy: explain names %q under %q", d.Capability, capability.ID)
		}
		out = append(out, d)
	}
	return out, nil
}

// input builds the policy input as an AST value (no JSON round trip).
func input(c Caller) ast.Object {
	scopes := make([]*ast.Term, len(c.Scopes))
	for i, s := range c.Scopes {
		scopes[i] = ast.StringTerm(s)
	}
	caller := ast.NewObject(
		ast.Item(ast.StringTerm("authenticated"), ast.BooleanTerm(c.Authenticated)),
		ast.Item(ast.StringTerm("issuer"), ast.StringTerm(c.Issuer)),
		ast.Item(ast.StringTerm("subject"), ast.StringTerm(c.Subject)),
		ast.Item(ast.StringTerm("tenant"), ast.StringTerm(c.Tenant)),
		ast.Item(ast.StringTerm("scopes"), ast.ArrayTerm(scopes...)),
	)
	return ast.NewObject(ast.Item(ast.StringTerm("caller"), ast.NewTerm(caller)))
}
