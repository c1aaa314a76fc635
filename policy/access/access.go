// Package access computes access reviews: which caller class may see or run
// which capability (the matrix), and what a change of deployment does to it
// (the diff), with the policy's own reason codes.
package access

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"time"

	"golang.org/x/sync/errgroup"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/policy/quota"
)

// Class is a named caller class: one row of the matrix.
type Class struct {
	Name        string
	Description string
	Caller      engine.Caller
}

// Who describes the class's caller: "anonymous", or "authenticated,
// tenant acme, scopes [a b]".
func (c Class) Who() string {
	if !c.Caller.Authenticated {
		return "anonymous"
	}
	parts := []string{"authenticated"}
	if c.Caller.Subject != "" {
		parts = append(parts, fmt.Sprintf("subject %s", c.Caller.Subject))
	}
	if c.Caller.Tenant != "" {
		parts = append(parts, fmt.Sprintf("tenant %s", c.Caller.Tenant))
	}
	if len(c.Caller.Scopes) > 0 {
		parts = append(parts, fmt.Sprintf("scopes [%s]", strings.Join(c.Caller.Scopes, " ")))
	}
	return strings.Join(parts, ", ")
}

// Capability is one column of the matrix.
type Capability struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	Visibility string `json:"visibility"`
	// Owner is the manifest's owner (for reviewers), when the engine
	// exposes its snapshot.
	Owner string `json:"owner,omitempty"`
	// Routing is the routing mode (manifest routing.mode) when it is not
	// auto: confirm or explicit.
	Routing string `json:"routing,omitempty"`
}

// RoutingMode is the capability's routing mode: auto, confirm or explicit.
func (c Capability) RoutingMode() string {
	if c.Routing == "" {
		return "auto"
	}
	return c.Routing
}

// Level is what a cell grants.
type Level string

// Levels, from least to most.
const (
	None           Level = "none"            // neither visible nor runnable
	Visible        Level = "visible"         // in the class's card, not runnable
	EntitledHidden Level = "entitled-hidden" // runnable, never in a card (internal)
	Entitled       Level = "entitled"        // in the card and runnable
)

// Cell is one class's decision for one capability.
type Cell struct {
	Visible, Entitled               bool
	VisibleReasons, EntitledReasons []engine.Reason
	// Quotas are the quotas a call of the class is counted against (set
	// for entitled cells of a deployment with quotas).
	Quotas []quota.Applied
}

// Level is the cell's level.
func (c Cell) Level() Level {
	switch {
	case c.Visible && c.Entitled:
		return Entitled
	case c.Entitled:
		return EntitledHidden
	case c.Visible:
		return Visible
	}
	return None
}

// Rule names the rules that decided the cell's level: what granted it,
// then what refused the rest ("not visible: ...", "not entitled: ..."); a
// cell that grants nothing lists every refusal. Both reason lists are in
// the cell.
func (c Cell) Rule() string {
	pick := func(rs []engine.Reason, effect string) []string {
		var out []string
		for _, r := range rs {
			if r.Effect == effect {
				out = append(out, r.String())
			}
		}
		return out
	}
	join := func(ss []string) string { return strings.Join(ss, " ") }
	switch c.Level() {
	case Entitled:
		return join(pick(c.EntitledReasons, "grant"))
	case EntitledHidden:
		return join(pick(c.EntitledReasons, "grant")) + "; not visible: " + join(pick(c.VisibleReasons, "refuse"))
	case Visible:
		return join(pick(c.VisibleReasons, "grant")) + "; not entitled: " + join(pick(c.EntitledReasons, "refuse"))
	}
	refused := pick(c.EntitledReasons, "refuse")
	for _, r := range pick(c.VisibleReasons, "refuse") {
		if !slices.Contains(refused, r) {
			refused = append(refused, r)
		}
	}
	return join(refused)
}

// absent is the cell of a capability a deployment does not have: refused
// with the policy's reason for an id not in the registry.
var absent = Cell{
	VisibleReasons:  []engine.Reason{{Rule: "capability.unknown", Effect: "refuse"}},
	EntitledReasons: []engine.Reason{{Rule: "capability.unknown", Effect: "refuse"}},
}

// Matrix is every class's decision for every capability of one revision.
type Matrix struct {
	Revision     string
	Classes      []Class
	Capabilities []Capability // id order
	// Facts are the deployment's fields a diff names as causes (nil when
	// the engine does not expose its snapshot); the caller adds the auth
	// fields the snapshot lacks with Facts.AddAuth.
	Facts *Facts
	// Provenance says where the report came from; reports print it when
	// set.
	Provenance Provenance
	// Plans are the deployment's quota plans (for why a quota applies).
	Plans  []compile.Plan
	rows   []*engine.Review    // per class
	quotas [][][]quota.Applied // per class, per review index; nil: no quotas
	cols   []int               // the review index of each column; nil: the identity
}

// Provenance is the header of a report: when and by which capgate it was
// generated, and from which config. The policy revision is the matrix's
// (or the diff's two).
type Provenance struct {
	GeneratedAt time.Time
	Version     string // capgate's
	Commit      string // the commit capgate was built from, "" when unknown
	Config      string // the config path (or source) reviewed
}

// Lines is the provenance as "name: value" lines, empty when unset.
func (p Provenance) Lines() []string {
	if p == (Provenance{}) {
		return nil
	}
	commit := p.Commit
	if commit == "" {
		commit = "unknown"
	}
	return []string{
		"generated at: " + p.GeneratedAt.UTC().Format(time.RFC3339),
		"capgate: " + p.Version + " (commit " + commit + ")",
		"config: " + p.Config,
	}
}

// col is the review index of column j.
func (m *Matrix) col(j int) int {
	if m.cols == nil {
		return j
	}
	return m.cols[j]
}

// Select returns the matrix of only the named classes and capabilities
// (all of them when a list is empty), in the matrix's order: "who can
// run book-flight?" is Select(nil, []string{"book-flight"}). An unknown
// name is an error that lists the known ones.
func (m *Matrix) Select(classes, capabilities []string) (*Matrix, error) {
	out := *m
	if len(classes) > 0 {
		out.Classes, out.rows, out.quotas = nil, nil, nil
		for i, c := range m.Classes {
			if slices.Contains(classes, c.Name) {
				out.Classes = append(out.Classes, c)
				out.rows = append(out.rows, m.rows[i])
				if m.quotas != nil {
					out.quotas = append(out.quotas, m.quotas[i])
				}
			}
		}
		if err := unknown("caller class", classes, len(out.Classes), func(i int) string { return m.Classes[i].Name }, len(m.Classes)); err != nil {
			return nil, err
		}
	}
	if len(capabilities) > 0 {
		out.Capabilities, out.cols = nil, []int{}
		for j, c := range m.Capabilities {
			if slices.Contains(capabilities, c.ID) {
				out.Capabilities = append(out.Capabilities, c)
				out.cols = append(out.cols, m.col(j))
			}
		}
		if err := unknown("capability", capabilities, len(out.Capabilities), func(j int) string { return m.Capabilities[j].ID }, len(m.Capabilities)); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// unknown names the wanted names that are not among the n known ones.
func unknown(what string, wanted []string, found int, name func(int) string, n int) error {
	if found == len(slices.Compact(slices.Sorted(slices.Values(wanted)))) {
		return nil
	}
	known := make([]string, n)
	for i := range known {
		known[i] = name(i)
	}
	var missing []string
	for _, w := range wanted {
		if !slices.Contains(known, w) {
			missing = append(missing, w)
		}
	}
	return fmt.Errorf("unknown %s %s (known: %s)", what, strings.Join(missing, ", "), strings.Join(known, ", "))
}

// Cell returns class i's cell for capability j.
func (m *Matrix) Cell(i, j int) Cell {
	d := m.rows[i].Decision(m.col(j))
	c := Cell{Visible: d.Visible, Entitled: d.Entitled, VisibleReasons: d.VisibleReasons, EntitledReasons: d.EntitledReasons}
	if m.quotas != nil {
		c.Quotas = m.quotas[i][m.col(j)]
	}
	return c
}

// Decider is the engine as the matrix needs it.
type Decider interface {
	Revision() string
	Review(ctx context.Context, c engine.Caller) (*engine.Review, error)
}

var _ Decider = (*engine.Engine)(nil)

// Build decides every class over the engine's registry (one engine.Review
// per class, as many at once as there are CPUs); cells are assembled when
// read. Deny modules of the snapshot take part like in every other
// decision.
func Build(ctx context.Context, e Decider, classes []Class) (*Matrix, error) {
	if err := checkNames(classes); err != nil {
		return nil, err
	}
	m := &Matrix{Revision: e.Revision(), Classes: classes, rows: make([]*engine.Review, len(classes))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, c := range classes {
		g.Go(func() error {
			r, err := e.Review(gctx, c.Caller)
			if err != nil {
				return fmt.Errorf("caller class %s: %w", c.Name, err)
			}
			m.rows[i] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	r := m.rows[0] // every review covers the same registry
	m.Capabilities = make([]Capability, r.Len())
	var reg *manifest.Registry
	quotas := false
	if s, ok := e.(interface{ Snapshot() *compile.Snapshot }); ok {
		m.Facts = FactsOf(s.Snapshot())
		reg = s.Snapshot().Registry
		m.Plans, quotas = snapshotQuotas(s.Snapshot())
	}
	// Quotas cost one Explain per class: only when the deployment has any.
	if x, ok := e.(explainer); ok && quotas {
		if err := m.addQuotas(ctx, x); err != nil {
			return nil, err
		}
	}
	for j := range m.Capabilities {
		c := &m.Capabilities[j]
		c.ID, c.State, c.Visibility = r.Capability(j)
		if reg != nil {
			if mc, ok := reg.Get(c.ID); ok {
				c.Owner = mc.Owner
			}
		}
		if mode := r.RoutingMode(j); mode != "auto" {
			c.Routing = mode
		}
	}
	return m, nil
}

func checkNames(classes []Class) error {
	if len(classes) == 0 {
		return fmt.Errorf("no caller classes")
	}
	seen := make(map[string]bool, len(classes))
	for _, c := range classes {
		if c.Name == "" {
			return fmt.Errorf("caller class without a name")
		}
		if seen[c.Name] {
			return fmt.Errorf("caller class %q named twice", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}
