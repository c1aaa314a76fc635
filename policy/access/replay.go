package access

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capgate/capgate/policy/engine"
)

// Recorded is one entitlement question a decision event recorded, with the
// answer the serving revision gave: the caller facts the policy decided on,
// the capability and whether the caller was entitled to it (see
// docs/observability.md, "What a decision event records").
type Recorded struct {
	DecisionID string
	Time       time.Time
	Revision   string // the serving policy revision, when recorded
	Caller     Caller
	Operation  string
	Capability string
	Layer      string
	Entitled   bool
	Rules      []engine.Reason // the reasons recorded (rule and effect)
}

// Caller is who asked: the caller facts of a recorded question.
type Caller struct {
	Issuer        string   `json:"issuer,omitempty"`
	Authenticated bool     `json:"authenticated"`
	Subject       string   `json:"subject,omitempty"`
	Tenant        string   `json:"tenant,omitempty"`
	Scopes        []string `json:"scopes"`
}

// String is "issuer subject@tenant" (or "anonymous").
func (c Caller) String() string {
	if !c.Authenticated {
		return "anonymous"
	}
	s := c.Subject
	if s == "" {
		s = "-"
	}
	if c.Tenant != "" {
		s += "@" + c.Tenant
	}
	if c.Issuer != "" {
		s = c.Issuer + " " + s
	}
	return s
}

func (c Caller) engine() engine.Caller {
	return engine.Caller{Authenticated: c.Authenticated, Subject: c.Subject, Tenant: c.Tenant, Scopes: c.Scopes}
}

// Change names a flip: what was allowed is refused (a loss), or what was
// refused is allowed (a gain).
type Change string

// Changes.
const (
	Loss Change = "allowed → refused"
	Gain Change = "refused → allowed"
)

// Flip is a group of recorded questions, the same caller asking the same
// operation on the same capability, whose answer differs between two
// sides: recorded and head (a replay's flips) or recorded and base (the
// events the base does not reproduce).
type Flip struct {
	Change     Change    `json:"change"`
	Capability string    `json:"capability"`
	Caller     Caller    `json:"caller"`
	Operation  string    `json:"operation"`
	Count      int       `json:"count"`
	First      time.Time `json:"first_seen"`
	Last       time.Time `json:"last_seen"`
	// Before are the recorded deciding rules; After the other side's.
	Before []string `json:"rules_before"`
	After  []string `json:"rules_after"`
	// Revisions are the serving revisions recorded on its events.
	Revisions []string `json:"revisions,omitempty"`
}

// Tally counts the flips of one capability or one caller.
type Tally struct {
	Losses int `json:"losses"`
	Gains  int `json:"gains"`
}

// CapabilityFlips are the flips of one capability.
type CapabilityFlips struct {
	Capability string `json:"capability"`
	Tally
	Callers int `json:"callers"`
}

// CallerFlips are the flips of one caller.
type CallerFlips struct {
	Caller Caller `json:"caller"`
	Tally
	Capabilities int `json:"capabilities"`
}

// ReplayReport is what a revision would have done to recorded traffic.
type ReplayReport struct {
	Provenance   Provenance
	HeadRevision string
	BaseRevision string // "" without a base
	// Events are the decision events read; Questions the recorded
	// questions among them in the window; Skipped the events that record
	// none (no entitlement was evaluated, or their scopes were truncated);
	// OutsideWindow the questions before Since or after Until.
	Events, Questions, Skipped, OutsideWindow int
	// Distinct is how many distinct questions were evaluated.
	Distinct int
	// Counted are the events refused by a quota (over it, or its store
	// could not count): a replay holds no counters, so whether the head
	// would refuse them too is not reproduced; their entitlement question
	// is replayed like any other.
	Counted int
	// Unchanged is how many replayed questions keep their answer.
	Unchanged int
	// Flips are the questions whose answer changes, losses first.
	Flips []Flip
	// Unreproduced are the questions the base answers differently from
	// the record (a different revision served them): left out of Flips.
	Unreproduced []Flip
	ByCapability []CapabilityFlips
	ByCaller     []CallerFlips
}

// Losses and Gains count the flipped recorded decisions.
func (r *ReplayReport) Losses() int { return r.count(Loss) }

// Gains counts the recorded refusals the head would allow.
func (r *ReplayReport) Gains() int { return r.count(Gain) }

func (r *ReplayReport) count(c Change) int {
	n := 0
	for _, f := range r.Flips {
		if f.Change == c {
			n += f.Count
		}
	}
	return n
}

// Answerer is the engine as a replay needs it.
type Answerer interface {
	Revision() string
	Decide(ctx context.Context, c engine.Caller, capability string) (engine.Decision, error)
}

var _ Answerer = (*engine.Engine)(nil)

// Replay re-asks recorded questions of a head revision (and, first, of a
// base), each distinct question once.
type Replay struct {
	head, base   Answerer
	since, until time.Time
	answers      map[string]int // question key → index in ans
	ans          []answer
	flips        map[string]*Flip
	unreproduced map[string]*Flip
	key          []byte
	report       ReplayReport
}

type answer struct {
	head, base         bool
	headRules, baseRul []string
}

// NewReplay replays against head; base may be nil. Questions recorded
// before since or after until (zero: unbounded) are counted, not replayed.
func NewReplay(head, base Answerer, since, until time.Time) *Replay {
	r := &Replay{head: head, base: base, since: since, until: until,
		answers: map[string]int{}, flips: map[string]*Flip{}, unreproduced: map[string]*Flip{}}
	r.report.HeadRevision = head.Revision()
	if base != nil {
		r.report.BaseRevision = base.Revision()
	}
	return r
}

// QuotaRuleDecided is the prefix of the rule a decision event names when a
// quota refused the call (metering's "quota.<id>" and "quota.store_error").
const QuotaRuleDecided = "quota."

// Counted notes an event a quota refused (see ReplayReport.Counted).
func (r *Replay) Counted() { r.report.Counted++ }

// Event counts one decision event read and adds the questions it recorded
// (none, one or two).
func (r *Replay) Event(ctx context.Context, qs ...Recorded) error {
	r.report.Events++
	if len(qs) == 0 {
		r.report.Skipped++
	}
	for i := range qs {
		if err := r.add(ctx, &qs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (r *Replay) add(ctx context.Context, q *Recorded) error {
	windowed := !r.since.IsZero() || !r.until.IsZero()
	if windowed && (q.Time.IsZero() || q.Time.Before(r.since) || (!r.until.IsZero() && q.Time.After(r.until))) {
		r.report.OutsideWindow++
		return nil
	}
	r.report.Questions++
	r.key = questionKey(r.key[:0], q)
	i, ok := r.answers[string(r.key)]
	if !ok {
		a, err := r.evaluate(ctx, q)
		if err != nil {
			return err
		}
		i = len(r.ans)
		r.ans = append(r.ans, a)
		r.answers[string(r.key)] = i
	}
	a := &r.ans[i]
	if r.base != nil && a.base != q.Entitled {
		note(r.unreproduced, r.key, q, a.baseRul)
		return nil
	}
	if a.head == q.Entitled {
		r.report.Unchanged++
		return nil
	}
	note(r.flips, r.key, q, a.headRules)
	return nil
}

func (r *Replay) evaluate(ctx context.Context, q *Recorded) (answer, error) {
	var a answer
	c := q.Caller.engine()
	d, err := r.head.Decide(ctx, c, q.Capability)
	if err != nil {
		return a, fmt.Errorf("head: %w", err)
	}
	a.head, a.headRules = d.Entitled, ruleCodes(d.EntitledReasons)
	if r.base != nil {
		if d, err = r.base.Decide(ctx, c, q.Capability); err != nil {
			return a, fmt.Errorf("base: %w", err)
		}
		a.base, a.baseRul = d.Entitled, ruleCodes(d.EntitledReasons)
	}
	return a, nil
}

// ruleCodes are the reason codes that decided: the refusals when there
// are any (a refusal overrides every grant), else the grants.
func ruleCodes(rs []engine.Reason) []string {
	var refused, granted []string
	for _, r := range rs {
		if r.Effect == "refuse" {
			refused = append(refused, r.Rule)
		} else {
			granted = append(granted, r.Rule)
		}
	}
	if len(refused) > 0 {
		return refused
	}
	return nonNilStrings(granted)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// questionKey is the question's identity: caller facts, capability and
// operation (the recorded answer is compared, not keyed).
func questionKey(b []byte, q *Recorded) []byte {
	c := &q.Caller
	b = strconv.AppendBool(b, c.Authenticated)
	for _, s := range [...]string{c.Issuer, c.Subject, c.Tenant, q.Capability, q.Operation} {
		b = append(b, 0)
		b = append(b, s...)
	}
	for _, s := range c.Scopes {
		b = append(b, 1)
		b = append(b, s...)
	}
	return b
}

// note adds q to its flip group (keyed by the question and its recorded
// answer).
func note(groups map[string]*Flip, key []byte, q *Recorded, after []string) {
	key = strconv.AppendBool(key, q.Entitled)
	f, ok := groups[string(key)]
	if !ok {
		change := Gain
		if q.Entitled {
			change = Loss
		}
		f = &Flip{Change: change, Capability: q.Capability, Caller: q.Caller, Operation: q.Operation,
			First: q.Time, Last: q.Time, Before: ruleCodes(q.Rules), After: after}
		f.Caller.Scopes = nonNilStrings(f.Caller.Scopes)
		groups[string(key)] = f
	}
	f.Count++
	if q.Time.Before(f.First) {
		f.First = q.Time
	}
	if q.Time.After(f.Last) {
		f.Last = q.Time
	}
	if q.Revision != "" && !slices.Contains(f.Revisions, q.Revision) {
		f.Revisions = append(f.Revisions, q.Revision)
	}
}

// Report is the replay's outcome so far, flips in a stable order: losses
// first, then by capability, caller and operation.
func (r *Replay) Report() *ReplayReport {
	rep := r.report
	rep.Distinct = len(r.ans)
	rep.Flips = sortedFlips(r.flips)
	rep.Unreproduced = sortedFlips(r.unreproduced)
	caps, callers := map[string]*CapabilityFlips{}, map[string]*CallerFlips{}
	capCallers, callerCaps := map[string]map[string]bool{}, map[string]map[string]bool{}
	for _, f := range rep.Flips {
		who := callerKey(f.Caller)
		c, ok := caps[f.Capability]
		if !ok {
			c = &CapabilityFlips{Capability: f.Capability}
			caps[f.Capability], capCallers[f.Capability] = c, map[string]bool{}
		}
		k, ok := callers[who]
		if !ok {
			k = &CallerFlips{Caller: f.Caller}
			callers[who], callerCaps[who] = k, map[string]bool{}
		}
		for _, t := range []*Tally{&c.Tally, &k.Tally} {
			if f.Change == Loss {
				t.Losses += f.Count
			} else {
				t.Gains += f.Count
			}
		}
		capCallers[f.Capability][who], callerCaps[who][f.Capability] = true, true
		c.Callers, k.Capabilities = len(capCallers[f.Capability]), len(callerCaps[who])
	}
	for _, c := range caps {
		rep.ByCapability = append(rep.ByCapability, *c)
	}
	slices.SortFunc(rep.ByCapability, func(a, b CapabilityFlips) int {
		return cmp.Or(-cmp.Compare(a.Losses+a.Gains, b.Losses+b.Gains), cmp.Compare(a.Capability, b.Capability))
	})
	for _, c := range callers {
		rep.ByCaller = append(rep.ByCaller, *c)
	}
	slices.SortFunc(rep.ByCaller, func(a, b CallerFlips) int {
		return cmp.Or(-cmp.Compare(a.Losses+a.Gains, b.Losses+b.Gains), cmp.Compare(callerKey(a.Caller), callerKey(b.Caller)))
	})
	return &rep
}

func callerKey(c Caller) string {
	return fmt.Sprintf("%t\x00%s\x00%s\x00%s\x00%s", c.Authenticated, c.Issuer, c.Subject, c.Tenant, strings.Join(c.Scopes, " "))
}

func sortedFlips(m map[string]*Flip) []Flip {
	out := make([]Flip, 0, len(m))
	for _, f := range m {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b Flip) int {
		return cmp.Or(cmp.Compare(changeRank(a.Change), changeRank(b.Change)), cmp.Compare(a.Capability, b.Capability),
			cmp.Compare(callerKey(a.Caller), callerKey(b.Caller)), cmp.Compare(a.Operation, b.Operation))
	})
	return out
}

func changeRank(c Change) int {
	if c == Loss {
		return 0
	}
	return 1
}
